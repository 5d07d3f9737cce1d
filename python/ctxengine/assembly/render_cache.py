"""The renderer's own bounded cache: renders of conversation items by item digest.

Rendering is a pure function of an item's canonical content and its region
class, so renders are kept by ``(region class, item digest)`` in plain
dicts, which the builder hands the backend as data (``BodyInputs.renders``
and ``.pointers``): the fit looks renders up instead of calling back. Items
hold only their data (and their own canonical bytes).

A session's history renders (and tool-result pointers) have their own pair
of tables, so one build reads one small table rather than probing a large
one all over memory. Everything is bounded: ``capacity`` renders in all
(least recently built sessions go first), the oldest eighth of a table past
that, ``block_capacity`` block renders.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from itertools import islice
from typing import Any

from ..core.identity import ByIdentity
from ..model import ConversationItem, ToolResult
from ..model.body import RenderLine
from .render import POINTER, digest_of, render_conversation, render_items, render_pointer, render_pointers
from .request import RenderedItem


class SessionRenders:
    """One history line's renders and tool-result pointers, by item digest and in
    history order (``line``, the fit's fast path), and the body blocks of its last
    build (the builder's)."""

    __slots__ = ("_line_items", "_line_pointers", "_line_renders", "blocks", "line", "pointers", "renders")

    def __init__(self) -> None:
        self.renders: dict[bytes, RenderedItem] = {}
        self.pointers: dict[bytes, RenderedItem] = {}
        self.blocks: Any = None
        self._line_items: list[ConversationItem] = []
        self._line_renders: list[RenderedItem | None] = []
        self._line_pointers: list[RenderedItem | None] = []
        self.line = RenderLine(self._line_items, self._line_renders, self._line_pointers)

    def line_of(self, history: tuple[ConversationItem, ...]) -> RenderLine:
        """The line extended to ``history``: its new items' renders and pointers from the
        tables (``None`` where they lack one). A history grows at its end; any other
        history (compacted, another run's) starts the line again. The fit checks each
        entry's item by identity, so a line that no longer matches only costs speed."""
        items, renders, pointers = self._line_items, self._line_renders, self._line_pointers
        n = len(items)
        if n > len(history) or (n and (history[n - 1] is not items[-1] or history[0] is not items[0])):
            items.clear()
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

    def forget_line(self) -> None:
        """Start the line again (its renders were re-entered in the tables)."""
        self._line_items.clear()
        self._line_renders.clear()
        self._line_pointers.clear()

    def __len__(self) -> int:
        return len(self.renders) + len(self.pointers)


class RenderCache:
    """The renderer's bounded caches (see the module)."""

    def __init__(self, capacity: int = 1 << 20, block_capacity: int = 4096) -> None:
        self.capacity = capacity
        self.block_capacity = block_capacity
        self._tables: dict[str, dict[bytes, RenderedItem]] = {}
        self._sessions: OrderedDict[Hashable, SessionRenders] = OrderedDict()
        self._held = 0  # renders in session tables
        self._blocks: OrderedDict[Any, Any] = OrderedDict()
        # Summary blocks by the identity of their spans tuple (see ``summary``).
        self._summaries: ByIdentity[Any] = ByIdentity(block_capacity)
        # One-entry memos by identity of their inputs (the common rebuild).
        self._last: dict[str, Any] = {}

    # -- tables by region class ------------------------------------------------

    def table(self, region_class: str) -> dict[bytes, RenderedItem]:
        """The live table of ``region_class`` (``POINTER``: tool-result pointers)."""
        table = self._tables.get(region_class)
        if table is None:
            table = self._tables[region_class] = {}
        return table

    def _put(self, table: dict[bytes, RenderedItem], digest: bytes, rendered: RenderedItem) -> None:
        table[digest] = rendered
        if len(table) > self.capacity:
            for key in list(islice(table, len(table) - self.capacity + self.capacity // 8)):
                del table[key]

    def item(self, item: ConversationItem, region_class: str) -> RenderedItem:
        """The render of ``item`` in ``region_class``, cached by its digest."""
        table = self.table(region_class)
        digest = digest_of(item)
        hit = table.get(digest)
        if hit is None:
            hit = render_conversation(item, region_class)
            self._put(table, digest, hit)
        return hit

    def items(self, items: Sequence[ConversationItem], region_class: str) -> tuple[RenderedItem, ...]:
        """``item()`` of each, as a tuple."""
        if not items:
            return ()
        table = self._tables.get(region_class)
        if table is None:
            table = self.table(region_class)
        out = []
        for item in items:
            cached = item._cj
            digest = cached[1] if cached is not None else digest_of(item)
            hit = table.get(digest)
            if hit is None:
                hit = render_conversation(item, region_class)
                self._put(table, digest, hit)
            out.append(hit)
        return tuple(out)

    def pointer(self, item: ToolResult) -> RenderedItem:
        """The pointer of a tool result, cached by its digest."""
        table = self.table(POINTER)
        digest = digest_of(item)
        hit = table.get(digest)
        if hit is None:
            hit = render_pointer(item)
            self._put(table, digest, hit)
        return hit

    # -- a session's history ------------------------------------------------------

    def session(self, key: Hashable) -> SessionRenders:
        """The tables of session ``key``, now the most recently built."""
        sessions = self._sessions
        tables = sessions.get(key)
        if tables is None:
            tables = sessions[key] = SessionRenders()
        else:
            sessions.move_to_end(key)
        return tables

    def history(
        self,
        tables: SessionRenders,
        history: Sequence[ConversationItem],
        indices: Sequence[int] | None = None,
    ) -> None:
        """Render history items (and tool results' pointers) the tables lack.

        With ``indices``, those items; without, the new ones: from the end
        back to the first item already rendered (a history grows at its end;
        anything else missing comes back from the fit as ``missing``).
        """
        renders, pointers = tables.renders, tables.pointers
        before = len(renders) + len(pointers)
        if indices is None and not renders and not pointers:
            self._first_history(tables, history)  # a line seen for the first time: all of it
            return
        fresh = []
        order = indices if indices is not None else range(len(history) - 1, -1, -1)
        for i in order:
            item = history[i]
            cached = item._cj
            digest = cached[1] if cached is not None else digest_of(item)
            pointed = not isinstance(item, ToolResult) or digest in pointers
            if pointed and digest in renders:
                if indices is None:
                    break
                continue
            fresh.append((item, digest))
        # Entered in history order (``indices`` ascend): the fit reads the table in that order.
        if indices is None:
            fresh.reverse()
        # One backend call renders the lot (natively on the Rust backend, ADR 0011).
        todo = {digest: item for item, digest in fresh if digest not in renders}
        made = dict(zip(todo, render_items(list(todo.values()), "history"), strict=True))
        unpointed: dict[bytes, ToolResult] = {}
        for item, digest in fresh:
            if digest not in renders:
                renders[digest] = made[digest]
            if isinstance(item, ToolResult) and digest not in pointers:
                unpointed.setdefault(digest, item)  # the first of equal items, as before
        if unpointed:  # one backend call for the lot, as the renders
            pointers.update(zip(unpointed, render_pointers(list(unpointed.values())), strict=True))
        self._held += len(renders) + len(pointers) - before
        if self._held > self.capacity:
            self._shrink(tables)

    def _first_history(self, tables: SessionRenders, history: Sequence[ConversationItem]) -> None:
        """``history`` for empty tables: every item rendered, in one backend call each for
        renders and pointers (what ``history`` does, without asking the tables per item)."""
        digests = [cj[1] if (cj := item._cj) is not None else digest_of(item) for item in history]
        todo = dict(zip(digests, history, strict=True))  # in history order, as the fit reads it
        if len(todo) != len(history):  # equal items: the first of each renders, as in ``history``
            todo = {}
            for digest, item in zip(digests, history, strict=True):
                todo.setdefault(digest, item)
        if not todo:
            return
        tables.renders.update(zip(todo, render_items(list(todo.values()), "history"), strict=True))
        unpointed = {digest: item for digest, item in todo.items() if isinstance(item, ToolResult)}
        if unpointed:
            tables.pointers.update(zip(unpointed, render_pointers(list(unpointed.values())), strict=True))
        self._held += len(tables.renders) + len(tables.pointers)
        if self._held > self.capacity:
            self._shrink(tables)

    def renders_of(self, tables: SessionRenders, items: Sequence[ConversationItem]) -> list[RenderedItem]:
        """The history renders of ``items`` from ``tables``, those it lacks rendered (in one
        backend call) and entered first."""
        renders = tables.renders
        digests = [cj[1] if (cj := item._cj) is not None else digest_of(item) for item in items]
        todo = {digest: item for digest, item in zip(digests, items, strict=True) if digest not in renders}
        if todo:
            before = len(renders)
            renders.update(zip(todo, render_items(list(todo.values()), "history"), strict=True))
            self._held += len(renders) - before
            found = [renders[digest] for digest in digests]
            if self._held > self.capacity:
                self._shrink(tables)
            return found
        return [renders[digest] for digest in digests]

    def _shrink(self, keep: SessionRenders) -> None:
        """Back within ``capacity``: the least recently built sessions go,
        then the oldest entries of the one being built."""
        sessions = self._sessions
        while self._held > self.capacity and len(sessions) > 1:
            key = next(iter(sessions))
            if sessions[key] is keep:
                sessions.move_to_end(key)
                continue
            self._held -= len(sessions.pop(key))
        for table in (keep.renders, keep.pointers):
            excess = self._held - self.capacity
            if excess > 0:
                drop = list(islice(table, min(len(table), excess + self.capacity // 8)))
                for digest in drop:
                    del table[digest]
                self._held -= len(drop)

    # -- blocks and one-entry memos --------------------------------------------

    def last_value(self, name: str) -> Any:
        """What ``keep_last`` kept under ``name`` (``None`` at first)."""
        return self._last.get(name)

    def keep_last(self, name: str, value: Any) -> None:
        self._last[name] = value

    def last(self, name: str, source: Any, make: Callable[[], Any]) -> Any:
        """``make()``, unless ``source`` is the very object of the last call under ``name``."""
        kept = self._last.get(name)
        if kept is not None and kept[0] is source:
            return kept[1]
        value = make()
        self._last[name] = (source, value)
        return value

    def block(self, key: Any, make: Callable[[], Any]) -> Any:
        """A body block's render, kept by its inputs ``key``."""
        hit = self._blocks.get(key)
        if hit is None:
            hit = self._blocks[key] = make()
            if len(self._blocks) > self.block_capacity:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(key)
        return hit

    def summary(self, summary: str | None, elided: Sequence[Any], make: Callable[[], Any]) -> Any:
        """The compacted-summary blocks of ``summary`` and its spans ``elided``: ``block``
        under ``("summary", summary, tuple(elided))``, found first by the identity of an
        ``elided`` tuple seen before (``ByIdentity``: the key's lookup, a ``get`` and a
        ``move_to_end``, hashes and compares every span in Python, and a seeded run's spans
        are its carry's, the same tuple run after run)."""
        return self._summaries.get(
            elided, lambda: self.block(("summary", summary, tuple(elided)), make), also=summary
        )


RENDERS = RenderCache()
"""The process's render cache (builders and the compactor share it by default)."""


def render_item(item: ConversationItem, region_class: str) -> RenderedItem:
    """The rendered form of a conversation item, cached per (region class, item digest)."""
    return RENDERS.item(item, region_class)


def tool_result_pointer(item: ToolResult) -> RenderedItem:
    """A tool result truncated to a typed pointer; cached like renders."""
    return RENDERS.pointer(item)


__all__ = ["RENDERS", "RenderCache", "SessionRenders", "render_item", "tool_result_pointer"]
