"""Tool-pair validation and the deterministic history cut (ADR 0001).

``select_history`` is linear: one pass for the raw estimates (memo or item
cache), one backward pass for the token fit, one forward pass to keep tool
pairs whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import OrphanedToolPair
from ..model import ToolCall, ToolResult


def _pair_ends(items: Sequence[object]) -> dict[int, int]:
    """Map each tool call's index to its result's index; raise on the first orphan."""
    called: set[str] = set()
    unanswered: dict[str, int] = {}  # call_id -> index, in index order
    ends: dict[int, int] = {}
    for index, item in enumerate(items):
        if isinstance(item, ToolCall):
            call_id = item.call_id
            if call_id in called:
                raise OrphanedToolPair(call_id, index, "duplicate tool call id")
            called.add(call_id)
            unanswered[call_id] = index
        elif isinstance(item, ToolResult):
            call_index = unanswered.pop(item.call_id, None)
            if call_index is None:
                raise OrphanedToolPair(item.call_id, index, "tool result without an earlier unanswered call")
            ends[call_index] = index
    for call_id, call_index in unanswered.items():  # the lowest index comes first
        raise OrphanedToolPair(call_id, call_index, "tool call never answered")
    return ends


def validate_tool_pairs(items: Sequence[object]) -> None:
    """Raise ``OrphanedToolPair`` for the first unpaired or duplicate tool call/result."""
    _pair_ends(items)


def select_history(
    items: Sequence[object],
    summary_floor: int,
    history_tokens: int,
    estimator: Any,
    model_id: str,
    raw: Sequence[int] | None = None,
) -> int:
    """The cut index: ``items[cut:]`` is the largest suffix that fits and keeps pairs whole.

    ``estimator`` is any object with ``raw_estimates(items, model_id)`` and
    ``corrected(raw_sum, model_id)``; ``raw``, when given, are the items'
    raw estimates already measured (one per item).
    """
    if not isinstance(items, (list, tuple)):
        items = list(items)
    ends = _pair_ends(items)
    count = len(items)

    # Items at or below the summary floor are already summarized: never candidates.
    floor_bound = 0
    for index in range(count - 1, -1, -1):
        seq = getattr(items[index], "seq", None)
        if seq is not None and seq <= summary_floor:
            floor_bound = index + 1
            break

    # The smallest c whose suffix fits; suffix sums only grow going backwards.
    if raw is None:
        raw = estimator.raw_estimates(items, model_id)
    elif len(raw) != count:
        raise ValueError(f"raw has {len(raw)} estimates for {count} items")
    fit = count
    raw_sum = 0
    for index in range(count - 1, -1, -1):
        raw_sum += raw[index]
        if estimator.corrected(raw_sum, model_id) > history_tokens:
            break
        fit = index

    # Never split a tool pair: move the cut past the latest result it would orphan.
    cut = max(fit, floor_bound)
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


__all__ = ["select_history", "validate_tool_pairs"]
