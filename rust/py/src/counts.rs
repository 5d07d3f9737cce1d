//! Stored token counts (ADR 0011): the estimator's `counter_id` and `prime`,
//! identical to the reference backend's. `TokenEstimator` delegates here.

use ctxengine_core::estimate::MemoKey;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::arguments;
use crate::errors::{estimator_error, HostError};
use crate::estimator::{PyValues, TokenEstimator};

/// The `kind` argument: a str without lone surrogates (`EstimatorError` otherwise).
fn kind_arg<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<&'a str> {
    let py = obj.py();
    let s = obj.cast::<PyString>().map_err(|_| {
        let got = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        estimator_error(py, format!("kind: expected a str, got {got}"))
    })?;
    s.to_str()
        .map_err(|_| estimator_error(py, "kind: lone surrogate in string"))
}

/// The id a raw count of `kind` is stored under for the key `model_id`
/// (`Counter::stored_id`: `heuristic:BYTES_PER_TOKEN:FRAMING|kind` or
/// `ENCODING:RECIPE_VERSION|kind`).
pub fn counter_id(
    est: &TokenEstimator,
    model_id: &Bound<'_, PyAny>,
    kind: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let model_id = arguments::model_id(model_id)?;
    let kind = kind_arg(kind)?;
    let mut st = est.lock();
    let counter = st.counter_id(model_id);
    Ok(st.counter(counter).stored_id(kind))
}

/// Memoize `(model_id, kind, digest) -> raw` for each pair not memoized yet.
pub fn prime(
    py: Python<'_>,
    est: &TokenEstimator,
    model_id: &Bound<'_, PyAny>,
    kind: &Bound<'_, PyAny>,
    digests: &Bound<'_, PyAny>,
    raws: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let model_id = arguments::model_id(model_id)?;
    let kind = kind_arg(kind)?;
    let digests: Vec<Bound<'_, PyAny>> = digests.try_iter()?.collect::<PyResult<_>>()?;
    let raws: Vec<Bound<'_, PyAny>> = raws.try_iter()?.collect::<PyResult<_>>()?;
    if digests.len() != raws.len() {
        return Err(estimator_error(
            py,
            format!("prime: {} digests for {} counts", digests.len(), raws.len()),
        ));
    }
    let mut entries = Vec::with_capacity(digests.len());
    for (i, (digest, raw)) in digests.iter().zip(&raws).enumerate() {
        let bytes = match digest.cast::<PyBytes>() {
            Ok(b) if b.as_bytes().len() == 32 => b.as_bytes(),
            _ => {
                return Err(estimator_error(
                    py,
                    format!("prime: digests[{i}] is not a 32-byte SHA-256 digest"),
                ))
            }
        };
        let mut d = [0u8; 32];
        d.copy_from_slice(bytes);
        entries.push((
            d,
            ctxengine_core::estimate::check_count(
                &mut PyValues(py),
                raw,
                &format!("prime: raws[{i}]"),
            )
            .map_err(HostError::into_pyerr(py))?,
        ));
    }
    let mut st = est.lock();
    let counter = st.counter_id(model_id);
    let model = st.counter(counter).memo;
    let kind = st.kind(kind);
    for (digest, raw) in entries {
        st.memo_mut().prime(
            MemoKey {
                model,
                kind,
                digest,
            },
            raw,
        );
    }
    Ok(())
}
