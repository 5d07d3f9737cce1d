"""Reading a session's history for seeds: only what is new, decoded once per process (ADR 0011).

A seed needs the item events between the carried point and the seed
sequence. Events are immutable and sequences never reused, so the items of a
range that ends at an existing event never change: a worker that seeded the
session's previous run already holds most of them. ``HistoryReader`` keeps,
per session, the last range it read (decoded items, their visibility and
stored token counts) and reads from the store only the events after it; the
items stay the same objects, so their canonical bytes (``_cj``) are reused
by the next build (and their renders, which the renderer keeps by digest). A fresh process reads the
range once, in one query, and decodes it in one native batch.

The cache is bounded (``max_items`` across sessions and ``max_bytes`` of their
estimated memory, ``row_bytes``, by default the process's ``MemoryLimits.history_bytes``,
``ctxengine.set_memory_limits``; least recently used sessions go first) and
never decides anything: a range it does not cover is
read from the store, failing closed on anything it cannot read.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from ..core.memory import memory_limits
from ..errors import ArgumentError
from ..model import ConversationItem
from ..stores.events import ItemRow, Store, Visibility
from .seed_events import SeedEvents
from .session import read_item_window

_visibility = attrgetter("visibility")
_payload = itemgetter(1)  # ItemRow.payload

#: The estimated memory of a cached row beside three times its payload text (the text, the
#: decoded item's content and its canonical bytes): the row, the item and their headers.
ROW_OBJECTS = 400
#: ``HistoryReader``'s default ``max_bytes`` (the process's ``MemoryLimits`` in force at import;
#: a reader made without ``max_bytes`` follows them as they change).
DEFAULT_MAX_BYTES = memory_limits().history_bytes


def row_bytes(rows: Sequence[ItemRow]) -> int:
    """The memory ``rows`` (holding their payloads) and their items are estimated to hold."""
    return sum(row_sizes(rows))


def row_sizes(rows: Sequence[ItemRow]) -> list[int]:
    """Each row's share of ``row_bytes``."""
    return [ROW_OBJECTS + 3 * n for n in map(len, map(_payload, rows))]


@dataclass(slots=True)
class Window:
    """Item rows with ``lo < sequence <= hi``, read with ``counter``."""

    lo: int
    hi: int
    counter: str | None
    #: Rows up to here have primed the estimator's memo already (see ``seeding``).
    primed: int = 0
    seqs: list[int] = field(default_factory=list)
    rows: list[ItemRow] = field(default_factory=list)
    items: list[ConversationItem] = field(default_factory=list)
    #: Every visibility class its rows hold (or held), by ``id`` (a window has few; the
    #: dict holds them, so their ids stay theirs).
    classes: dict[int, Visibility] = field(default_factory=dict)
    #: What the last seed made of this window (``seed_view``), for the next one to continue.
    view: Any = None
    #: ``row_sizes`` of its rows, and their sum.
    sizes: list[int] = field(default_factory=list)
    nbytes: int = 0

    def add(self, rows: Sequence[ItemRow], items: Sequence[ConversationItem]) -> int:
        """Append ``rows`` and their ``items``; returns their estimated memory."""
        sizes = row_sizes(rows)
        added = sum(sizes)
        self.sizes.extend(sizes)
        self.nbytes += added
        self.rows.extend(rows)
        self.items.extend(items)
        self.seqs.extend(row.sequence for row in rows)
        visibilities = list(map(_visibility, rows))
        self.classes.update(zip(map(id, visibilities), visibilities, strict=True))
        return added

    def drop_below(self, count: int) -> int:
        """Remove the first ``count`` rows and items; returns their estimated memory."""
        dropped = sum(self.sizes[:count])
        del self.rows[:count], self.items[:count], self.seqs[:count], self.sizes[:count]
        self.nbytes -= dropped
        return dropped

    def drop_from(self, index: int) -> int:
        """Remove the rows and items from ``index`` on; returns their estimated memory."""
        dropped = sum(self.sizes[index:])
        del self.rows[index:], self.items[index:], self.seqs[index:], self.sizes[index:]
        self.nbytes -= dropped
        return dropped


def _follows(window: Window, sequences: Sequence[int]) -> bool:
    """Whether ``sequences`` are the events right after the window, without a gap."""
    return (
        bool(sequences)
        and min(sequences) == window.hi + 1
        and max(sequences) - min(sequences) + 1 == len(sequences)
    )


class Span(NamedTuple):
    """A range of a session's window: its lists (not copies) up to ``end``."""

    window: Window
    end: int

    @property
    def rows(self) -> list[ItemRow]:
        return self.window.rows

    @property
    def items(self) -> list[ConversationItem]:
        return self.window.items


class HistoryReader:
    """Per-process cache of the item rows each session's seeds read."""

    def __init__(self, store: Store, *, max_items: int = 200_000, max_bytes: int | None = None) -> None:
        for name, value in (("max_items", max_items), ("max_bytes", 0 if max_bytes is None else max_bytes)):
            if type(value) is not int or value < 0:
                raise ArgumentError("HistoryReader", name, f"a non-negative int, got {value!r}")
        self.store = store
        self.max_items = max_items
        #: The bound given, or ``None``: the process's ``MemoryLimits.history_bytes``.
        self._max_bytes = max_bytes
        self._windows: OrderedDict[str, Window] = OrderedDict()
        self._size = 0
        self._bytes = 0
        self.reads = 0  # store reads made (for tests and the bench)
        #: Called with a session id whenever its window goes (``on_drop``).
        self._dropped: list[Callable[[str], None]] = []
        #: The latest carry and working-state event below each session's last seed.
        self.marks = SeedEvents(store)

    @property
    def max_bytes(self) -> int:
        """The bound of the windows' ``row_bytes``."""
        given = self._max_bytes
        return memory_limits().history_bytes if given is None else given

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        if type(value) is not int or value < 0:
            raise ArgumentError("HistoryReader", "max_bytes", f"a non-negative int, got {value!r}")
        self._max_bytes = value

    def on_drop(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(session_id)`` whenever a session's window goes (evicted, forgotten
        or replaced): its items will not be these objects again, so whatever a cache keeps by
        their identity for that session (the loop's digest and checkpoint memos, the render
        line) is dead weight from then on."""
        self._dropped.append(listener)

    async def history(
        self, session_id: str, after: int, through: int, counter: str | None
    ) -> tuple[list[ItemRow], list[ConversationItem]]:
        """The item rows with ``after < sequence <= through`` and their items, in order.

        ``through`` must be an existing event's sequence (a seed): only then is
        the range immutable and worth keeping.
        """
        span = await self.span(session_id, after, through, counter)
        return span.rows[: span.end], span.items[: span.end]

    async def span(self, session_id: str, after: int, through: int, counter: str | None) -> Span:
        """``history`` without copies: the session's window, whose first ``end`` rows and
        items are those with ``after < sequence <= through`` (valid until the window changes)."""
        while True:
            window = self._windows.get(session_id)
            if window is None or window.counter != counter or not window.lo <= after <= window.hi:
                window = Window(after, after, counter)
                self._put(session_id, window)
            start = window.hi
            if through <= start:
                break
            rows, items = await read_item_window(self.store, session_id, start, through + 1, counter)
            self.reads += 1  # answered (a read refused inside a predicted commit is not counted)
            if self._windows.get(session_id) is not window or window.hi != start:
                continue  # another task moved the window while this one read: look again
            self._bytes += window.add(rows, items)
            self._size += len(rows)
            window.hi = through
            break
        self._windows.move_to_end(session_id)
        if after > window.lo:  # the carried point moved on: what lies below it is never read again
            drop = bisect_right(window.seqs, after)
            self._bytes -= window.drop_below(drop)
            self._size -= drop
            window.lo = after
        self._evict()
        return Span(window, bisect_right(window.seqs, through))

    def item_sequences(
        self, session_id: str, events: Sequence[int] = (), items: Sequence[int] = ()
    ) -> Sequence[int] | None:
        """The sequences of every conversation item event of the session's window, sorted
        (complete between its first and last: what a span of a reference checkpoint needs).

        ``events``: the sequences a transaction in progress appended, ``items`` those of
        them that are conversation items: when they follow the window without a gap, they
        are known too (the window takes them only once they are committed)."""
        window = self._windows.get(session_id)
        if window is None:
            return None
        if _follows(window, events):
            return [*window.seqs, *sorted(items)]
        return window.seqs

    def primed_through(self, session_id: str) -> int:
        """The sequence up to which this window's rows have primed the estimator."""
        window = self._windows.get(session_id)
        return window.primed if window is not None else 0

    def set_primed(self, session_id: str, sequence: int) -> None:
        window = self._windows.get(session_id)
        if window is not None:
            window.primed = max(window.primed, sequence)

    def next_sequence(self, session_id: str) -> int | None:
        """One past the last event this worker knows of in the session (read or committed
        without a gap), or ``None`` without a window: a prediction, which the store checks."""
        window = self._windows.get(session_id)
        return window.hi + 1 if window is not None else None

    def retract(self, session_id: str, sequence: int) -> None:
        """Undo an ``extend`` that ended at ``sequence`` (its write was not committed)."""
        window = self._windows.get(session_id)
        if window is None or window.hi != sequence:
            return
        keep = bisect_left(window.seqs, sequence)  # (the rows at or after ``sequence`` go)
        self._size -= len(window.seqs) - keep
        self._bytes -= window.drop_from(keep)
        window.hi = sequence - 1
        window.primed = min(window.primed, window.hi)

    def forget(self, session_id: str) -> None:
        """Drop the session's window (it may hold rows of a transaction that rolled back)."""
        self._put(session_id, None)
        self.marks.forget(session_id)

    def extend(
        self,
        session_id: str,
        sequences: Sequence[int],
        rows: Sequence[ItemRow] = (),
        items: Sequence[ConversationItem] = (),
    ) -> None:
        """Events this worker has just committed at ``sequences`` (``rows``/``items``: those of
        them that are conversation items). When they follow the window without a gap, the
        window grows by them: the next seed need not read them back."""
        window = self._windows.get(session_id)
        if window is None or not _follows(window, sequences) or len(rows) != len(items):
            return
        self._bytes += window.add(rows, items)
        self._size += len(rows)
        window.hi = max(sequences)
        self._evict()  # (the bound holds between reads too; the window in use is kept)

    def record_tokens(self, session_id: str, counter: str, tokens: dict[int, int]) -> None:
        """Remember counts just stored for rows of the cached window."""
        window = self._windows.get(session_id)
        if window is None or window.counter != counter:
            return
        seqs, rows = window.seqs, window.rows
        for sequence, raw in tokens.items():
            i = bisect_left(seqs, sequence)
            if i < len(seqs) and seqs[i] == sequence and rows[i].tokens is None:
                rows[i] = rows[i]._replace(tokens=raw)

    def _put(self, session_id: str, window: Window | None) -> None:
        old = self._windows.pop(session_id, None)
        if old is not None:
            self._gone(session_id, old)
        if window is not None:
            self._windows[session_id] = window

    def _evict(self) -> None:
        while (self._size > self.max_items or self._bytes > self.max_bytes) and len(self._windows) > 1:
            self._gone(*self._windows.popitem(last=False))

    def _gone(self, session_id: str, old: Window) -> None:
        """``old``, the session's window, is out of the cache: un-count it, tell the listeners."""
        self._size -= len(old.rows)
        self._bytes -= old.nbytes
        for listener in self._dropped:
            listener(session_id)


__all__ = ["DEFAULT_MAX_BYTES", "HistoryReader", "Span", "Window", "row_bytes", "row_sizes"]
