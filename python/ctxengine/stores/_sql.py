"""The event log and checkpoint port over a SQL store (SQLite and PostgreSQL).

Both adapters validate the same way and differ only in the statements they
run and how they store a timestamp, so the ports are written once and each
adapter supplies its ``SqlOps``. ``store._call(fn, *args)`` runs ``fn`` on
the adapter's connection (a worker thread for SQLite, the pool for
PostgreSQL), joining the current transaction if there is one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..core.slices import emptied, finish_async
from ..errors import ModelValidationError
from ..model import Principal
from . import _batch_rows, _rows
from .events import (
    CheckpointKind,
    Event,
    ItemRow,
    Lease,
    NewEvent,
    RawCheckpoint,
    Visibility,
    check_event_type,
    check_identifier,
)

#: Seconds a statement of a SQL store may run before it is interrupted (``StatementTimeout``):
#: far above any statement of a worker, low enough that a runaway one (a crafted view or
#: trigger) ends. ``statement_timeout=None`` lifts the limit; migrations run without it.
DEFAULT_STATEMENT_TIMEOUT = 60.0


def check_statement_timeout(type_name: str, value: object) -> float | None:
    """``statement_timeout`` in seconds: ``None`` (no limit) or a number in (0, 86400]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86_400:
        raise ModelValidationError(
            type_name, "statement_timeout", f"expected None or 0 < seconds <= 86400, got {value!r}"
        )
    return float(value)


@dataclass(frozen=True, slots=True)
class SqlOps:
    append: Callable[..., Any]
    read: Callable[..., Any]
    read_covering: Callable[..., Any]
    latest_before: Callable[..., Any]
    claim: Callable[..., Any]
    write_checkpoint: Callable[..., Any]
    latest_raw: Callable[..., Any]
    delete: Callable[..., Any]
    timestamp: Callable[[datetime], Any]
    append_all: Callable[..., Any]
    read_items: Callable[..., Any]
    put_counts: Callable[..., Any]
    visibilities: Callable[..., Any]
    prune: Callable[..., Any]
    latest_each: Callable[..., Any]


#: Sessions whose last appended sequence an event log remembers (``last_known``).
TAILS_REMEMBERED = 4096


class SqlEventLog:
    _ops: SqlOps

    def __init__(self, store: Any) -> None:
        self._s = store
        self._tails: OrderedDict[str, int] = OrderedDict()

    def last_known(self, session_id: str) -> int | None:
        """The last sequence the latest append through this log to the session stored, found
        or (inside ``predicted``) predicted, or the latest item read found the session ending
        at; ``None``: none yet. A hint for predicted commits, never an answer: others append
        too, and a refused prediction is corrected by the append that follows it."""
        return self._tails.get(session_id)

    def _saw(self, session_id: str, sequence: int) -> None:
        tails = self._tails
        tails[session_id] = sequence
        tails.move_to_end(session_id)
        if len(tails) > TAILS_REMEMBERED:
            tails.popitem(last=False)

    async def append(self, event: NewEvent) -> Event:
        if not isinstance(event, NewEvent):
            raise ModelValidationError("EventLog.append", "event", f"expected NewEvent, got {type(event)}")
        self._s.write_policy.check(event.type, event.format_version)
        text = _rows.event_text(event)
        created_at = self._ops.timestamp(_rows.utc_now(self._s._clock))
        # Round trip before the write: a row that would not read back is never committed.
        probe = _rows.probe_event(event, text, created_at)
        row, inserted = await self._s._call(self._ops.append, event, text, created_at)
        self._saw(event.session_id, row[1])
        return replace(probe, sequence=row[1]) if inserted else _rows.repeat_of(row, event, text)

    async def append_all(self, events: Sequence[NewEvent]) -> tuple[list[Event], int]:
        news, texts = _batch_rows.check_batch(events, self._s.write_policy)
        if not news:
            return [], 0
        created_at = self._ops.timestamp(_rows.utc_now(self._s._clock))
        probes = await _batch_rows.probe_batch(news, texts, created_at)
        results = await self._s._call(self._ops.append_all, news, texts, created_at)
        self._saw(news[0].session_id, max(row[1] for row, _ in results))
        return _batch_rows.batch_events(results, news, texts, probes)

    async def read(
        self,
        session_id: str,
        after: int = 0,
        types: Iterable[str] | None = None,
        *,
        before: int | None = None,
    ) -> list[Event]:
        _rows.check_session("EventLog.read", session_id)
        wanted = _rows.type_filter(types)
        _rows.check_ints("EventLog.read", after=after, before=before)
        rows = await self._s._call(self._ops.read, session_id, after, before, wanted)
        return await self._decoded(rows, wanted)

    @staticmethod
    async def _decoded(rows: list[_rows.Row], wanted: tuple[str, ...] | None) -> list[Event]:
        """The events of the rows a read fetched, decoded on the event loop in slices as every
        store decodes a read (ADR 0028), and the rows then let go of in slices too."""
        events = await finish_async(_rows.decode_events_steps(rows, wanted))
        await finish_async(emptied(rows))
        return events

    async def read_covering(
        self, session_id: str, after: int, types: Iterable[str]
    ) -> tuple[list[Event], int]:
        """``read(session_id, after, types)`` and the sequence the read covers: the session's
        last sequence when it ran. Every event at or below it was committed by then (a
        session's appends commit in sequence order), so a later read of the same types may
        start there: a reader that polls for rare events (the planner, for plans) keeps its
        reads as short as what was appended since."""
        _rows.check_session("EventLog.read_covering", session_id)
        wanted = _rows.type_filter(types)
        if wanted is None:
            raise ModelValidationError("EventLog.read_covering", "types", "expected event types")
        _rows.check_ints("EventLog.read_covering", after=after)
        rows, through = await self._s._call(self._ops.read_covering, session_id, after, wanted)
        return await self._decoded(rows, wanted), through

    async def latest_before(
        self,
        session_id: str,
        before_sequence: int,
        event_type: str,
        principal: Principal | None = None,
    ) -> Event | None:
        _rows.check_session("EventLog.latest_before", session_id)
        check_event_type(event_type, "EventLog.latest_before")
        _rows.check_ints("EventLog.latest_before", before_sequence=before_sequence)
        found: Event | None = await self._s._call(
            self._ops.latest_before, session_id, before_sequence, event_type, principal
        )
        return found

    async def latest_before_each(
        self,
        session_id: str,
        before_sequence: int,
        event_types: tuple[str, ...],
        principal: Principal | None = None,
    ) -> tuple[Event | None, ...]:
        """``latest_before`` of each of ``event_types``, as one store operation."""
        _rows.check_session("EventLog.latest_before", session_id)
        for event_type in event_types:
            check_event_type(event_type, "EventLog.latest_before")
        _rows.check_ints("EventLog.latest_before", before_sequence=before_sequence)
        found: tuple[Event | None, ...] = await self._s._call(
            self._ops.latest_each, session_id, before_sequence, tuple(event_types), principal
        )
        return found

    async def read_items(
        self, session_id: str, after: int = 0, *, before: int | None = None, counter: str | None = None
    ) -> list[ItemRow]:
        self._check_read("EventLog.read_items", session_id, after, before, counter)
        rows, counts = await self._s._call(self._ops.read_items, session_id, after, before, counter)
        if rows and type(tail := rows[0][_batch_rows.TAIL]) is int:
            self._saw(session_id, tail)  # the tail as the read found it: a hint for the next append
        return await _batch_rows.item_rows_async(session_id, rows, counts)

    @staticmethod
    def _check_read(where: str, session_id: str, after: int, before: int | None, counter: str | None) -> None:
        _rows.check_session(where, session_id)
        _rows.check_ints(where, after=after, before=before)
        if counter is not None:
            check_identifier(where, "counter", counter)

    async def put_counts(self, session_id: str, counter: str, counts: Iterable[tuple[int, int]]) -> None:
        checked = _batch_rows.check_counts(session_id, counter, counts)
        if checked:
            await self._s._call(self._ops.put_counts, session_id, counter, checked)

    async def visibilities(
        self, session_id: str, event_type: str, after: int, through: int
    ) -> frozenset[Visibility]:
        _rows.check_session("EventLog.visibilities", session_id)
        check_event_type(event_type, "EventLog.visibilities")
        _rows.check_ints("EventLog.visibilities", after=after, through=through)
        pairs = await self._s._call(self._ops.visibilities, session_id, event_type, after, through)
        return frozenset(_batch_rows.visibility_of(session_id, scope, ident) for scope, ident in pairs)


class SqlCheckpointStore:
    _ops: SqlOps

    def __init__(self, store: Any) -> None:
        self._s = store

    async def claim(self, run_id: str, owner: str) -> Lease:
        _rows.check_claim(run_id, owner)
        epoch: int = await self._s._call(self._ops.claim, run_id, owner)
        return Lease(owner, epoch, run_id)

    async def write(
        self,
        run_id: str,
        payload: dict[str, Any],
        *,
        trigger: str,
        lease: Lease,
        kind: CheckpointKind = "full",
    ) -> int:
        checked_kind, text, fmt = _rows.check_checkpoint_write(
            run_id, payload, trigger, lease, kind, self._s.write_policy
        )
        created_at = self._ops.timestamp(_rows.utc_now(self._s._clock))
        version: int = await self._s._call(
            self._ops.write_checkpoint, run_id, lease, checked_kind, trigger, text, created_at, fmt
        )
        return version

    async def latest_raw(self, run_id: str) -> list[RawCheckpoint]:
        _rows.check_run_id(run_id)
        rows: list[RawCheckpoint] = await self._s._call(self._ops.latest_raw, run_id)
        return rows

    async def delete(self, run_id: str) -> None:
        _rows.check_run_id(run_id)
        await self._s._call(self._ops.delete, run_id)

    async def prune(self, run_id: str, before_version: int) -> int:
        _rows.check_run_id(run_id)
        _rows.check_ints("CheckpointStore.prune", before_version=before_version)
        deleted: int = await self._s._call(self._ops.prune, run_id, before_version)
        return deleted


__all__ = ["SqlCheckpointStore", "SqlEventLog", "SqlOps"]
