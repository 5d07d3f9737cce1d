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
    """The body indices to mark, ascending (none for an empty body or one of tail blocks only)."""
    end = -1
    for i in range(len(body) - 1, -1, -1):
        if body[i].region_class not in TAIL_CLASSES:
            end = i
            break
    if end < 0:
        return ()
    stable = -1
    first_turn = -1
    for i in range(end + 1):
        item = body[i]
        if item.region_class in _TURN:
            if first_turn < 0:
                first_turn = i
            text = item.text
            if (
                item.region_class == "current_turn"
                and text is not None
                and text.startswith((POINTER_TEXT, FOLDED_TEXT))
            ):
                stable = i
    if stable < 0:
        stable = first_turn - 1 if first_turn > 0 else -1
    return (end,) if stable < 0 or stable >= end else (stable, end)


__all__ = ["MAX_BODY_BREAKPOINTS", "body_breakpoints"]
