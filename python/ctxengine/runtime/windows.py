"""A worker's session windows (``SessionWindow``, ADR 0016): read from the log only what is
new, extended by what the worker commits, bounded by one byte bound.

A seed needs the item events between the carried point and the seed sequence.
Events are immutable and sequences never reused, so the items of a range that
ends at an existing event never change: a worker that seeded the session's
previous run holds most of them in the session's window, and reads from the
store only the events after it (one range query, one native decode). The
newest carry and working-state event below a seed are kept per reader the same
way: a later seed reads only the range between the two (usually nothing: the
worker wrote it, ``committed``).

Bounded by ``max_bytes`` of the windows' estimated memory (by default the
process's ``MemoryLimits.window_bytes``, ``ctxengine.set_memory_limits``);
the least recently used windows go first, the one in use stays. A window
never decides anything: a range it does not cover is read from the store,
failing closed on anything it cannot read.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from ..core import slices
from ..core.memory import memory_limits
from ..core.slices import Steps
from ..errors import ArgumentError
from ..model import ConversationItem, Principal
from ..stores.events import Event, ItemRow, Store
from .carry import CARRY_RECORDED
from .session import read_item_window
from .window import Marks, SessionWindow
from .working_state import WORKING_STATE_UPDATED

#: The event types a seed looks for below it (carry, working state).
MARK_TYPES = (CARRY_RECORDED, WORKING_STATE_UPDATED)


class Span(NamedTuple):
    """A range of a session's window: its columns (not copies) up to ``end``."""

    window: SessionWindow
    end: int

    @property
    def items(self) -> list[ConversationItem]:
        return self.window.items


class Windows:
    """A worker's session windows, one per session (see the module)."""

    def __init__(self, store: Store, *, max_bytes: int | None = None) -> None:
        if max_bytes is not None and (type(max_bytes) is not int or max_bytes < 0):
            raise ArgumentError("Windows", "max_bytes", f"a non-negative int, got {max_bytes!r}")
        self.store = store
        #: The bound given, or ``None``: the process's ``MemoryLimits.window_bytes``.
        self._max_bytes = max_bytes
        self._windows: OrderedDict[str, SessionWindow] = OrderedDict()
        #: Each window's ``nbytes`` when last touched, and their sum: a window grows only while
        #: it is used, so its size is taken then (summing every window's on each read would
        #: cost a worker of thousands of sessions a pass over all of them per call).
        self._sizes: dict[str, int] = {}
        self._total = 0
        self.reads = 0  # item range reads made (for tests and the bench)
        self.mark_reads = 0  # carry and state reads made (for tests)

    @property
    def max_bytes(self) -> int:
        given = self._max_bytes
        return memory_limits().window_bytes if given is None else given

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        if type(value) is not int or value < 0:
            raise ArgumentError("Windows", "max_bytes", f"a non-negative int, got {value!r}")
        self._max_bytes = value

    @property
    def nbytes(self) -> int:
        """The windows' estimated memory (each as of when it was last used)."""
        return self._total

    def __len__(self) -> int:
        return len(self._windows)

    def get(self, session_id: str) -> SessionWindow | None:
        return self._windows.get(session_id)

    def window(self, session_id: str) -> SessionWindow:
        """The session's window (an empty one when there is none), now the most recent."""
        window = self._windows.get(session_id)
        if window is None:
            window = self._windows[session_id] = SessionWindow(session_id)
        else:
            self._windows.move_to_end(session_id)
        return window

    def forget(self, session_id: str) -> None:
        """Drop the session's window (it may hold rows of a transaction that rolled back)."""
        self._windows.pop(session_id, None)
        self._total -= self._sizes.pop(session_id, 0)

    def evict(self, session_id: str) -> None:
        """Take the size of ``session_id``'s window (just used), then back within the bound:
        the least recently used windows go (the one in use stays)."""
        window = self._windows.get(session_id)
        if window is not None:
            size = window.nbytes
            self._total += size - self._sizes.get(session_id, 0)
            self._sizes[session_id] = size
        limit = self.max_bytes
        while self._total > limit and len(self._windows) > 1:
            gone, _ = self._windows.popitem(last=False)
            self._total -= self._sizes.pop(gone, 0)

    # -- item rows -----------------------------------------------------------------------

    async def span(self, session_id: str, after: int, through: int, counter: str | None) -> Span:
        """The session's window, whose first ``end`` rows and items are those with
        ``after < sequence <= through`` (valid until the window changes). ``through`` must be
        an existing event's sequence (a seed): only then is the range immutable."""
        while True:
            window = self.window(session_id)
            if window.counter != counter or not window.lo <= after <= window.hi:
                window.reset(after, counter)
            start = window.hi
            if through <= start:
                break
            rows, items = await read_item_window(self.store, session_id, start, through + 1, counter)
            self.reads += 1  # answered (a read refused inside a predicted commit is not counted)
            if self._windows.get(session_id) is not window or window.hi != start:
                continue  # another task moved the window while this one read: look again
            window.add(rows, items)
            window.hi = through
            break
        window.known = True
        if after > window.lo:  # the carried point moved on: what lies below it is never read again
            window.drop_below(bisect_right(window.seqs, after))
            window.lo = after
        self.evict(session_id)
        return Span(window, bisect_right(window.seqs, through))

    def item_sequences(
        self, session_id: str, events: Sequence[int] = (), items: Sequence[int] = ()
    ) -> Sequence[int] | None:
        """The sequences of every conversation item of the session's window, sorted (complete
        between its first and last: what a span of a reference checkpoint needs); with the
        ``items`` among ``events`` a transaction in progress appended, when they follow it."""
        window = self._windows.get(session_id)
        if window is None or not window.known:
            return None
        if window.follows(events):
            return [*window.seqs, *sorted(items)]
        return window.seqs

    def next_sequence(self, session_id: str) -> int | None:
        """One past the last event this worker knows of in the session (read or committed
        without a gap), or ``None``: a prediction, which the store checks."""
        window = self._windows.get(session_id)
        return window.hi + 1 if window is not None and window.known else None

    def extend(
        self,
        session_id: str,
        events: Sequence[Event],
        rows: Sequence[ItemRow] = (),
        items: Sequence[ConversationItem] = (),
    ) -> None:
        """``events`` this worker has just committed (``rows``/``items``: its conversation
        items): when they follow the window without a gap, it grows by them, so the next
        seed need not read them back; the carry and state events among them are noted."""
        window = self._windows.get(session_id)
        if not events:
            return
        window = self.window(session_id)
        sequences = [e.sequence for e in events]
        window.committed(events, MARK_TYPES)
        if window.known and window.follows(sequences) and len(rows) == len(items):
            window.add(rows, items)
            window.hi = max(sequences)
        self.evict(session_id)

    def append_read(
        self, session_id: str, sequence: int, row: ItemRow, item: ConversationItem
    ) -> SessionWindow | None:
        """A row this worker is appending at ``sequence`` (inside a write that may not
        commit: ``retract`` undoes it), when it follows the window."""
        window = self._windows.get(session_id)
        if window is None or not window.known or not window.follows([sequence]):
            return None
        window.add([row], [item])
        window.hi = sequence
        return window

    def retract(self, session_id: str, sequence: int) -> None:
        """Undo an ``append_read`` at ``sequence`` (its write was not committed)."""
        window = self._windows.get(session_id)
        if window is None or window.hi != sequence:
            return
        window.drop_from(bisect_left(window.seqs, sequence))
        window.hi = sequence - 1
        window.primed = min(window.primed, window.hi)

    def record_tokens(self, session_id: str, counter: str, tokens: Sequence[tuple[int, int]]) -> Steps[None]:
        """Counts ``(sequence, raw)`` just stored for rows of the window (steps: a seed's
        backfill may count thousands, ``core.slices``)."""
        window = self._windows.get(session_id)
        if window is None or window.counter != counter:
            return
        seqs, counts = window.seqs, window.tokens
        n = len(seqs)
        i = 0
        for k, (sequence, raw) in enumerate(sorted(tokens)):  # (a merge: both ascend)
            if k and not k % slices.SLICE_ITEMS:
                yield
            if i < n and seqs[i] != sequence:
                i = bisect_left(seqs, sequence, i)
            if i < n and seqs[i] == sequence:
                if counts[i] is None:
                    counts[i] = raw
                i += 1

    # -- carry and state events below a seed ----------------------------------------------

    async def marks(
        self, session_id: str, before: int, principal: Principal
    ) -> tuple[Event | None, Event | None]:
        """``(carry event, working-state event)``: the newest of each type below ``before``
        that ``principal`` may read (``None`` when there is none)."""
        window = self.window(session_id)
        key = (principal.principal_id, principal.tenant_id)
        known = window.marks.get(key)
        if known is None or before < known.below:
            carry, state = await self._precise(session_id, before, principal)
        elif before == known.below:
            carry, state = known.carry, known.state
        else:
            carry, state = known.carry, known.state
            events = window.tail_between(known.below, before)
            if events is None:
                events = await self.store.events.read(session_id, known.below - 1, MARK_TYPES, before=before)
                self.mark_reads += 1
            for event in events:
                if not event.visibility.allows(principal):
                    continue
                if event.type == CARRY_RECORDED:
                    carry = event
                else:
                    state = event
        window.marks[key] = Marks(before, carry, state)
        return carry, state

    async def _precise(
        self, session_id: str, before: int, principal: Principal
    ) -> tuple[Event | None, Event | None]:
        events = self.store.events
        each = getattr(events, "latest_before_each", None)  # the SQL stores': one operation
        if each is not None:
            carry, state = await each(session_id, before, MARK_TYPES, principal)
        else:
            carry = await events.latest_before(session_id, before, CARRY_RECORDED, principal)
            state = await events.latest_before(session_id, before, WORKING_STATE_UPDATED, principal)
        self.mark_reads += 2
        return carry, state


__all__ = ["MARK_TYPES", "Span", "Windows"]
