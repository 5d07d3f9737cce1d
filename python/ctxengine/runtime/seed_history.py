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
    """A seed's history and the items (visible, kept) not primed yet, with their sequences
    and stored counts (the window's columns, ``None``: not counted)."""

    history: tuple[ConversationItem, ...]
    fresh_sequences: Sequence[int]
    fresh_tokens: Sequence[int | None]
    fresh_items: Sequence[ConversationItem]


def _decisions(window: SessionWindow, principal: Principal | None) -> dict[int, bool]:
    if principal is None:
        return dict.fromkeys(window.classes, True)
    return {key: visibility.allows(principal) for key, visibility in window.classes.items()}


def _readable(
    window: SessionWindow, start: int, end: int, decisions: dict[int, bool]
) -> tuple[Sequence[int], list[ConversationItem]]:
    """The positions in the window and the items of its rows from ``start`` to ``end`` a seed
    looks at: those its principal may read, no reasoning (replayed within its own run only,
    never carried)."""
    positions: Sequence[int] = range(start, end)
    items = window.items[start:end]
    if not all(decisions.values()):
        visibilities, every = window.visibilities, window.items
        positions = [i for i in positions if decisions[id(visibilities[i])]]
        items = [every[i] for i in positions]
    if ReasoningItem in set(map(type, items)):
        pairs = [
            (i, item) for i, item in zip(positions, items, strict=True) if type(item) is not ReasoningItem
        ]
        positions, items = [i for i, _ in pairs], [item for _, item in pairs]
    return positions, items


def _last_seq(window: SessionWindow, positions: Sequence[int]) -> int | None:
    return window.seqs[positions[-1]] if positions else None


def _fresh(
    window: SessionWindow,
    positions: Sequence[int],
    items: list[ConversationItem],
    kept: list[ConversationItem],
    primed: int,
) -> tuple[list[int], list[int | None], list[ConversationItem]]:
    """The sequences, counts and items after ``primed`` of the items kept (``items`` at
    ``positions`` of the window)."""
    if len(kept) != len(items):
        kept_ids = {id(item) for item in kept}
        pairs = [(i, item) for i, item in zip(positions, items, strict=True) if id(item) in kept_ids]
        positions, items = [i for i, _ in pairs], [item for _, item in pairs]
    seqs, tokens = window.seqs, window.tokens
    start = len(positions)
    while start and seqs[positions[start - 1]] > primed:
        start -= 1
    tail = positions[start:]
    return [seqs[i] for i in tail], [tokens[i] for i in tail], items[start:]


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
        and (view.last_seq is None or view.last_seq <= primed)
    ):
        continued = _continued(window, view, end, decisions, primed)
        if continued is not None:
            return continued
    return _whole(window, end, decisions, primed)


def _whole(window: SessionWindow, end: int, decisions: dict[int, bool], primed: int) -> SeedHistory:
    """The specification: every item of the range looked at (and the view for the next)."""
    positions, items = _readable(window, 0, end, decisions)
    still_open: set[str] = set()
    try:
        backends.active().validate_tool_pairs(items)
        kept = items  # every pair whole (the common case): nothing to leave out
    except OrphanedToolPair:
        kept, still_open, _ = _pairing(items, set())
    history = tuple(kept)
    window.view = View(end, decisions, history, still_open, _last_seq(window, positions))
    return SeedHistory(history, *_fresh(window, positions, items, kept, primed))


def _continued(
    window: SessionWindow, view: View, end: int, decisions: dict[int, bool], primed: int
) -> SeedHistory | None:
    """``_whole``'s answer from ``view`` and the items after it (``None``: a new result
    answers a call the view left out as open, which puts it back in the middle)."""
    positions, items = _readable(window, view.end, end, decisions)
    kept, now_open, reopened = _pairing(items, view.open)
    if reopened:
        return None
    history = view.history + tuple(kept) if kept else view.history
    view.open |= now_open
    view.end = end
    view.decisions = decisions
    view.history = history
    if positions:
        view.last_seq = _last_seq(window, positions)
    return SeedHistory(history, *_fresh(window, positions, items, kept, primed))


__all__ = ["SeedHistory", "seed_history", "whole_pairs"]
