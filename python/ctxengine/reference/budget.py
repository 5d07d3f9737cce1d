"""Budget arithmetic (ADR 0001): the integer core under ``ctxengine.allocate``."""

from __future__ import annotations

import math

from ..errors import ContextOverflow, PolicyError
from .arguments import INT64_MAX, INT64_MIN, check_int, check_ratio


def _i64(value: int) -> int:
    """The arithmetic is signed 64-bit in both backends: beyond it is a policy error."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise PolicyError("budget", "token arithmetic overflows a 64-bit integer")
    return value


def _floor_product(tokens: int, ratio: float, key: str) -> int:
    """``floor(tokens * ratio)`` in IEEE-754 double; a non-finite product is a policy error."""
    product = tokens * float(ratio)
    if not math.isfinite(product):
        raise PolicyError(key, "ratio must be a finite number")
    return _i64(math.floor(product))


def allocate_tokens(
    context_window: int,
    max_output_tokens: int,
    default_output_reserve: int,
    prefix_tokens: int,
    reserve_tokens: int,
    margin_ratio: float,
    tool_results_ratio: float,
    working_state_tokens: int,
    history_floor: int,
    prefix_ceiling: int,
) -> tuple[int, int, int, int, int]:
    """``(reserve, body, usable, tool_results, history)``, or ``ContextOverflow``.

    The checks run in a fixed order: prefix ceiling, context window, history
    floor. Ratios multiply in IEEE-754 double and are floored.
    """
    name = "allocate_tokens"
    check_int(name, "context_window", context_window)
    check_int(name, "max_output_tokens", max_output_tokens)
    check_int(name, "default_output_reserve", default_output_reserve)
    check_int(name, "prefix_tokens", prefix_tokens)
    check_int(name, "reserve_tokens", reserve_tokens)
    margin_ratio = check_ratio(name, "margin_ratio", margin_ratio)
    tool_results_ratio = check_ratio(name, "tool_results_ratio", tool_results_ratio)
    check_int(name, "working_state_tokens", working_state_tokens)
    check_int(name, "history_floor", history_floor)
    check_int(name, "prefix_ceiling", prefix_ceiling)
    if prefix_tokens > prefix_ceiling:
        raise ContextOverflow(
            "prefix",
            prefix_tokens,
            prefix_ceiling,
            f"the prefix of {prefix_tokens} tokens exceeds the prefix ceiling of {prefix_ceiling} tokens; "
            "shorten the instructions, tools or skills of the prefix, or raise BudgetPolicy "
            "prefix.ceiling_tokens (BudgetPolicy.from_dict({'prefix': {'ceiling_tokens': N}}))",
        )
    reserve = min(reserve_tokens, default_output_reserve, max_output_tokens)
    taken = _i64(reserve + prefix_tokens)
    body = _i64(context_window - taken)
    if body <= 0:
        raise ContextOverflow(
            "context_window",
            taken,
            context_window,
            f"the output reserve of {reserve} tokens and the prefix of {prefix_tokens} tokens take "
            f"{taken} tokens, leaving no body in the window of {context_window} tokens; lower BudgetPolicy "
            "output.reserve_tokens (BudgetPolicy.from_dict({'output': {'reserve_tokens': N}})), "
            "shorten the prefix or use a larger window",
        )
    usable = _i64(body - _floor_product(body, margin_ratio, "margin_ratio"))
    tool_results = _floor_product(usable, tool_results_ratio, "tool_results_ratio")
    history = _i64(_i64(usable - working_state_tokens) - tool_results)
    if history < history_floor:
        raise ContextOverflow(
            "history",
            history,
            history_floor,
            f"the history budget of {history} tokens is below its floor of {history_floor} tokens: "
            f"the window of {context_window} tokens leaves {history} for history after the output "
            f"reserve of {reserve}, the prefix of {prefix_tokens}, the safety margin of {body - usable}, "
            f"the working state of {working_state_tokens} and the tool results of {tool_results}; "
            "lower BudgetPolicy history.floor_tokens "
            "(BudgetPolicy.from_dict({'history': {'floor_tokens': N}})) or use a larger window",
        )
    return reserve, body, usable, tool_results, history


__all__ = ["allocate_tokens"]
