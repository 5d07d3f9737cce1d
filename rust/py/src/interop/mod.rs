//! Foreign histories (issue 15): the OpenAI Chat cut and LangChain's
//! `trim_messages`, reading Python objects into the core's plain data.
//! Anything outside the fast path's shapes hands the call back to the
//! reference (`ctxengine.reference.interop`), which raises the typed error.

mod chat;
mod langchain;
mod mappings;

use ctxengine_core::calibrate::Ratio;
use ctxengine_core::estimate::Profile;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::arguments;
use crate::estimator::TokenEstimator;

/// What both native cuts start from: the input list, the cut's arguments
/// checked as `select_history` checks them (before any item is read), and
/// the estimator's heuristic profile and correction.
pub(crate) struct FastCut<'py> {
    pub list: Bound<'py, PyList>,
    pub summary_floor: Option<i64>,
    pub history_tokens: i64,
    pub profile: Profile,
    pub factor: Ratio,
}

/// The start of a native cut, or `None` for input the fast path does not
/// take at all (not a list, another estimator, exact counting, which goes
/// through the estimator: the generic path).
pub(crate) fn fast_cut<'py>(
    items: &Bound<'py, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &Bound<'_, PyAny>,
) -> PyResult<Option<FastCut<'py>>> {
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
    let Some((profile, factor)) = est.get().heuristic(a.model_id) else {
        return Ok(None);
    };
    Ok(Some(FastCut {
        list: list.clone(),
        summary_floor: a.summary_floor,
        history_tokens: a.history_tokens,
        profile,
        factor,
    }))
}

/// Add this module's functions and classes to `ctxengine._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(chat::openai_chat_cut, m)?)?;
    m.add_function(wrap_pyfunction!(langchain::langchain_trim, m)?)?;
    m.add_function(wrap_pyfunction!(mappings::mappings_cut, m)?)?;
    m.add_class::<langchain::LangChainCounter>()?;
    Ok(())
}
