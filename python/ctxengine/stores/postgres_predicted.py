"""A worker's write set committed in one call on PostgreSQL (issue 13, ADR 0013).

A step of a run writes a few events, their token counts, maybe a claim, and
one checkpoint version, in one transaction: BEGIN, the session lock, the
append, the checkpoint write, a prune, COMMIT. Six round trips, each a
statement the server parses, binds and runs and the client sends, waits for
and reads: with four workers on two cores that overhead was a third of a
step's CPU. The worker that wrote the session's last event already knows
what the store would answer (the next sequence, the run's next version, a
fresh lease). Inside ``PostgresStore.predicted(...)`` the store's write
operations answer with those predictions and only queue the writes; the
block's exit sends them in one call of ``ctxengine_commit_predicted``
(migration revision 4), which takes the session lock, checks every
prediction before it writes and, when one does not hold, raises SQLSTATE
``CX001`` so that nothing of the call is kept. The caller then runs the same
code again in an ordinary transaction (``StorePredictionMissed``). Anything
the block does that needs an answer from the server (a read, a second
checkpoint, another session) misses at once, before anything is sent.

Every check of the ordinary path runs unchanged (the ports validate before
they call an operation); what the server checks, the function checks: the
keys are new, the sequence is next, the claim is the run's first, the lease
and version are current, a delta has a full base.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection

from ..errors import StorePredictionMissed
from . import _rows
from .events import Lease, NewEvent

Conn = AsyncConnection[Any]

#: The SQLSTATE ``ctxengine_commit_predicted`` raises when a prediction does not hold.
MISSED = "CX001"

CALL = (
    "SELECT ctxengine_commit_predicted(%(s)s, %(cls)s, %(first)s, %(events)s::json, %(counts)s::json, "
    "%(claim_run)s, %(claim_owner)s, %(cp_run)s, %(cp_owner)s, %(cp_epoch)s, %(cp_version)s, %(cp_kind)s, "
    "%(cp_trigger)s, %(cp_payload)s, %(cp_format)s, %(cp_at)s, %(prune)s)"
)


@dataclass(slots=True)
class Prediction:
    """What the block predicted and queued: one session's events and one run's writes."""

    session_id: str
    next_sequence: int
    run_id: str
    version: int
    events: list[tuple[NewEvent, str, datetime]] = field(default_factory=list)
    counts: list[tuple[int, str, int]] = field(default_factory=list)
    claim_owner: str | None = None
    checkpoint: tuple[Lease, str, str, str, datetime, int] | None = None
    prune_before: int | None = None

    def miss(self, why: str) -> StorePredictionMissed:
        return StorePredictionMissed(f"session {self.session_id!r}, run {self.run_id!r}: {why}")

    def append_all(
        self, news: list[NewEvent], texts: list[str], created_at: datetime
    ) -> list[tuple[Any, bool]]:
        """Queue the batch; each event stored new at the next predicted sequence."""
        keys = {new.derivation_key for new in news} | {e[0].derivation_key for e in self.events}
        if len(keys) != len(news) + len(self.events):
            raise self.miss("a derivation key repeats in the write set")
        if news[0].session_id != self.session_id:
            raise self.miss(f"an append to another session {news[0].session_id!r}")
        first = self.next_sequence + len(self.events)
        self.events.extend((new, text, created_at) for new, text in zip(news, texts, strict=True))
        return [((self.session_id, first + i), True) for i in range(len(news))]

    def append(self, new: NewEvent, text: str, created_at: datetime) -> tuple[Any, bool]:
        [result] = self.append_all([new], [text], created_at)
        return result

    def put_counts(self, session_id: str, counter: str, counts: list[tuple[int, int]]) -> None:
        if session_id != self.session_id:
            raise self.miss(f"counts of another session {session_id!r}")
        self.counts.extend((seq, counter, n) for seq, n in counts)

    def claim(self, run_id: str, owner: str) -> int:
        """The run's first lease (the call refuses a run claimed before)."""
        if run_id != self.run_id or self.claim_owner is not None or self.checkpoint is not None:
            raise self.miss(f"a claim of {run_id!r} that is not the run's first write")
        self.claim_owner = owner
        return 1

    def write_checkpoint(
        self, run_id: str, lease: Lease, kind: str, trigger: str, text: str, created_at: datetime, fmt: int
    ) -> int:
        _rows.check_lease(run_id, lease, (lease.owner, lease.epoch))  # as the ordinary write: the run id
        if run_id != self.run_id or self.checkpoint is not None:
            raise self.miss(f"a checkpoint of {run_id!r} beyond the one predicted")
        self.checkpoint = (lease, kind, trigger, text, created_at, fmt)
        return self.version

    def prune(self, run_id: str, before_version: int) -> int:
        """Queued; the rows it deletes are not counted (the one caller, a terminal checkpoint
        write, does not ask)."""
        if run_id != self.run_id or self.checkpoint is None or self.prune_before is not None:
            raise self.miss(f"a prune of {run_id!r} without its checkpoint")
        self.prune_before = before_version
        return 0

    def params(self, lock_class: int) -> dict[str, Any]:
        events = [_event_row(new, text, at) for new, text, at in self.events]
        cp = self.checkpoint
        return {
            "s": self.session_id,
            "cls": lock_class,
            "first": self.next_sequence,
            # Two JSON texts: the driver dumps an array parameter element by element in Python.
            "events": json.dumps(events, ensure_ascii=False),
            "counts": json.dumps(self.counts, ensure_ascii=False),
            "claim_run": self.run_id if self.claim_owner is not None else None,
            "claim_owner": self.claim_owner,
            "cp_run": self.run_id if cp is not None else None,
            "cp_owner": cp[0].owner if cp is not None else None,
            "cp_epoch": cp[0].epoch if cp is not None else None,
            "cp_version": self.version if cp is not None else None,
            "cp_kind": cp[1] if cp is not None else None,
            "cp_trigger": cp[2] if cp is not None else None,
            "cp_payload": cp[3] if cp is not None else None,
            "cp_format": cp[5] if cp is not None else None,
            "cp_at": cp[4] if cp is not None else None,
            "prune": self.prune_before,
        }

    @property
    def empty(self) -> bool:
        return not (self.events or self.counts or self.claim_owner is not None or self.checkpoint is not None)


def _event_row(new: NewEvent, text: str, at: datetime) -> list[Any]:
    """One event as the function reads it: key, type, payload, run, actor, scope, id, format, at."""
    visibility = new.visibility
    return [new.derivation_key, new.type, text, new.run_id, new.actor, visibility.scope, visibility.id,
            new.format_version, at.isoformat()]  # fmt: skip


async def commit(conn: Conn, prediction: Prediction, lock_class: int) -> None:
    """Send the write set in one call; ``StorePredictionMissed`` when a prediction did not hold
    (nothing of it was written)."""
    try:
        await conn.execute(CALL, prediction.params(lock_class))
    except psycopg.Error as exc:
        if exc.sqlstate == MISSED:
            raise prediction.miss(str(exc.diag.message_primary or exc)) from None
        raise


__all__ = ["CALL", "MISSED", "Prediction", "commit"]
