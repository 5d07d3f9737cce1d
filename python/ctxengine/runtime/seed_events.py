"""The latest carry and working-state event below a seed, read incrementally (ADR 0011).

Every seed needs the latest ``context.carry.recorded`` and the latest
``context.working_state.updated`` event below its sequence that the run's
principal may see. Sequences are never reused and a session's events below an
existing event never change, so once a worker knows the answer below one seed,
the answer below a later seed of the same session is the newest visible event
of the range between them, or else the same event. ``SeedEvents`` keeps, per
session and reader (principal and tenant), the answer below the last seed it
served; a later seed reads only the carry and state events of the range between
the two seeds (one typed read, usually empty), instead of two ``latest_before``
reads that fetch the same, possibly large, carry payload every turn.

The cache never decides anything: a session it does not know and a seed below
the remembered one are answered by ``latest_before`` as before. The unfiltered
view (``principal=None``, which passes over principal-scoped carries) does not
use it.
Typed reads fail closed on a row of an unknown type or a newer format in their
range, as ``latest_before`` does on the rows it passes over.

A worker that wrote every event of that range itself (the usual case: a session's
turns run on the worker that took its previous turn) knows them already: the
loop reports what it committed (``committed``), and a range inside an unbroken
run of events reported in sequence order is answered without a read (there is no
row in it of a type or format this process does not know).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Principal
from ..stores.events import Event, Store
from .carry import CARRY_RECORDED
from .working_state import WORKING_STATE_UPDATED

_TYPES = (CARRY_RECORDED, WORKING_STATE_UPDATED)
#: Carry and state events an unbroken run keeps (older ones end it there).
_MARKS_KEPT = 32


@dataclass(frozen=True, slots=True)
class _Known:
    """The newest visible carry and state events with ``sequence < below``."""

    below: int
    carry: Event | None
    state: Event | None


class SeedEvents:
    """Per-process memory of the latest carry and state event below each session's last seed."""

    def __init__(self, store: Store, *, capacity: int = 4096) -> None:
        self.store = store
        self.capacity = capacity
        self._known: OrderedDict[tuple[str, str, str], _Known] = OrderedDict()
        #: Per session: ``(lo, hi, carry and state events)`` of an unbroken run of events
        #: ``lo <= sequence <= hi`` this process committed (or saw committed) in order.
        self._tail: OrderedDict[str, tuple[int, int, tuple[Event, ...]]] = OrderedDict()
        self.reads = 0  # store reads made, answered (for tests)

    async def latest(
        self, session_id: str, before: int, principal: Principal
    ) -> tuple[Event | None, Event | None]:
        """``(carry event, working-state event)``: the newest of each type below ``before``
        that ``principal`` may read (``None`` when there is none)."""
        key = (session_id, principal.principal_id, principal.tenant_id)
        known = self._known.get(key)
        if known is None or before < known.below:
            carry, state = await self._precise(session_id, before, principal)
        elif before == known.below:
            carry, state = known.carry, known.state
        else:
            carry, state = known.carry, known.state
            tail = self._tail.get(session_id)
            if tail is not None and tail[0] <= known.below and before - 1 <= tail[1]:
                events = [e for e in tail[2] if known.below <= e.sequence < before]
            else:
                events = await self.store.events.read(session_id, known.below - 1, _TYPES, before=before)
                self.reads += 1
            for event in events:
                if not event.visibility.allows(principal):
                    continue
                if event.type == CARRY_RECORDED:
                    carry = event
                else:
                    state = event
        self._known[key] = _Known(before, carry, state)
        self._known.move_to_end(key)
        while len(self._known) > self.capacity:
            self._known.popitem(last=False)
        return carry, state

    def committed(self, session_id: str, events: Sequence[Event]) -> None:
        """``events`` of ``session_id`` are committed (appended by this process, or found
        stored by an idempotent repeat): when they continue the session's unbroken run
        without a gap, the run grows by them; otherwise a new run starts with them."""
        if not events:
            return
        seqs = sorted(e.sequence for e in events)
        first, last = seqs[0], seqs[-1]
        if last - first + 1 != len(seqs) or len(set(seqs)) != len(seqs):
            self._tail.pop(session_id, None)
            return
        marks = tuple(sorted((e for e in events if e.type in _TYPES), key=lambda e: e.sequence))
        tail = self._tail.get(session_id)
        if tail is not None and tail[1] + 1 == first:
            lo, marks = tail[0], (*tail[2], *marks)
            if len(marks) > _MARKS_KEPT:  # the run now starts after the marks let go
                lo, marks = marks[-_MARKS_KEPT - 1].sequence + 1, marks[-_MARKS_KEPT:]
            self._tail[session_id] = (lo, last, marks)
        else:
            self._tail[session_id] = (first, last, marks)
        self._tail.move_to_end(session_id)
        while len(self._tail) > self.capacity:
            self._tail.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop what is known of ``session_id`` (a transaction that read it rolled back)."""
        self._tail.pop(session_id, None)
        for key in [key for key in self._known if key[0] == session_id]:
            del self._known[key]

    async def _precise(
        self, session_id: str, before: int, principal: Principal
    ) -> tuple[Event | None, Event | None]:
        events = self.store.events
        each = getattr(events, "latest_before_each", None)  # the SQL stores': one operation
        if each is not None:
            carry, state = await each(session_id, before, _TYPES, principal)
        else:
            carry = await events.latest_before(session_id, before, CARRY_RECORDED, principal)
            state = await events.latest_before(session_id, before, WORKING_STATE_UPDATED, principal)
        self.reads += 2
        return carry, state


__all__ = ["SeedEvents"]
