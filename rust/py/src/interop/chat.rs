//! `openai_chat_cut`: the converter's options read, the messages handed to
//! `ctxengine_core::interop::chat` as [`PyValue`]s.

use ctxengine_core::interop::chat::{chat_cut, ChatOptions};
use ctxengine_core::interop::value::Value;
use pyo3::prelude::*;

use super::value::PyValue;
use super::{fast_cut, reply};
use crate::errors::guard;

/// The cut over Chat messages as a message index (see
/// `ctxengine.reference.interop.openai_chat_cut`); `-1 - i` when message
/// `i` needs the reference (which raises its error), `-1` for input the
/// fast path does not take at all (not a list, another estimator,
/// provenance options off the fast path's shapes). The cut's arguments are
/// checked as `select_history` checks them, before any message is read.
#[pyfunction]
#[pyo3(signature = (messages, summary_floor, history_tokens, estimator, model_id, seq_field, first_seq, tool_trust))]
#[allow(clippy::too_many_arguments)]
pub fn openai_chat_cut(
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
        // The converter's own options: anything but the plain shapes is the
        // reference's to refuse.
        let (seq_field, first_seq) = (PyValue(seq_field.clone()), PyValue(first_seq.clone()));
        let seq_field = match (seq_field.is_null(), seq_field.str()) {
            (true, _) => None,
            (false, Some(s)) => Some(s),
            (false, None) => return Ok(-1),
        };
        let first_seq = match (first_seq.is_null(), first_seq.int()) {
            (true, _) => None,
            (false, Some(v)) => Some(v),
            (false, None) => return Ok(-1),
        };
        let opts = ChatOptions {
            seq_field,
            first_seq,
            tool_trust,
        };
        reply(py, chat_cut(list.iter().map(PyValue), &opts, &args))
    })
}
