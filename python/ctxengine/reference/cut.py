"""Tool-pair validation and the deterministic history cut (ADR 0001).

``select_history`` is linear: one pass for the raw estimates (memo or item
cache), one backward pass for the token fit, one forward pass to keep tool
pairs whole. Arguments are checked first (``arguments.py``, ADR 0010).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import EstimatorError, OrphanedToolPair
from .arguments import (
    CALL,
    INT64_MAX,
    RESULT,
    check_cut_arguments,
    check_items,
    check_raw,
    check_sequence,
    estimator_int,
    estimator_raws,
)

#: The pairing errors' reasons, as ``rust/core/src/cut/pairs.rs`` words them.
REASON_DUPLICATE_CALL = "tool call id reused while its earlier call is still open"
REASON_RESULT_WITHOUT_CALL = "tool result without an earlier unanswered call"
REASON_CALL_WITHOUT_RESULT = "tool call never answered"


def _pair_ends(roles: Sequence[tuple[int, Any]]) -> dict[int, int]:
    """Map each tool call's index to its result's index; raise on the first orphan.

    Pairs by position (ADR 0019): a result answers the nearest earlier open call with its
    id, and a call id may be reused once its earlier pair is complete (never while open)."""
    unanswered: dict[str, int] = {}  # call_id -> index of its open call, in index order
    ends: dict[int, int] = {}
    for index, (role, call_id) in enumerate(roles):
        if role == CALL:
            if call_id in unanswered:
                raise OrphanedToolPair(call_id, index, REASON_DUPLICATE_CALL)
            unanswered[call_id] = index
        elif role == RESULT:
            call_index = unanswered.pop(call_id, None)
            if call_index is None:
                raise OrphanedToolPair(call_id, index, REASON_RESULT_WITHOUT_CALL)
            ends[call_index] = index
    if unanswered:  # the lowest index comes first
        call_id, call_index = min(unanswered.items(), key=lambda entry: entry[1])
        raise OrphanedToolPair(call_id, call_index, REASON_CALL_WITHOUT_RESULT)
    return ends


def validate_tool_pairs(items: Sequence[object]) -> None:
    """Raise ``OrphanedToolPair`` for the first unpaired or duplicate tool call/result."""
    _pair_ends(check_items("validate_tool_pairs", items)[1])


def shared_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading items ``a`` and ``b`` share: the first ``n`` with ``a[i] is b[i]``."""
    first = check_sequence("shared_prefix", "a", a, "objects")
    second = check_sequence("shared_prefix", "b", b, "objects")
    n = min(len(first), len(second))
    return next((i for i in range(n) if first[i] is not second[i]), n)


def select_history(
    items: Sequence[object],
    summary_floor: int | None,
    history_tokens: int,
    estimator: Any,
    model_id: str,
    raw: Sequence[int] | None = None,
) -> int:
    """The cut index: ``items[cut:]`` is the largest suffix that fits and keeps pairs whole.

    ``estimator`` is any object with ``raw_estimates(items, model_id)`` and
    ``corrected(raw_sum, model_id)``; ``raw``, when given, are the items'
    raw estimates already measured (one per item). ``summary_floor=None``
    means no floor.
    """
    name = "select_history"
    values, roles = check_items(name, items)
    floor, history_tokens, model_id = check_cut_arguments(
        name, summary_floor, history_tokens, estimator, model_id
    )
    count = len(values)
    measured = None if raw is None else check_raw(name, raw, count)
    ends = _pair_ends(roles)

    if measured is None:
        measured = estimator_raws(estimator.raw_estimates(values, model_id), count)

    def corrected(raw_sum: int) -> int:
        return estimator_int(estimator.corrected(raw_sum, model_id), "corrected")

    return cut_after_pairs(values, ends, floor, history_tokens, measured, corrected)


def cut_after_pairs(
    values: Sequence[object],
    ends: dict[int, int],
    floor: int | None,
    history_tokens: int,
    measured: Sequence[int],
    corrected: Callable[[int], int],
    not_before: int = 0,
) -> int:
    """Steps 2-4 of the cut (ADR 0001), once the pairs are known valid; the cut is at least
    ``not_before`` (a foreign history's last orphan is before it, ADR 0019)."""
    count = len(values)
    # The smallest c whose suffix fits; suffix sums only grow going backwards.
    fit = count
    raw_sum = 0
    for index in range(count - 1, -1, -1):
        raw_sum += measured[index]
        if raw_sum > INT64_MAX:
            raise EstimatorError("raw estimate sum overflows a 64-bit integer")
        if corrected(raw_sum) > history_tokens:
            break
        fit = index

    # Items at or below the summary floor are already summarized: never candidates.
    floor_bound = 0
    if floor is not None:
        for index in range(count - 1, fit - 1, -1):
            seq = getattr(values[index], "seq", None)
            if isinstance(seq, int) and not isinstance(seq, bool) and seq <= floor:
                floor_bound = index + 1
                break

    # Never split a tool pair: move the cut past the latest result it would orphan.
    cut = max(fit, floor_bound, not_before)
    reach = -1  # the latest result index of any call before the current position
    for index in range(count):
        if index == cut:
            if reach < cut:
                break
            cut = reach + 1
        end = ends.get(index)
        if end is not None and end > reach:
            reach = end
    return cut


__all__ = ["cut_after_pairs", "select_history", "validate_tool_pairs"]
