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
use crate::errors::{guard, IntoPy};
use crate::estimator::TokenEstimator;
use value::PyValue;

/// A native cut as the Python side reads it: the index, `-1 - i` for the
/// reference to take from item `i`, or `-1` for input the fast path does not
/// take at all (not a list, another estimator, exact counting, or `cut`'s
/// `None`). The cut's arguments are checked as `select_history` checks them,
/// before any item is read.
fn native_cut(
    items: &Bound<'_, PyAny>,
    [summary_floor, history_tokens, estimator, model_id]: [&Bound<'_, PyAny>; 4],
    cut: impl FnOnce(&Bound<'_, PyList>, &CutArgs) -> Option<CoreResult<Cut>>,
) -> PyResult<i64> {
    let py = items.py();
    guard(py, || {
        let Ok(list) = items.cast_exact::<PyList>() else {
            return Ok(-1);
        };
        let f = "select_history";
        let a = arguments::cut_arguments(f, summary_floor, history_tokens, estimator, model_id)?;
        let Ok(est) = estimator.cast::<TokenEstimator>() else {
            return Ok(-1);
        };
        let Some((profile, factor)) = est.get().lock().heuristic(a.model_id) else {
            return Ok(-1);
        };
        let args = CutArgs {
            summary_floor: a.summary_floor,
            history_tokens: a.history_tokens,
            profile,
            factor,
        };
        Ok(match cut(list, &args).transpose().into_py(py)? {
            None => -1,
            Some(Cut::At(c)) => c as i64,
            Some(Cut::Reference(i)) => -1 - i as i64,
        })
    })
}

/// The cut over Chat messages as a message index (see
/// `ctxengine.reference.interop.openai_chat_cut`); `-1` also for provenance
/// options off the fast path's shapes (`ChatOptions::read`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn openai_chat_cut(
    messages: &Bound<'_, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &Bound<'_, PyAny>,
    seq_field: &Bound<'_, PyAny>,
    first_seq: &Bound<'_, PyAny>,
    tool_trust: &str,
) -> PyResult<i64> {
    let args = [summary_floor, history_tokens, estimator, model_id];
    native_cut(messages, args, |list, args| {
        let (seq_field, first_seq) = (PyValue(seq_field.clone()), PyValue(first_seq.clone()));
        let opts = ChatOptions::read(&seq_field, &first_seq, tool_trust)?;
        Some(chat_cut(list.iter().map(PyValue), &opts, args))
    })
}

/// The cut over item dicts (see `ctxengine.interop.mappings.select_history`),
/// each measured by the binding's canonical walker.
#[pyfunction]
fn mappings_cut(
    mappings: &Bound<'_, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    let args = [summary_floor, history_tokens, estimator, model_id];
    native_cut(mappings, args, |list, args| {
        let mut walker = walker(list.py(), Vec::with_capacity(1024));
        let len = |m: &PyValue<'_>| {
            walker.out.clear();
            walker.write_root(m.0.as_ptr()).ok()?;
            Some(walker.out.len())
        };
        Some(core_mappings_cut(list.iter().map(PyValue), args, len))
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
