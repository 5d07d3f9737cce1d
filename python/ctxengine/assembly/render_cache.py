"""The renderer's own bounded cache: renders of conversation items by item digest.

Rendering is a pure function of an item's canonical content and its region
class, so renders are kept by ``(region class, item digest)`` in plain
dicts, which the builder hands the backend as data (``BodyInputs.renders``
and ``.pointers``): the fit looks renders up instead of calling back. Items
hold only their data (and their own canonical bytes).

A session's history renders (and tool-result pointers) have their own pair
of tables, so one build reads one small table rather than probing a large
one all over memory. Everything is bounded: the session tables by
``capacity`` renders and ``max_bytes`` of their estimated memory
(``render_bytes``; least recently built sessions go first, then the oldest
eighth of the table being built), the region classes' tables by
``capacity`` each and an eighth of ``max_bytes`` between them (oldest
first), ``block_capacity`` block renders. Bounded by count alone, a worker
that takes turns of many sessions kept every render of every session it had
seen, up to a million: a gigabyte or more. ``max_bytes`` defaults to the process's
``MemoryLimits.render_bytes`` (``ctxengine.set_memory_limits``), read as the cache grows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ..core.identity import ByIdentity
from ..core.memory import memory_limits
from ..core.slices import SLICE_ITEMS, Steps, batches, finish
from ..errors import ArgumentError
from ..model import ConversationItem, ToolResult
from .render import POINTER, digest_of, render_conversation, render_items, render_pointer, render_pointers
from .request import RenderedItem
from .session_renders import SessionRenders, one_render_bytes, render_bytes

#: The estimated memory of a session's tables beside their renders: the tables, the line and
#: the body blocks of its last build (measured: about 4 KB in a worker's turns).
SESSION_OBJECTS = 4096
#: ``RenderCache``'s default ``max_bytes`` (the process's ``MemoryLimits`` in force at import;
#: a cache made without ``max_bytes`` follows them as they change).
DEFAULT_MAX_BYTES = memory_limits().render_bytes


def _digests(items: Sequence[Any]) -> list[bytes]:
    """``digest_of`` each item (canonicalizing those not yet: their ``_cj`` is filled)."""
    return [cj[1] if (cj := item._cj) is not None else digest_of(item) for item in items]


def _render_sizes(renders: Sequence[RenderedItem]) -> list[int]:
    return list(map(one_render_bytes, renders))


def _drop_oldest(table: dict[bytes, RenderedItem], enough: Callable[[int, int], bool]) -> tuple[int, int]:
    """Delete ``table``'s entries oldest first until ``enough(entries dropped, their
    one_render_bytes)`` holds (or none is left); returns both numbers."""
    drop: list[bytes] = []
    freed = 0
    for key, rendered in table.items():
        if enough(len(drop), freed):
            break
        drop.append(key)
        freed += one_render_bytes(rendered)
    for key in drop:
        del table[key]
    return len(drop), freed


class RenderCache:
    """The renderer's bounded caches (see the module)."""

    def __init__(
        self, capacity: int = 1 << 20, block_capacity: int = 4096, *, max_bytes: int | None = None
    ) -> None:
        for name, value in (
            ("capacity", capacity),
            ("block_capacity", block_capacity),
            ("max_bytes", 0 if max_bytes is None else max_bytes),
        ):
            if type(value) is not int or value < 0:
                raise ArgumentError("RenderCache", name, f"a non-negative int, got {value!r}")
        self.capacity = capacity
        self.block_capacity = block_capacity
        #: The bound given, or ``None``: the process's ``MemoryLimits.render_bytes``.
        self._max_bytes = max_bytes
        self._tables: dict[str, dict[bytes, RenderedItem]] = {}
        self._sessions: OrderedDict[Hashable, SessionRenders] = OrderedDict()
        #: The keys of ``_sessions`` by their first element (a builder's keys are
        #: ``(session id, first item digest)``), for ``forget_lines``.
        self._keys_of: dict[Hashable, list[Hashable]] = {}
        self._region_bytes = 0  # render_bytes of the region classes' tables
        self._held = 0  # renders in session tables
        self._bytes = 0  # their render_bytes, and SESSION_OBJECTS a session
        self._blocks: OrderedDict[Any, Any] = OrderedDict()
        # Summary blocks by the identity of their spans tuple (see ``summary``).
        self._summaries: ByIdentity[Any] = ByIdentity(block_capacity)
        # One-entry memos by identity of their inputs (the common rebuild).
        self._last: dict[str, Any] = {}

    @property
    def max_bytes(self) -> int:
        """The bound of the session tables' ``render_bytes`` (an eighth more for the region
        classes' tables)."""
        given = self._max_bytes
        return memory_limits().render_bytes if given is None else given

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        if type(value) is not int or value < 0:
            raise ArgumentError("RenderCache", "max_bytes", f"a non-negative int, got {value!r}")
        self._max_bytes = value

    # -- tables by region class ------------------------------------------------

    def table(self, region_class: str) -> dict[bytes, RenderedItem]:
        """The live table of ``region_class`` (``POINTER``: tool-result pointers)."""
        table = self._tables.get(region_class)
        if table is None:
            table = self._tables[region_class] = {}
        return table

    def _put(self, table: dict[bytes, RenderedItem], digest: bytes, rendered: RenderedItem) -> None:
        """Enter a render in a region class's table: each table holds at most ``capacity``,
        all of them an eighth of ``max_bytes`` (they hold one-off renders, such as each
        turn's user message, that a later build seldom asks for again); the other tables'
        oldest go first, then this one's."""
        table[digest] = rendered  # (on a miss: the callers look it up first)
        self._region_bytes += one_render_bytes(rendered)
        limit = self.max_bytes // 8
        if len(table) <= self.capacity and self._region_bytes <= limit:
            return
        keep_items, keep_bytes = self.capacity - self.capacity // 8, limit - limit // 8
        # The other tables' renders first, then this one's oldest: a table of one-off
        # renders that holds the bytes must not make every new render evict itself.
        for other in self._tables.values():
            if other is not table:
                self._region_bytes -= _drop_oldest(
                    other, lambda _, freed: self._region_bytes - freed <= keep_bytes
                )[1]
        size = len(table)
        self._region_bytes -= _drop_oldest(
            table,
            lambda dropped, freed: size - dropped <= keep_items and self._region_bytes - freed <= keep_bytes,
        )[1]

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
            tables.owned = True
            if type(key) is tuple and key:
                self._keys_of.setdefault(key[0], []).append(key)
            self._bytes += SESSION_OBJECTS
            if self._over():
                self._shrink(tables)
        else:
            sessions.move_to_end(key)
        return tables

    def forget_lines(self, session_id: Hashable) -> None:
        """Start again the render lines of ``session_id``'s tables (keys whose first element
        it is): its items will not be these objects again (the history reader dropped them),
        and a line holds its items alive. The renders stay, found by digest."""
        for key in self._keys_of.get(session_id, ()):
            tables = self._sessions.get(key)
            if tables is not None:
                tables.forget_line()

    def _unindex(self, key: Hashable) -> None:
        if type(key) is tuple and key:
            keys = self._keys_of.get(key[0])
            if keys is not None:
                keys.remove(key)
                if not keys:
                    del self._keys_of[key[0]]

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
            finish(self._first_history(tables, history))  # a line seen for the first time: all of it
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
        added = render_bytes(made.values())
        if unpointed:  # one backend call for the lot, as the renders
            new_pointers = render_pointers(list(unpointed.values()))
            pointers.update(zip(unpointed, new_pointers, strict=True))
            added += render_bytes(new_pointers)
        self._grew(tables, len(renders) + len(pointers) - before, added)

    def history_steps(self, tables: SessionRenders, history: Sequence[ConversationItem]) -> Steps[None]:
        """``history(tables, history)`` as steps (``core.slices``): a line seen for the first
        time is rendered in slices, and entered at the end (or, when the tables were
        filled meanwhile, what they lack then)."""
        if tables.renders or tables.pointers:
            self.history(tables, history)
            return
        yield from self._first_history(tables, history)

    def _first_history(self, tables: SessionRenders, history: Sequence[ConversationItem]) -> Steps[None]:
        """``history`` for empty tables: every item rendered, in one backend call each for
        renders and pointers a slice (what ``history`` does, without asking the tables per
        item)."""
        yield
        digests = yield from batches(_digests, history)
        todo = dict(zip(digests, history, strict=True))  # in history order, as the fit reads it
        if len(todo) != len(history):  # equal items: the first of each renders, as in ``history``
            todo = {}
            for digest, item in zip(digests, history, strict=True):
                todo.setdefault(digest, item)
        if not todo:
            return
        yield
        made = yield from batches(lambda part: render_items(part, "history"), list(todo.values()))
        unpointed = {digest: item for digest, item in todo.items() if isinstance(item, ToolResult)}
        new_pointers: list[RenderedItem] = []
        if unpointed:
            new_pointers = yield from batches(render_pointers, list(unpointed.values()))
            if len(new_pointers) > SLICE_ITEMS:
                # Canonicalized here, in slices, not by the first fit in one stretch (it
                # measures the pointers of every tool result it elides); a few are left to
                # a fit that needs them, as their counts are (``seeding.count_pointers_steps``).
                yield from batches(_digests, new_pointers)
        sizes = yield from batches(_render_sizes, [*made, *new_pointers])
        added = sum(sizes)
        yield
        if tables.renders or tables.pointers:  # filled while this one rendered: the rest only
            self.history(tables, history)
            return
        tables.renders.update(zip(todo, made, strict=True))
        if unpointed:
            tables.pointers.update(zip(unpointed, new_pointers, strict=True))
        if len(todo) == len(history):  # one render per item, in order: the fit's line as it is
            tables.start_line(history, made, new_pointers)
        self._grew(tables, len(tables.renders) + len(tables.pointers), added)

    def renders_of(self, tables: SessionRenders, items: Sequence[ConversationItem]) -> list[RenderedItem]:
        """The history renders of ``items`` from ``tables``, those it lacks rendered (in one
        backend call) and entered first. Items the line ends with are taken from it (the renders
        the tables hold for them, or equal ones a shrink since made the tables drop)."""
        tail = tables.line_tail(items)
        if tail is not None:
            return tail
        renders = tables.renders
        digests = [cj[1] if (cj := item._cj) is not None else digest_of(item) for item in items]
        todo = {digest: item for digest, item in zip(digests, items, strict=True) if digest not in renders}
        if todo:
            before = len(renders)
            made = render_items(list(todo.values()), "history")
            renders.update(zip(todo, made, strict=True))
            found = [renders[digest] for digest in digests]
            self._grew(tables, len(renders) - before, render_bytes(made))
            return found
        return [renders[digest] for digest in digests]

    def _grew(self, tables: SessionRenders, renders: int, nbytes: int) -> None:
        """Account for ``renders`` more renders of ``nbytes`` in ``tables``; back within the
        bounds if past them (tables this cache holds: a session window bounds its own)."""
        tables.nbytes += nbytes
        if not tables.owned:
            return
        self._held += renders
        self._bytes += nbytes
        if self._over():
            self._shrink(tables)

    def _over(self) -> bool:
        return self._held > self.capacity or self._bytes > self.max_bytes

    def _shrink(self, keep: SessionRenders) -> None:
        """Back within ``capacity`` and ``max_bytes``: the least recently built sessions
        go, then the oldest entries of the one being built (an eighth of the bound more)."""
        sessions = self._sessions
        while self._over() and len(sessions) > 1:
            key = next(iter(sessions))
            if sessions[key] is keep:
                sessions.move_to_end(key)
                continue
            gone = sessions.pop(key)
            self._unindex(key)
            self._held -= len(gone)
            self._bytes -= gone.nbytes + SESSION_OBJECTS
            gone.forget_line()  # the fit's cache of its line goes too
        if not self._over():
            return
        renders_left = self.capacity - self.capacity // 8
        bytes_left = self.max_bytes - self.max_bytes // 8

        def enough(dropped: int, freed: int) -> bool:
            return self._held - dropped <= renders_left and self._bytes - freed <= bytes_left

        for table in (keep.renders, keep.pointers):
            dropped, freed = _drop_oldest(table, enough)
            self._held -= dropped
            self._bytes -= freed
            keep.nbytes -= freed

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


__all__ = [
    "DEFAULT_MAX_BYTES",
    "RENDERS",
    "SESSION_OBJECTS",
    "RenderCache",
    "SessionRenders",
    "one_render_bytes",
    "render_bytes",
    "render_item",
    "tool_result_pointer",
]
