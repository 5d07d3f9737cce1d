//! Foreign histories (issue 15): the OpenAI Chat cut and LangChain's
//! `trim_messages`, reading Python objects into the core's plain data.
//! Anything outside the fast path's shapes hands the call back to the
//! reference (`ctxengine.reference.interop`), which raises the typed error.

mod chat;
mod langchain;
mod mappings;
mod value;

use ctxengine_core::interop::chat::{Cut, CutArgs};
use ctxengine_core::CoreResult;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::arguments;
use crate::errors::to_pyerr;
use crate::estimator::TokenEstimator;

/// The start of a native cut: the input list and the cut's arguments,
/// checked as `select_history` checks them (before any item is read), with
/// the estimator's heuristic profile and correction; `None` for input the
/// fast path does not take at all (not a list, another estimator, exact
/// counting, which goes through the estimator: the generic path).
pub(crate) fn fast_cut<'py>(
    items: &Bound<'py, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &Bound<'_, PyAny>,
) -> PyResult<Option<(Bound<'py, PyList>, CutArgs)>> {
    let Ok(list) = items.cast_exact::<PyList>() else {
        return Ok(None);
    };
    let a = arguments::cut_arguments(
        "select_history",
        summary_floor,
        history_tokens,
        estimator,
        model_id,
    )?;
    let Ok(est) = estimator.cast::<TokenEstimator>() else {
        return Ok(None);
    };
    let Some((profile, factor)) = est.get().lock().heuristic(a.model_id) else {
        return Ok(None);
    };
    let args = CutArgs {
        summary_floor: a.summary_floor,
        history_tokens: a.history_tokens,
        profile,
        factor,
    };
    Ok(Some((list.clone(), args)))
}

/// A core cut as the Python side reads it: the index, or `-1 - i` for the
/// reference to take from item `i`.
fn reply(py: Python<'_>, cut: CoreResult<Cut>) -> PyResult<i64> {
    match cut.map_err(|e| to_pyerr(py, e))? {
        Cut::At(c) => Ok(c as i64),
        Cut::Reference(i) => Ok(-1 - i as i64),
    }
}

/// Add this module's functions and classes to `ctxengine._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(chat::openai_chat_cut, m)?)?;
    m.add_function(wrap_pyfunction!(langchain::langchain_trim, m)?)?;
    m.add_function(wrap_pyfunction!(mappings::mappings_cut, m)?)?;
    m.add_class::<langchain::LangChainCounter>()?;
    Ok(())
}
