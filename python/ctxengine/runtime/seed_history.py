"""A seed's history: the window's items its principal may read, reasoning and halves of tool
pairs left out, continued from the session's previous seed (issue 13, ADR 0011).

Two seeds of a session in a row (a worker taking its turns) read the same window,
the later one a few items longer. What the earlier one made of it stays true for
the same leading items: visibility is decided per class, and ``whole_pairs``
decides an item by the items before it, except a call still open at the end
(its result may come later). The window keeps (``View``) the history of the
leading items it covered, the calls left open there and each visibility class's
decision (the window drops it whenever its rows change other than by growing);
when the next seed's principal decides every class as before, it runs the
pairing over the new items only. Anything else takes
the whole computation, which is the specification: a property test compares the
two on random windows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..core import backends
from ..errors import OrphanedToolPair
from ..model import ConversationItem, Principal, ReasoningItem, ToolCall, ToolResult
from ..stores.events import ItemRow
from .window import SessionWindow, View
from .windows import Span


def whole_pairs(items: list[ConversationItem]) -> tuple[ConversationItem, ...]:
    """History without the halves of tool pairs that a crashed run left behind.

    A call whose result was never recorded (or a result whose call is missing)
    would make every later request invalid; the events stay in the log for
    audit, but a new run's seeded history leaves them out.
    """
    with contextlib.suppress(OrphanedToolPair):
        backends.active().validate_tool_pairs(items)
        return tuple(items)  # every pair whole (the common case): nothing to leave out
    return tuple(_pairing(items, set()).kept)


class _Pairing(NamedTuple):
    kept: list[ConversationItem]
    #: Calls left open among the items (left out: their result may come later).
    open: set[str]
    #: A result answered a call ``still_open`` from before (left out there, kept now).
    reopened: bool


def _pairing(items: Sequence[ConversationItem], still_open: set[str]) -> _Pairing:
    """``whole_pairs`` of ``items`` after items that left the calls ``still_open`` open (the
    earlier items' decisions stand unless ``reopened``).

    Pairs by position (ADR 0019): a result answers the nearest earlier open call with its id;
    a call whose id is open supersedes that call (left out: its result can no longer come),
    and an id answered before opens a new pair."""
    open_calls: dict[str, int] = {}
    keep = [True] * len(items)
    reopened = False
    for i, item in enumerate(items):
        if isinstance(item, ToolCall):
            superseded = open_calls.get(item.call_id)
            if superseded is not None:
                keep[superseded] = False
            open_calls[item.call_id] = i
        elif isinstance(item, ToolResult):
            if open_calls.pop(item.call_id, None) is None:
                keep[i] = False
                reopened = reopened or item.call_id in still_open
    for i in open_calls.values():
        keep[i] = False
    kept = [item for item, k in zip(items, keep, strict=True) if k]
    return _Pairing(kept, set(open_calls), reopened)


@dataclass(frozen=True, slots=True)
class SeedHistory:
    """A seed's history and the rows and items (visible, kept) not primed yet."""

    history: tuple[ConversationItem, ...]
    fresh_rows: Sequence[ItemRow]
    fresh_items: Sequence[ConversationItem]


def _decisions(window: SessionWindow, principal: Principal | None) -> dict[int, bool]:
    if principal is None:
        return dict.fromkeys(window.classes, True)
    return {key: visibility.allows(principal) for key, visibility in window.classes.items()}


def _readable(
    rows: list[ItemRow], items: list[ConversationItem], decisions: dict[int, bool]
) -> tuple[list[ItemRow], list[ConversationItem]]:
    """The rows and items a seed looks at: those its principal may read, no reasoning
    (replayed within its own run only, never carried)."""
    if not all(decisions.values()):
        keep = [decisions[id(row.visibility)] for row in rows]
        rows = [row for row, kept in zip(rows, keep, strict=True) if kept]
        items = [item for item, kept in zip(items, keep, strict=True) if kept]
    if ReasoningItem in set(map(type, items)):
        pairs = [
            (row, item) for row, item in zip(rows, items, strict=True) if type(item) is not ReasoningItem
        ]
        rows, items = [row for row, _ in pairs], [item for _, item in pairs]
    return rows, items


def _fresh(
    rows: list[ItemRow], items: list[ConversationItem], kept: list[ConversationItem], primed: int
) -> tuple[list[ItemRow], list[ConversationItem]]:
    """The rows after ``primed`` of the items kept."""
    if len(kept) != len(items):
        kept_ids = {id(item) for item in kept}
        pairs = [pair for pair in zip(rows, items, strict=True) if id(pair[1]) in kept_ids]
        rows, items = [row for row, _ in pairs], [item for _, item in pairs]
    start = len(rows)
    while start and rows[start - 1].sequence > primed:
        start -= 1
    return rows[start:], items[start:]


def seed_history(span: Span, principal: Principal | None, primed: int) -> SeedHistory:
    """The history of a seed whose window range is ``span`` (its last item the seed, not part
    of the history) and its fresh rows: those after sequence ``primed``."""
    window, end = span.window, span.end - 1
    decisions = _decisions(window, principal)
    view = window.view
    if (
        view is not None
        and view.end <= end
        and all(decisions.get(key) == allowed for key, allowed in view.decisions.items())
        and (view.last_row is None or view.last_row.sequence <= primed)
    ):
        continued = _continued(window, view, end, decisions, primed)
        if continued is not None:
            return continued
    return _whole(window, end, decisions, primed)


def _whole(window: SessionWindow, end: int, decisions: dict[int, bool], primed: int) -> SeedHistory:
    """The specification: every item of the range looked at (and the view for the next)."""
    rows, items = _readable(window.rows[:end], window.items[:end], decisions)
    still_open: set[str] = set()
    try:
        backends.active().validate_tool_pairs(items)
        kept = items  # every pair whole (the common case): nothing to leave out
    except OrphanedToolPair:
        kept, still_open, _ = _pairing(items, set())
    history = tuple(kept)
    window.view = View(end, decisions, history, still_open, rows[-1] if rows else None)
    return SeedHistory(history, *_fresh(rows, items, kept, primed))


def _continued(
    window: SessionWindow, view: View, end: int, decisions: dict[int, bool], primed: int
) -> SeedHistory | None:
    """``_whole``'s answer from ``view`` and the items after it (``None``: a new result
    answers a call the view left out as open, which puts it back in the middle)."""
    rows, items = _readable(window.rows[view.end : end], window.items[view.end : end], decisions)
    kept, now_open, reopened = _pairing(items, view.open)
    if reopened:
        return None
    history = view.history + tuple(kept) if kept else view.history
    view.open |= now_open
    view.end = end
    view.decisions = decisions
    view.history = history
    if rows:
        view.last_row = rows[-1]
    return SeedHistory(history, *_fresh(rows, items, kept, primed))


__all__ = ["SeedHistory", "seed_history", "whole_pairs"]
