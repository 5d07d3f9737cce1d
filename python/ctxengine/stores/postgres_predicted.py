"""A worker's write set committed in one call on PostgreSQL (issue 13, ADR 0013).

A step of a run writes a few events, their token counts, maybe a claim, and
one checkpoint version, in one transaction: BEGIN, the session lock, the
append, the checkpoint write, a prune, COMMIT. Six round trips, each a
statement the server parses, binds and runs and the client sends, waits for
and reads: with four workers on two cores that overhead was a third of a
step's CPU. The worker that wrote the session's last event already knows
what the store would answer (the next sequence, the run's next version, a
fresh lease). Inside ``PostgresStore._predicted(...)`` the store's write
operations answer with those predictions and only queue the writes; the
block's exit sends them in one call of ``ctxengine_commit_predicted``
(``postgres_ddl``), which takes the session lock, checks every
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
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection

from .events import NewEvent
from .prediction import Prediction

Conn = AsyncConnection[Any]

#: The SQLSTATE ``ctxengine_commit_predicted`` raises when a prediction does not hold.
MISSED = "CX001"

CALL = (
    "SELECT ctxengine_commit_predicted(%(s)s, %(cls)s, %(first)s, %(events)s::json, %(counts)s::json, "
    "%(claim_run)s, %(claim_owner)s, %(cp_run)s, %(cp_owner)s, %(cp_epoch)s, %(cp_version)s, %(cp_kind)s, "
    "%(cp_trigger)s, %(cp_payload)s, %(cp_format)s, %(cp_at)s, %(prune)s)"
)


def params(prediction: Prediction, lock_class: int) -> dict[str, Any]:
    """The call's parameters."""
    events = [_event_row(new, text, at) for new, text, at in prediction.events]
    cp = prediction.checkpoint
    return {
        "s": prediction.session_id,
        "cls": lock_class,
        "first": prediction.next_sequence,
        # Two JSON texts: the driver dumps an array parameter element by element in Python.
        "events": json.dumps(events, ensure_ascii=False),
        "counts": json.dumps(prediction.counts, ensure_ascii=False),
        "claim_run": prediction.run_id if prediction.claim_owner is not None else None,
        "claim_owner": prediction.claim_owner,
        "cp_run": prediction.run_id if cp is not None else None,
        "cp_owner": cp[0].owner if cp is not None else None,
        "cp_epoch": cp[0].epoch if cp is not None else None,
        "cp_version": prediction.version if cp is not None else None,
        "cp_kind": cp[1] if cp is not None else None,
        "cp_trigger": cp[2] if cp is not None else None,
        "cp_payload": cp[3] if cp is not None else None,
        "cp_format": cp[5] if cp is not None else None,
        "cp_at": cp[4] if cp is not None else None,
        "prune": prediction.prune_before,
    }


def _event_row(new: NewEvent, text: str, at: datetime) -> list[Any]:
    """One event as the function reads it: key, type, payload, run, actor, scope, id, format, at."""
    visibility = new.visibility
    return [new.derivation_key, new.type, text, new.run_id, new.actor, visibility.scope, visibility.id,
            new.format_version, at.isoformat()]  # fmt: skip


async def commit(conn: Conn, prediction: Prediction, lock_class: int) -> None:
    """Send the write set in one call; ``StorePredictionMissed`` when a prediction did not hold
    (nothing of it was written)."""
    try:
        await conn.execute(CALL, params(prediction, lock_class))
    except psycopg.Error as exc:
        if exc.sqlstate == MISSED:
            raise prediction.miss(str(exc.diag.message_primary or exc)) from None
        raise


__all__ = ["CALL", "MISSED", "commit", "params"]
