//! Stored token counts (ADR 0011): the estimator's `counter_id` and `prime`,
//! identical to the reference backend's. The checks, their wording and the
//! priming are `ctxengine_core::estimate::prime`; `TokenEstimator`
//! delegates here.

use ctxengine_core::estimate::{check_kind, check_prime};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::arguments::{self, type_name};
use crate::errors::{HostError, IntoPy};
use crate::estimator::{PyValues, TokenEstimator};

/// The `kind` argument: a str without lone surrogates (`EstimatorError` otherwise).
fn kind_arg<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<&'a str> {
    let text = obj.cast::<PyString>().ok().map(|s| s.to_str().ok());
    check_kind(text, || type_name(obj)).into_py(obj.py())
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
    Ok(est.lock().stored_id_of(model_id, kind))
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
    let digest = |d: Bound<'_, PyAny>| d.cast::<PyBytes>().ok()?.as_bytes().try_into().ok();
    let digests: Vec<Option<[u8; 32]>> = digests
        .try_iter()?
        .map(|d| d.map(digest))
        .collect::<PyResult<_>>()?;
    let raws: Vec<Bound<'_, PyAny>> = raws.try_iter()?.collect::<PyResult<_>>()?;
    let entries =
        check_prime(&mut PyValues(py), &digests, &raws).map_err(HostError::into_pyerr(py))?;
    est.lock().prime_all(model_id, kind, &entries);
    Ok(())
}
