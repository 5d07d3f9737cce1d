//! Exact token counting (ADR 0012): thin wrappers over
//! `ctxengine_core::tokenize`. Long texts are counted with the GIL released.

use ctxengine_core::tokenize::message::exact_raw as core_exact_raw;
use ctxengine_core::tokenize::table::EncodingTable;
use ctxengine_core::tokenize::{Encoding, Method};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMapping, PyString};

use crate::errors::{estimator_error, IntoPy};

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

pub fn method(py: Python<'_>, name: &str, place: &str) -> PyResult<Method> {
    Method::from_name(name).ok_or_else(|| {
        estimator_error(
            py,
            format!(
                "{place}: unknown counting method {name:?}; known: cl100k_base, heuristic, o200k_base"
            ),
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
        let Ok(prefix) = prefix.cast::<PyString>() else {
            return Err(estimator_error(
                py,
                format!("{place}: prefix {} is not a string", prefix.repr()?),
            ));
        };
        let prefix = prefix.to_str()?.to_owned();
        let where_ = format!("{place}[{prefix:?}]");
        let Ok(name) = name.cast::<PyString>() else {
            return Err(estimator_error(
                py,
                format!("{where_}: unknown counting method {}", name.repr()?),
            ));
        };
        out.push((prefix, method(py, name.to_str()?, &where_)?));
    }
    Ok(EncodingTable::new(out))
}

/// Tokens of `text` in `encoding`, as ordinary text.
#[pyfunction]
pub fn count_tokens(py: Python<'_>, encoding_name: &str, text: &str) -> PyResult<usize> {
    let enc = encoding(py, encoding_name)?;
    if text.len() >= DETACH_BYTES {
        Ok(py.detach(|| enc.count(text)))
    } else {
        Ok(enc.count(text))
    }
}

/// The token ids of `text` in `encoding`, as ordinary text.
#[pyfunction]
pub fn encode_tokens(py: Python<'_>, encoding_name: &str, text: &str) -> PyResult<Vec<u32>> {
    let enc = encoding(py, encoding_name)?;
    Ok(py.detach(|| enc.encode(text)))
}

/// The exact raw count of a value of `kind` whose canonical JSON is `canonical`.
#[pyfunction]
pub fn exact_raw(
    py: Python<'_>,
    encoding_name: &str,
    kind: &str,
    canonical: &Bound<'_, PyBytes>,
) -> PyResult<i64> {
    let enc = encoding(py, encoding_name)?;
    core_exact_raw(enc, kind, canonical.as_bytes()).into_py(py)
}

/// The counting method of `model_id` under the built-in table and `table`.
#[pyfunction]
#[pyo3(signature = (model_id, table = None))]
pub fn counting_method(
    py: Python<'_>,
    model_id: &str,
    table: Option<&Bound<'_, PyAny>>,
) -> PyResult<&'static str> {
    Ok(self::table(py, table, "table")?.resolve(model_id).name())
}

/// SHA-256 hex over the encoding's ranks in order (length byte, bytes).
#[pyfunction]
pub fn encoding_ranks_sha256(py: Python<'_>, encoding_name: &str) -> PyResult<String> {
    let enc = encoding(py, encoding_name)?;
    Ok(ctxengine_core::hash::hex(&enc.ranks_sha256()))
}
