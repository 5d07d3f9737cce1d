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
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..model import Principal
from ..stores.events import Event, Store
from .carry import CARRY_RECORDED
from .working_state import WORKING_STATE_UPDATED

_TYPES = (CARRY_RECORDED, WORKING_STATE_UPDATED)


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
        self.reads = 0  # store reads made (for tests)

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
            self.reads += 1
            for event in await self.store.events.read(session_id, known.below - 1, _TYPES, before=before):
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

    def forget(self, session_id: str) -> None:
        """Drop what is known of ``session_id`` (a transaction that read it rolled back)."""
        for key in [key for key in self._known if key[0] == session_id]:
            del self._known[key]

    async def _precise(
        self, session_id: str, before: int, principal: Principal
    ) -> tuple[Event | None, Event | None]:
        self.reads += 2
        events = self.store.events
        carry = await events.latest_before(session_id, before, CARRY_RECORDED, principal)
        state = await events.latest_before(session_id, before, WORKING_STATE_UPDATED, principal)
        return carry, state


__all__ = ["SeedEvents"]
