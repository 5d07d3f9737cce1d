//! Exact token counting (ADR 0012): thin wrappers over
//! `ctxengine_core::tokenize`. Long texts are counted with the GIL released.

use ctxengine_core::tokenize::message::exact_raw as core_exact_raw;
use ctxengine_core::tokenize::table::EncodingTable;
use ctxengine_core::tokenize::{Encoding, Method};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMapping, PyString};

use crate::arguments::{string, type_name};
use crate::errors::{argument_error, estimator_error, IntoPy};

/// Texts longer than this are counted with the GIL released.
const DETACH_BYTES: usize = 64 * 1024;

pub fn encoding(py: Python<'_>, name: &str) -> PyResult<Encoding> {
    Encoding::from_name(name).ok_or_else(|| {
        estimator_error(
            py,
            format!("unknown encoding {name:?}; known: cl100k_base, o200k_base"),
        )
    })
}

/// The caller's model-id prefix -> method entries of a mapping (or `None`).
pub fn table(
    py: Python<'_>,
    entries: Option<&Bound<'_, PyAny>>,
    place: &str,
) -> PyResult<EncodingTable> {
    let mut out = Vec::new();
    let Some(entries) = entries.filter(|e| !e.is_none()) else {
        return Ok(EncodingTable::default());
    };
    let pairs: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = if let Ok(d) = entries.cast::<PyDict>() {
        d.iter().collect()
    } else if entries.cast::<PyMapping>().is_ok() {
        entries
            .call_method0("items")?
            .try_iter()?
            .map(|p| p?.extract())
            .collect::<PyResult<_>>()?
    } else {
        return Err(estimator_error(py, format!("{place}: expected a mapping")));
    };
    for (prefix, name) in pairs {
        let Ok(text) = prefix.cast::<PyString>() else {
            return Err(estimator_error(
                py,
                format!("{place}: prefix {} is not a string", prefix.repr()?),
            ));
        };
        let shown = prefix.repr()?;
        let Ok(text) = text.to_str() else {
            return Err(estimator_error(
                py,
                format!("{place}: lone surrogate in prefix {shown}"),
            ));
        };
        let where_ = format!("{place}[{shown}]");
        let found = name
            .cast::<PyString>()
            .ok()
            .and_then(|n| n.to_str().ok())
            .and_then(Method::from_name);
        let Some(m) = found else {
            return Err(estimator_error(
                py,
                format!(
                    "{where_}: unknown counting method {}; known: cl100k_base, heuristic, o200k_base",
                    name.repr()?
                ),
            ));
        };
        out.push((text.to_owned(), m));
    }
    Ok(EncodingTable::new(out))
}

/// The encoding named by argument `encoding_name` of `function`.
fn encoding_arg(function: &str, obj: &Bound<'_, PyAny>) -> PyResult<Encoding> {
    encoding(obj.py(), string(function, "encoding_name", obj)?)
}

/// Tokens of `text` in `encoding`, as ordinary text.
#[pyfunction]
pub fn count_tokens(encoding_name: &Bound<'_, PyAny>, text: &Bound<'_, PyAny>) -> PyResult<usize> {
    let enc = encoding_arg("count_tokens", encoding_name)?;
    let text = string("count_tokens", "text", text)?;
    if text.len() >= DETACH_BYTES {
        Ok(encoding_name.py().detach(|| enc.count(text)))
    } else {
        Ok(enc.count(text))
    }
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
    let py = encoding_name.py();
    let enc = encoding_arg("exact_raw", encoding_name)?;
    let kind = string("exact_raw", "kind", kind)?;
    let Ok(bytes) = canonical.cast::<PyBytes>() else {
        return Err(argument_error(
            py,
            "exact_raw",
            "canonical",
            format!("expected bytes, got {}", type_name(canonical)),
        ));
    };
    core_exact_raw(enc, kind, bytes.as_bytes()).into_py(py)
}

/// The counting method of `model_id` under the built-in table and `table`.
#[pyfunction]
#[pyo3(signature = (model_id, table = None))]
pub fn counting_method(
    model_id: &Bound<'_, PyAny>,
    table: Option<&Bound<'_, PyAny>>,
) -> PyResult<&'static str> {
    let id = string("counting_method", "model_id", model_id)?;
    Ok(self::table(model_id.py(), table, "table")?
        .resolve(id)
        .name())
}

/// SHA-256 hex over the encoding's ranks in order (length byte, bytes).
#[pyfunction]
pub fn encoding_ranks_sha256(encoding_name: &Bound<'_, PyAny>) -> PyResult<String> {
    let enc = encoding_arg("encoding_ranks_sha256", encoding_name)?;
    Ok(ctxengine_core::hash::hex(&enc.ranks_sha256()))
}
