//! Foreign histories (issue 15): the OpenAI Chat cut and LangChain's
//! `trim_messages`, reading Python objects into the core's plain data.
//! Anything outside the fast path's shapes hands the call back to the
//! reference (`ctxengine.reference.interop`), which raises the typed error.

mod langchain;
mod value;

use ctxengine_core::interop::chat::{chat_cut, ChatOptions, Cut, CutArgs};
use ctxengine_core::interop::mappings::mappings_cut as core_mappings_cut;
use ctxengine_core::CoreResult;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::arguments;
use crate::canonical::walker;
use crate::errors::{guard, to_pyerr};
use crate::estimator::TokenEstimator;
use value::PyValue;

/// The start of a native cut: the input list and the cut's arguments,
/// checked as `select_history` checks them (before any item is read), with
/// the estimator's heuristic profile and correction; `None` for input the
/// fast path does not take at all (not a list, another estimator, exact
/// counting, which goes through the estimator: the generic path).
fn fast_cut<'py>(
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

/// The cut over Chat messages as a message index (see
/// `ctxengine.reference.interop.openai_chat_cut`); `-1 - i` when message
/// `i` needs the reference (which raises its error), `-1` for input the
/// fast path does not take at all (not a list, another estimator,
/// provenance options off the fast path's shapes: `ChatOptions::read`). The
/// cut's arguments are checked as `select_history` checks them, before any
/// message is read.
#[pyfunction]
#[pyo3(signature = (messages, summary_floor, history_tokens, estimator, model_id, seq_field, first_seq, tool_trust))]
#[allow(clippy::too_many_arguments)]
fn openai_chat_cut(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &Bound<'_, PyAny>,
    seq_field: &Bound<'_, PyAny>,
    first_seq: &Bound<'_, PyAny>,
    tool_trust: &str,
) -> PyResult<i64> {
    guard(py, || {
        let Some((list, args)) =
            fast_cut(messages, summary_floor, history_tokens, estimator, model_id)?
        else {
            return Ok(-1);
        };
        let (seq_field, first_seq) = (PyValue(seq_field.clone()), PyValue(first_seq.clone()));
        let Some(opts) = ChatOptions::read(&seq_field, &first_seq, tool_trust) else {
            return Ok(-1);
        };
        reply(py, chat_cut(list.iter().map(PyValue), &opts, &args))
    })
}

/// The cut over item dicts (see `ctxengine.interop.mappings.select_history`),
/// each measured by the binding's canonical walker; `-1 - i` when mapping
/// `i` needs the reference, `-1` when the input is not taken at all (not a
/// list, another estimator). The cut's arguments are checked as
/// `select_history` checks them, before any mapping is read.
#[pyfunction]
fn mappings_cut(
    py: Python<'_>,
    mappings: &Bound<'_, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    guard(py, || {
        let Some((list, args)) =
            fast_cut(mappings, summary_floor, history_tokens, estimator, model_id)?
        else {
            return Ok(-1);
        };
        let mut walker = walker(py, Vec::with_capacity(1024));
        let len = |m: &PyValue<'_>| {
            walker.out.clear();
            walker.write_root(m.0.as_ptr()).ok()?;
            Some(walker.out.len())
        };
        reply(py, core_mappings_cut(list.iter().map(PyValue), &args, len))
    })
}

/// Add this module's functions and classes to `ctxengine._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(openai_chat_cut, m)?)?;
    m.add_function(wrap_pyfunction!(langchain::langchain_trim, m)?)?;
    m.add_function(wrap_pyfunction!(mappings_cut, m)?)?;
    m.add_class::<langchain::LangChainCounter>()?;
    Ok(())
}
