"""Budget arithmetic (ADR 0001): the integer core under ``ctxengine.allocate``."""

from __future__ import annotations

import math

from ..errors import ContextOverflow, PolicyError


def _floor_product(tokens: int, ratio: float, key: str) -> int:
    """``floor(tokens * ratio)`` in IEEE-754 double; a non-finite product is a policy error."""
    product = tokens * float(ratio)
    if not math.isfinite(product):
        raise PolicyError(key, "ratio must be a finite number")
    return math.floor(product)


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
    for name, value in (
        ("context_window", context_window),
        ("max_output_tokens", max_output_tokens),
        ("default_output_reserve", default_output_reserve),
        ("prefix_tokens", prefix_tokens),
        ("reserve_tokens", reserve_tokens),
        ("working_state_tokens", working_state_tokens),
        ("history_floor", history_floor),
        ("prefix_ceiling", prefix_ceiling),
    ):
        if not isinstance(value, int):
            raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if prefix_tokens > prefix_ceiling:
        raise ContextOverflow("prefix", prefix_tokens, prefix_ceiling, "prefix exceeds the prefix ceiling")
    reserve = min(reserve_tokens, default_output_reserve, max_output_tokens)
    body = context_window - reserve - prefix_tokens
    if body <= 0:
        raise ContextOverflow(
            "context_window",
            reserve + prefix_tokens,
            context_window,
            f"output reserve {reserve} + prefix {prefix_tokens} leave no body",
        )
    usable = body - _floor_product(body, margin_ratio, "margin_ratio")
    tool_results = _floor_product(usable, tool_results_ratio, "tool_results_ratio")
    history = usable - working_state_tokens - tool_results
    if history < history_floor:
        raise ContextOverflow("history", history, history_floor, "history budget is below its floor")
    return reserve, body, usable, tool_results, history


__all__ = ["allocate_tokens"]
