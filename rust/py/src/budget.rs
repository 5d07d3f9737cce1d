//! `allocate_tokens`: the arguments checked, the arithmetic the core's.

use ctxengine_core::budget::{self, BudgetInput};
use pyo3::prelude::*;

use crate::arguments;
use crate::errors::{guard, IntoPy};

/// `(reserve, body, usable, tool_results, history)`; raises `ContextOverflow`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn allocate_tokens(
    py: Python<'_>,
    context_window: &Bound<'_, PyAny>,
    max_output_tokens: &Bound<'_, PyAny>,
    default_output_reserve: &Bound<'_, PyAny>,
    prefix_tokens: &Bound<'_, PyAny>,
    reserve_tokens: &Bound<'_, PyAny>,
    margin_ratio: &Bound<'_, PyAny>,
    tool_results_ratio: &Bound<'_, PyAny>,
    working_state_tokens: &Bound<'_, PyAny>,
    history_floor: &Bound<'_, PyAny>,
    prefix_ceiling: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64, i64, i64, i64)> {
    guard(py, || {
        const F: &str = "allocate_tokens";
        let int = |name: &str, obj| arguments::int64(F, name, obj);
        let ratio = |name: &str, obj| arguments::ratio(F, name, obj);
        let input = BudgetInput {
            context_window: int("context_window", context_window)?,
            max_output_tokens: int("max_output_tokens", max_output_tokens)?,
            default_output_reserve: int("default_output_reserve", default_output_reserve)?,
            prefix_tokens: int("prefix_tokens", prefix_tokens)?,
            reserve_tokens: int("reserve_tokens", reserve_tokens)?,
            margin_ratio: ratio("margin_ratio", margin_ratio)?,
            tool_results_ratio: ratio("tool_results_ratio", tool_results_ratio)?,
            working_state_tokens: int("working_state_tokens", working_state_tokens)?,
            history_floor: int("history_floor", history_floor)?,
            prefix_ceiling: int("prefix_ceiling", prefix_ceiling)?,
        };
        let a = budget::allocate_tokens(&input).into_py(py)?;
        Ok((a.reserve, a.body, a.usable, a.tool_results, a.history))
    })
}
