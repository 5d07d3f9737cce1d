//! `mappings_cut`: item dicts handed to `ctxengine_core::interop::mappings`
//! as [`PyValue`]s, each measured by the binding's canonical walker.

use ctxengine_core::interop::mappings::mappings_cut as core_cut;
use pyo3::prelude::*;

use super::value::PyValue;
use super::{fast_cut, reply};
use crate::canonical::walker;
use crate::errors::guard;

/// The cut over item dicts (see `ctxengine.interop.mappings.select_history`);
/// `-1 - i` when mapping `i` needs the reference, `-1` when the input is
/// not taken at all (not a list, another estimator). The cut's arguments
/// are checked as `select_history` checks them, before any mapping is read.
#[pyfunction]
pub fn mappings_cut(
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
        reply(py, core_cut(list.iter().map(PyValue), &args, len))
    })
}
