//! Exact token counting (ADR 0012) over `ctxengine_core::tokenize`; the
//! counting table is checked by the core (`estimate::check_table`).

use crate::arguments::{self, string, PyValues};
use crate::errors::IntoPy;
use ctxengine_core::estimate;
use ctxengine_core::tokenize::message::exact_raw as core_exact_raw;
use ctxengine_core::tokenize::Encoding;
use pyo3::prelude::*;

/// Texts longer than this are counted with the GIL released.
const DETACH_BYTES: usize = 64 * 1024;

/// The encoding named by argument `encoding_name` of `function`.
fn encoding_arg(function: &str, obj: &Bound<'_, PyAny>) -> PyResult<Encoding> {
    let name = string(function, "encoding_name", obj)?;
    let shown = obj.repr()?.to_string_lossy().into_owned();
    Encoding::named(name, &shown).into_py(obj.py())
}

/// Tokens of `text` in `encoding`, as ordinary text.
#[pyfunction]
pub fn count_tokens(encoding_name: &Bound<'_, PyAny>, text: &Bound<'_, PyAny>) -> PyResult<usize> {
    let enc = encoding_arg("count_tokens", encoding_name)?;
    let text = string("count_tokens", "text", text)?;
    let count = || enc.count(text);
    Ok(match text.len() >= DETACH_BYTES {
        true => encoding_name.py().detach(count),
        false => count(),
    })
}

/// Builds `encoding`'s tables now, with the GIL released (a host's thread
/// builds them while its event loop runs on).
#[pyfunction]
pub fn load_encoding(encoding_name: &Bound<'_, PyAny>) -> PyResult<()> {
    let enc = encoding_arg("load_encoding", encoding_name)?;
    encoding_name.py().detach(|| enc.load());
    Ok(())
}

/// The token ids of `text` in `encoding`, as ordinary text.
#[pyfunction]
pub fn encode_tokens(
    encoding_name: &Bound<'_, PyAny>,
    text: &Bound<'_, PyAny>,
) -> PyResult<Vec<u32>> {
    let enc = encoding_arg("encode_tokens", encoding_name)?;
    let text = string("encode_tokens", "text", text)?;
    Ok(encoding_name.py().detach(|| enc.encode(text)))
}

/// The exact raw count of a value of `kind` whose canonical JSON is `canonical`.
#[pyfunction]
pub fn exact_raw(
    encoding_name: &Bound<'_, PyAny>,
    kind: &Bound<'_, PyAny>,
    canonical: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    let enc = encoding_arg("exact_raw", encoding_name)?;
    let kind = string("exact_raw", "kind", kind)?;
    let bytes = arguments::bytes("exact_raw", "canonical", canonical)?;
    core_exact_raw(enc, kind, bytes).into_py(encoding_name.py())
}

/// The counting method of `model_id` under the built-in table and `table`.
#[pyfunction]
#[pyo3(signature = (model_id, table = None))]
pub fn counting_method(
    model_id: &Bound<'_, PyAny>,
    table: Option<&Bound<'_, PyAny>>,
) -> PyResult<&'static str> {
    let py = model_id.py();
    let id = string("counting_method", "model_id", model_id)?;
    let table = match table {
        Some(t) => estimate::check_table(&mut PyValues(py), t, "table").into_py(py)?,
        None => Default::default(),
    };
    Ok(table.resolve(id).name())
}

/// SHA-256 hex over the encoding's ranks in order (length byte, bytes).
#[pyfunction]
pub fn encoding_ranks_sha256(encoding_name: &Bound<'_, PyAny>) -> PyResult<String> {
    let enc = encoding_arg("encoding_ranks_sha256", encoding_name)?;
    Ok(ctxengine_core::hash::hex(&enc.ranks_sha256()))
}
