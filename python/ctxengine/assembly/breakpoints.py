"""Where a plan of builder version 3 asks a provider to cache its body (ADR 0027).

A body is laid out so that what changes from one request to the next comes last: the
history, the current user message and the run's steps, then the tail
(``regions.TAIL_CLASSES``). Two body indices are marked, and a renderer that places cache
breakpoints (Anthropic's ``cache_control``) puts one on each:

- the end of the part before the tail (the last step of the run): consecutive requests of
  a run share it, and the next request finds it within Anthropic's 20-block lookback;
- the end of the part that stays when the run's clearing moves on: the run's last cleared
  or folded step, or, while nothing of the run is cleared, the item just before the current
  user message (the history's end).

The indices are a function of the body alone, so every worker and every replay marks the
same ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from .clearing import FOLDED_TEXT, POINTER_TEXT
from .regions import TAIL_CLASSES
from .request import RenderedItem

#: The body breakpoints of a request: at most this many (with the prefix's two, Anthropic's
#: limit of four a request).
MAX_BODY_BREAKPOINTS = 2
_TURN = frozenset({"current_user", "current_turn"})


def body_breakpoints(body: Sequence[RenderedItem]) -> tuple[int, ...]:
    """The body indices to mark, ascending (none for an empty body or one of tail blocks only).
    Read from the end: the tail, then the turn (a history of thousands of items is not read)."""
    i = len(body) - 1
    while i >= 0 and body[i].region_class in TAIL_CLASSES:
        i -= 1
    end = i
    if end < 0:
        return ()
    stable = -1
    while i >= 0 and body[i].region_class in _TURN:
        item = body[i]
        text = item.text
        if (
            stable < 0
            and item.region_class == "current_turn"
            and text is not None
            and text.startswith((POINTER_TEXT, FOLDED_TEXT))
        ):
            stable = i
        i -= 1
    if stable < 0 and i < end:
        stable = i  # the item before the turn (-1: none)
    return (end,) if stable < 0 or stable >= end else (stable, end)


__all__ = ["MAX_BODY_BREAKPOINTS", "body_breakpoints"]
