"""One history line's renders and pointers (``SessionRenders``), and how much memory a
render is estimated to hold: the per-session half of ``render_cache``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice, repeat
from operator import is_, is_not
from typing import Any, cast

from ..core import backends
from ..model import ConversationItem, ToolResult
from ..model.body import RenderLine
from .render import digest_of
from .request import RenderedItem

#: The estimated memory of a render beside its text (measured: the ``RenderedItem``, its
#: canonical-bytes tuple, digest and object headers, about 560 bytes a render).
RENDER_OBJECTS = 576
#: A render without text (a tool call, reasoning) counts this as its text's share.
TEXTLESS = 512


def one_render_bytes(rendered: RenderedItem) -> int:
    """The memory a render is estimated to hold: its text twice (the text and the
    canonical bytes that repeat it) and ``RENDER_OBJECTS`` (``TEXTLESS`` for the text of
    one without)."""
    text = rendered.text
    return RENDER_OBJECTS + (2 * len(text) if text else TEXTLESS)


def render_bytes(renders: Iterable[RenderedItem]) -> int:
    """``one_render_bytes`` of each, summed."""
    return sum(map(one_render_bytes, renders))


class SessionRenders:
    """One history line's renders and tool-result pointers, by item digest and in
    history order (``line``, the fit's fast path, with the fit's state of it), and the
    body blocks of its last build (the builder's)."""

    __slots__ = (
        "_line_items",
        "_line_pointers",
        "_line_renders",
        "blocks",
        "line",
        "nbytes",
        "owned",
        "pointers",
        "renders",
    )

    def __init__(self) -> None:
        self.renders: dict[bytes, RenderedItem] = {}
        self.pointers: dict[bytes, RenderedItem] = {}
        #: ``render_bytes`` of the renders and pointers in the tables.
        self.nbytes = 0
        #: Whether a ``RenderCache`` holds them (and counts them in its bound); a session
        #: window's are its own.
        self.owned = False
        self.blocks: Any = None
        self._line_items: list[ConversationItem] = []
        self._line_renders: list[RenderedItem | None] = []
        self._line_pointers: list[RenderedItem | None] = []
        self.line = RenderLine(
            self._line_items, self._line_renders, self._line_pointers, backends.line_state()
        )

    def line_of(self, history: tuple[ConversationItem, ...]) -> RenderLine:
        """The line extended to ``history``: its new items' renders and pointers from the
        tables (``None`` where they lack one). A history grows at its end; any other
        history (compacted, another run's) starts the line again. The fit checks each
        entry's item by identity, so a line that no longer matches only costs speed."""
        items, renders, pointers = self._line_items, self._line_renders, self._line_pointers
        n = len(items)
        if n > len(history) or (n and (history[n - 1] is not items[-1] or history[0] is not items[0])):
            items.clear()  # (the fit's state keeps the entries that still match)
            renders.clear()
            pointers.clear()
            n = 0
        if n < len(history):
            table, pointed = self.renders, self.pointers
            for item in history[n:]:
                cached = item._cj
                digest = cached[1] if cached is not None else digest_of(item)
                items.append(item)
                renders.append(table.get(digest))
                pointers.append(pointed.get(digest) if isinstance(item, ToolResult) else None)
        return self.line

    def start_line(
        self,
        history: Sequence[ConversationItem],
        renders: Sequence[RenderedItem],
        pointers: Sequence[RenderedItem],
    ) -> None:
        """Start an empty line as ``history`` with its ``renders`` (one per item, in order) and
        the ``pointers`` of its tool results (in order): what ``line_of`` would read back from
        the tables just filled with them, without a lookup per item."""
        if self._line_items:
            return
        given = iter(pointers)
        self._line_items.extend(history)
        self._line_renders.extend(renders)
        self._line_pointers.extend(
            [next(given) if isinstance(item, ToolResult) else None for item in history]
        )

    def line_tail(self, items: Sequence[ConversationItem]) -> list[RenderedItem] | None:
        """The line's renders of ``items`` when they are its last items (the very objects) and
        it holds a render for each; else ``None``."""
        line, m = self._line_items, len(items)
        k = len(line) - m
        if not m or k < 0 or line[k] is not items[0] or line[-1] is not items[-1]:
            return None
        found = self._line_renders[k:]
        if all(map(is_, islice(line, k, None), items)) and all(map(is_not, found, repeat(None))):
            return cast(list[RenderedItem], found)
        return None

    def forget_line(self) -> None:
        """Start the line again (its renders were re-entered in the tables, or it is dropped):
        what the fit kept of it goes too."""
        if self.line.state is not None:
            self.line.state.clear()
        self._line_items.clear()
        self._line_renders.clear()
        self._line_pointers.clear()

    def __len__(self) -> int:
        return len(self.renders) + len(self.pointers)


__all__ = ["RENDER_OBJECTS", "TEXTLESS", "SessionRenders", "one_render_bytes", "render_bytes"]
