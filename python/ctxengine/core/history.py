"""The deterministic history cut and tool-pair validation, on the active backend."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import ConversationItem
from . import backends
from .estimator import Estimator


def select_history(
    items: Sequence[ConversationItem],
    summary_floor: int | None,
    history_tokens: int,
    estimator: Estimator,
    model_id: str,
) -> int:
    """The cut index: ``items[cut:]`` is the largest fitting suffix that splits no tool pair
    and holds nothing at or below ``summary_floor`` (ADR 0001)."""
    cut: int = backends.active().select_history(items, summary_floor, history_tokens, estimator, model_id)
    return cut


def validate_tool_pairs(items: Sequence[ConversationItem]) -> None:
    """Raise ``OrphanedToolPair`` for the first call without result or result without call."""
    backends.active().validate_tool_pairs(items)


def shared_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading items ``a`` and ``b`` share, by identity (``a[i] is b[i]``): what a
    memo of an earlier sequence checks before it continues from it (natively a pointer
    compare per item, not a Python call)."""
    n: int = backends.active().shared_prefix(a, b)
    return n


__all__ = ["select_history", "shared_prefix", "validate_tool_pairs"]
