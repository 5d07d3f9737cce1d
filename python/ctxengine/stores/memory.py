"""``MemoryStore``: the in-process store for tests, demos and single-run tools.

It keeps the same stored-row layout as the durable adapters (canonical JSON
text, decoded on every read) so it fails, and succeeds, exactly where they do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from ..core.slices import batches, finish_async
from ..errors import ModelValidationError, StoreError
from ..model import Principal
from ..model.clock import Clock, SystemClock
from . import _batch_rows, _rows
from ._rows import Row
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
from .formats import WritePolicy
from .migrations import COMPAT_LEVEL, MigrationReport, latest_revision

_Undo = Callable[[], None]
_TXN: _rows.TransactionSlot[list[_Undo]] = _rows.TransactionSlot("ctxengine.stores.memory.transaction")


class MemoryStore:
    """Events and checkpoints in dicts; ``transaction()`` rolls back through an undo log."""

    def __init__(
        self, *, clock: Clock | None = None, write_policy: WritePolicy | None = None, migrate: bool = True
    ) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.write_policy = write_policy if write_policy is not None else WritePolicy.from_env()
        self._events: dict[str, list[tuple[Any, ...]]] = {}
        self._keys: dict[tuple[str, str], int] = {}
        self._leases: dict[str, tuple[str, int]] = {}
        self._checkpoints: dict[str, list[tuple[Any, ...]]] = {}
        self._counts: dict[tuple[str, int, str], int] = {}
        # Serializes a transaction against everyone outside it: without it a
        # concurrent task could read (or append after) uncommitted events.
        self._lock = asyncio.Lock()
        self._closed = False
        self.events = MemoryEventLog(self)
        self.checkpoints = MemoryCheckpointStore(self)

    async def open(self) -> MemoryStore:
        return self

    async def migrate(self, *, dry_run: bool = False) -> MigrationReport:
        """A memory store has no schema to migrate; reported for symmetry with the SQL stores."""
        revision = latest_revision()
        return MigrationReport("MemoryStore", COMPAT_LEVEL, revision, revision, (), (), dry_run)

    async def close(self) -> None:
        if _TXN.get(self) is not None:
            raise StoreError("MemoryStore: close() inside its own transaction")
        self._closed = True

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        outer = _TXN.get(self)
        if outer is not None:
            # Nested: a savepoint. Its own undo steps run if it fails, and
            # join the outer transaction's if it succeeds.
            undo: list[_Undo] = []
            with _TXN.bind(self, undo):
                try:
                    yield
                except BaseException:
                    _undo_all(undo)
                    raise
            outer.extend(undo)
            return
        async with self._lock:
            undo = []
            with _TXN.bind(self, undo):
                try:
                    yield
                except BaseException:
                    _undo_all(undo)
                    raise

    @asynccontextmanager
    async def _op(self) -> AsyncIterator[list[_Undo] | None]:
        """Run one operation: inside the caller's transaction, or alone under the lock."""
        if self._closed:
            raise StoreError("MemoryStore is closed")
        undo = _TXN.get(self)
        if undo is not None:
            yield undo
        else:
            async with self._lock:
                yield None

    # -- test hook -----------------------------------------------------------

    def _inject_row(self, row: tuple[Any, ...]) -> None:
        """Store a raw event row as is (tests use it to plant corrupt rows)."""
        self._events.setdefault(str(row[0]), []).append(tuple(row))


def _stop(before: int | None) -> int | None:
    """The end of the slice of a session's rows before sequence ``before``."""
    return None if before is None else max(before - 1, 0)


class MemoryEventLog:
    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    async def append(self, event: NewEvent) -> Event:
        if not isinstance(event, NewEvent):
            raise ModelValidationError("EventLog.append", "event", f"expected NewEvent, got {type(event)}")
        self._s.write_policy.check(event.type, event.format_version)
        text = _rows.event_text(event)
        s = self._s
        async with s._op() as undo:
            rows = s._events.get(event.session_id, [])
            existing = s._keys.get((event.session_id, event.derivation_key))
            if existing is not None:
                return _rows.repeat_of(rows[existing - 1], event, text)
            sequence = len(rows) + 1
            created_at = _rows.utc_now(s._clock)
            decoded = replace(_rows.probe_event(event, text, created_at), sequence=sequence)
            row = _rows.event_row(event, text, sequence, created_at)
            s._events.setdefault(event.session_id, []).append(row)
            key = (event.session_id, event.derivation_key)
            s._keys[key] = sequence
            if undo is not None:

                def forget() -> None:
                    s._events[event.session_id].pop()
                    del s._keys[key]

                undo.append(forget)
            return decoded

    async def append_all(self, events: Sequence[NewEvent]) -> tuple[list[Event], int]:
        news, texts = _batch_rows.check_batch(events, self._s.write_policy)
        s = self._s
        out: list[Event] = []
        written = 0
        created_at = _rows.utc_now(s._clock)
        # Every row is probed before any is written: a batch is refused whole.
        probes = await _batch_rows.probe_batch(news, texts, created_at)
        async with s._op() as undo:
            for event, text, probe in zip(news, texts, probes, strict=True):
                rows = s._events.get(event.session_id, [])
                existing = s._keys.get((event.session_id, event.derivation_key))
                if existing is not None:
                    out.append(_rows.repeat_of(rows[existing - 1], event, text))
                    continue
                sequence = len(rows) + 1
                row = _rows.event_row(event, text, sequence, created_at)
                s._events.setdefault(event.session_id, []).append(row)
                key = (event.session_id, event.derivation_key)
                s._keys[key] = sequence
                if undo is not None:

                    def forget(session: str = event.session_id, key: tuple[str, str] = key) -> None:
                        s._events[session].pop()
                        del s._keys[key]

                    undo.append(forget)
                out.append(replace(probe, sequence=sequence))
                written += 1
        return out, written

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
        async with self._s._op():
            # (Row ``i`` holds sequence ``i + 1``.)
            rows = self._s._events.get(session_id, [])[max(after, 0) : _stop(before)]

        def pick(part: Sequence[Row]) -> list[Row]:
            return [row for row in part if _rows.must_decode(row[2], row[10], wanted)]

        # Picked and decoded in slices: a long read gives the event loop back between them.
        picked = await finish_async(batches(pick, rows))
        return await finish_async(_rows.decode_events_steps(picked, wanted))

    async def read_covering(
        self, session_id: str, after: int, types: Iterable[str]
    ) -> tuple[list[Event], int]:
        """As ``SqlEventLog.read_covering``."""
        _rows.check_session("EventLog.read_covering", session_id)
        wanted = _rows.type_filter(types)
        if wanted is None:
            raise ModelValidationError("EventLog.read_covering", "types", "expected event types")
        _rows.check_ints("EventLog.read_covering", after=after)
        async with self._s._op():
            rows = list(self._s._events.get(session_id, ()))
        through = max(after, len(rows))
        picked = [row for row in rows[max(after, 0) :] if _rows.must_decode(row[2], row[10], wanted)]
        return await finish_async(_rows.decode_events_steps(picked, wanted)), through

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
        async with self._s._op():
            rows = list(self._s._events.get(session_id, ()))
        for row in reversed(rows[: max(before_sequence - 1, 0)]):
            if _rows.must_decode(row[2], row[10], (event_type,)):
                event = _rows.decode_event(row)
                if event.type == event_type and event.visibility.allows(principal):
                    return event
        return None

    async def read_items(
        self, session_id: str, after: int = 0, *, before: int | None = None, counter: str | None = None
    ) -> list[ItemRow]:
        _rows.check_session("EventLog.read_items", session_id)
        _rows.check_ints("EventLog.read_items", after=after, before=before)
        if counter is not None:
            check_identifier("EventLog.read_items", "counter", counter)
        async with self._s._op():
            rows = self._s._events.get(session_id, [])[max(after, 0) : _stop(before)]
            counts = self._s._counts
            wanted = (_batch_rows.ITEM_TYPE,)

            def pick(part: Sequence[Row]) -> list[Row]:
                columns = _batch_rows.item_columns
                return [columns(row) for row in part if _rows.must_decode(row[2], row[10], wanted)]

            # In slices (the lock held: no other operation changes the rows or counts meanwhile).
            picked = await finish_async(batches(pick, rows))
            found = None
            if counter is not None:
                found = {row[0]: counts.get((session_id, row[0], counter)) for row in picked}
        return await _batch_rows.item_rows_async(session_id, picked, found)

    async def put_counts(self, session_id: str, counter: str, counts: Iterable[tuple[int, int]]) -> None:
        checked = _batch_rows.check_counts(session_id, counter, counts)
        s = self._s
        async with s._op() as undo:
            added = []
            for sequence, count in checked:
                key = (session_id, sequence, counter)
                if key not in s._counts:
                    s._counts[key] = count
                    added.append(key)
            if undo is not None:

                def forget() -> None:
                    for key in added:
                        s._counts.pop(key, None)

                undo.append(forget)

    async def visibilities(
        self, session_id: str, event_type: str, after: int, through: int
    ) -> frozenset[Visibility]:
        _rows.check_session("EventLog.visibilities", session_id)
        check_event_type(event_type, "EventLog.visibilities")
        _rows.check_ints("EventLog.visibilities", after=after, through=through)
        async with self._s._op():
            rows = list(self._s._events.get(session_id, ()))
        pairs = {(r[7], r[8]) for r in rows[max(after, 0) : max(through, 0)] if r[2] == event_type}
        return frozenset(_batch_rows.visibility_of(session_id, scope, ident) for scope, ident in pairs)


class MemoryCheckpointStore:
    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    async def claim(self, run_id: str, owner: str) -> Lease:
        _rows.check_claim(run_id, owner)
        s = self._s
        async with s._op() as undo:
            previous = s._leases.get(run_id)
            lease = Lease(owner, (previous[1] if previous else 0) + 1, run_id)
            s._leases[run_id] = (lease.owner, lease.epoch)
            if undo is not None:
                undo.append(lambda: _restore(s._leases, run_id, previous))
            return lease

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
        s = self._s
        async with s._op() as undo:
            _rows.check_lease(run_id, lease, s._leases.get(run_id))
            rows = s._checkpoints.setdefault(run_id, [])
            if checked_kind == "delta" and not any(r[1] == "full" for r in rows):
                raise _rows.no_base_for_delta(run_id)
            version = rows[-1][0] + 1 if rows else 1
            rows.append((version, checked_kind, trigger, text, _rows.utc_now(s._clock), fmt))
            if undo is not None:
                undo.append(lambda: _drop_last(rows))
            return version

    async def latest_raw(self, run_id: str) -> list[RawCheckpoint]:
        _rows.check_run_id(run_id)
        async with self._s._op():
            rows = list(self._s._checkpoints.get(run_id, ()))
        fulls = [i for i, r in enumerate(rows) if r[1] == "full"]
        if not fulls:
            return []
        return [_rows.decode_checkpoint(run_id, r) for r in rows[fulls[-1] :]]

    async def delete(self, run_id: str) -> None:
        _rows.check_run_id(run_id)
        s = self._s
        async with s._op() as undo:
            lease = s._leases.get(run_id)
            if lease is not None:
                # The epoch outlives the rows: every lease claimed so far stays fenced.
                s._leases[run_id] = (_rows.FENCED_OWNER, lease[1] + 1)
            rows = s._checkpoints.pop(run_id, None)
            if undo is not None:

                def put_back() -> None:
                    _restore(s._leases, run_id, lease)
                    _restore(s._checkpoints, run_id, rows)

                undo.append(put_back)

    async def prune(self, run_id: str, before_version: int) -> int:
        return await _prune(self._s, run_id, before_version)


async def _prune(store: MemoryStore, run_id: str, before_version: int) -> int:
    _rows.check_run_id(run_id)
    _rows.check_ints("CheckpointStore.prune", before_version=before_version)
    async with store._op() as undo:
        rows = store._checkpoints.get(run_id, [])
        kept = [r for r in rows if r[0] >= before_version]
        dropped = len(rows) - len(kept)
        if dropped:
            old = list(rows)
            rows[:] = kept
            if undo is not None:
                undo.append(lambda: rows.__setitem__(slice(None), old))
        return dropped


def _undo_all(undo: list[_Undo]) -> None:
    for step in reversed(undo):
        step()


def _drop_last(rows: list[tuple[Any, ...]]) -> None:
    rows.pop()


def _restore(table: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


__all__ = ["MemoryCheckpointStore", "MemoryEventLog", "MemoryStore"]
