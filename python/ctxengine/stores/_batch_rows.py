"""Rows read and written in batches (ADR 0011): the item rows of the history reader
(columns checked, payloads left for the native decoder), batched appends, token counts.

What every adapter shares, like ``_rows``: they raise ``StoreCorruption``
naming the row, never skip one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..core.slices import batches, finish_async, off_loop
from ..errors import ModelValidationError, StoreCorruption
from ._rows import (
    LONG_PAYLOAD,
    Row,
    check_session,
    event_row,
    event_text,
    probe_event,
    repeat_of,
    visibility_class,
)
from .events import (
    FORMAT_VERSION,
    MAX_INT,
    MAX_VISIBILITY_CLASSES,
    VISIBILITY_CLASSES,
    Event,
    ItemRow,
    NewEvent,
    Visibility,
    check_identifier,
    check_int,
)
from .formats import row_version

ITEM_TYPE = "conversation.item.appended"
#: The columns of an adapter's item row: what a seed uses of an item event (ADR 0011). An SQL
#: adapter adds (``TAIL``) the session's last sequence at the read.
ITEM_COLUMNS = ("sequence", "type", "payload", "visibility_scope", "visibility_id", "schema_version")
TAIL = len(ITEM_COLUMNS)


#: The stored counts of one counter in a sequence range, as an adapter reads them (one range of
#: their primary key, in the same trip as the rows: a lookup per row cost more than the read).
def counts_sql(mark: str, before: int | None) -> str:
    """The statement (``mark``: the driver's placeholder) taking ``counts_params``."""
    upper = f" AND sequence < {mark}" if before is not None else ""
    return (
        f"SELECT sequence, count FROM ctxengine_token_counts WHERE session_id = {mark} AND counter = {mark}"
        f" AND sequence > {mark}{upper}"
    )


def counts_params(session_id: str, counter: str, after: int, before: int | None) -> list[Any]:
    return [session_id, counter, after, *([before] if before is not None else [])]


def item_columns(row: Row) -> Row:
    """The ``ITEM_COLUMNS`` of a stored row in ``EVENT_COLUMNS`` order."""
    return row[1], row[2], row[3], row[7], row[8], row[10]


def item_rows(
    session_id: str, rows: Iterable[Row], counts: Mapping[object, object] | None = None
) -> list[ItemRow]:
    """The item rows among ``rows`` (``ITEM_COLUMNS``, optionally the tail), checked but with
    their payload text undecoded (ADR 0011), each with its count from ``counts`` (by sequence;
    ``None``: none asked for). A row of an unknown type or a newer format fails closed
    (``formats.row_version``); other known types are skipped. The columns a seed does not read
    (keys, actor, timestamp) are not fetched, so not checked here."""
    out: list[ItemRow] = []
    visibilities = VISIBILITY_CLASSES
    if len(visibilities) >= MAX_VISIBILITY_CLASSES:
        visibilities.clear()
    for row in rows:
        if not TAIL <= len(row) <= TAIL + 1:
            raise _bad_row(session_id, row, f"item row has {len(row)} columns")
        seq, event_type, version = row[0], row[1], row[5]
        if event_type != ITEM_TYPE or type(version) is not int or not 1 <= version <= FORMAT_VERSION:
            row_version(session_id, seq if type(seq) is int else None, event_type, version)
            continue  # another known type (an anomaly has raised)
        key = (row[3], row[4])
        visibility = visibilities.get(key)
        count = counts.get(seq) if counts else None
        if visibility is None:
            try:
                visibility = visibilities[key] = Visibility(row[3], row[4])
            except ModelValidationError as exc:
                raise _bad_row(session_id, row, f"bad visibility: {exc}") from None
        if not (
            type(seq) is int
            and seq >= 1
            and type(row[2]) is str
            and (count is None or (type(count) is int and count >= 0))
        ):
            raise _bad_row(session_id, row, count=count)
        out.append(ItemRow(seq, row[2], visibility, count))
    return out


async def probe_batch(news: Sequence[NewEvent], texts: Sequence[str], created_at: Any) -> list[Event]:
    """``probe_event`` of each event, the same events; on a worker thread when the texts
    are long (``LONG_PAYLOAD``, ``core.slices.off_loop``)."""

    def probes() -> list[Event]:
        return [probe_event(new, text, created_at) for new, text in zip(news, texts, strict=True)]

    if sum(map(len, texts)) < LONG_PAYLOAD:
        return probes()
    return await off_loop(probes)


async def item_rows_async(
    session_id: str, rows: Sequence[Row], counts: Mapping[object, object] | None = None
) -> list[ItemRow]:
    """``item_rows``, giving the event loop back between slices of a long read
    (``core.slices``): the same rows, the same error at the same row."""
    return await finish_async(batches(lambda part: item_rows(session_id, part, counts), rows))


def _bad_row(session_id: str, row: Row, reason: str | None = None, count: object = None) -> StoreCorruption:
    """``StoreCorruption`` naming an item row and what is wrong with it (``reason``, or found
    among its columns and its ``count``)."""
    seq = row[0] if row else None
    where = seq if type(seq) is int else None
    if reason is None:
        if where is None or where < 1:
            reason = f"bad sequence {seq!r}"
        elif type(row[2]) is not str:
            reason = f"payload is {type(row[2]).__name__}, not text"
        else:
            reason = f"bad token count {count!r}"
    return StoreCorruption(session_id, where, reason)


def visibility_of(session_id: str, scope: object, ident: object) -> Visibility:
    """A stored visibility class, or ``StoreCorruption`` naming the session."""
    try:
        return visibility_class(scope, ident)
    except ModelValidationError as exc:
        raise StoreCorruption(session_id, None, f"bad visibility: {exc}") from None


def check_counts(
    session_id: str, counter: object, counts: Iterable[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Validated ``(sequence, count)`` pairs for ``put_counts``; ``ModelValidationError`` names a bad one."""
    where = "EventLog.put_counts"
    check_session(where, session_id)
    check_identifier(where, "counter", counter)
    out = []
    for pair in counts:
        sequence, count = pair
        # The common case in one test (a seed stores thousands): ints in range, as given.
        if not (
            type(sequence) is int
            and type(count) is int
            and 1 <= sequence <= MAX_INT
            and 0 <= count <= MAX_INT
        ):
            sequence = check_int(where, "sequence", sequence, minimum=1)
            count = check_int(where, "count", count, minimum=0)
        out.append((sequence, count))
    return out


def check_batch(events: object, policy: Any) -> tuple[list[NewEvent], list[str]]:
    """Validate an ``append_all`` batch before touching the store: ``NewEvent``s of one
    session, each allowed by the write policy; returns them and their payload texts."""
    if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
        raise ModelValidationError("EventLog.append_all", "events", "expected a sequence of NewEvent")
    news = list(events)
    for i, new in enumerate(news):
        where = ("EventLog.append_all", f"events[{i}]")
        if not isinstance(new, NewEvent):
            raise ModelValidationError(*where, f"expected NewEvent, got {type(new)}")
        if new.session_id != news[0].session_id:
            raise ModelValidationError(*where, "a batch holds one session's events")
        policy.check(new.type, new.format_version)
    return news, [event_text(new) for new in news]


def batch_events(
    results: Sequence[tuple[Row, bool]],
    news: Sequence[NewEvent],
    texts: Sequence[str],
    probes: Sequence[Event],
) -> tuple[list[Event], int]:
    """The events an adapter's batch append stored (or found), and how many it wrote."""
    out: list[Event] = []
    written = 0
    for (row, inserted), new, text, probe in zip(results, news, texts, probes, strict=True):
        if inserted:
            written += 1
            out.append(replace(probe, sequence=row[1]))
        else:
            out.append(repeat_of(row, new, text))
    return out, written


def plan_batch(
    news: Sequence[NewEvent], texts: Sequence[str], stored: Mapping[str, Row], last: int, created_at: Any
) -> tuple[list[tuple[Row, bool]], list[tuple[Any, ...]]]:
    """Which events of a batch repeat a stored one (by derivation key) and the rows to insert
    for the rest, numbered from ``last + 1``; a key repeated inside the batch repeats its first."""
    results: list[tuple[Row, bool]] = []
    inserts: list[tuple[Any, ...]] = []
    known = dict(stored)
    for new, text in zip(news, texts, strict=True):
        hit = known.get(new.derivation_key)
        if hit is not None:
            results.append((hit, False))
            continue
        last += 1
        row = event_row(new, text, last, created_at)
        known[new.derivation_key] = row
        inserts.append(row)
        results.append((row, True))
    return results, inserts


__all__ = [
    "ITEM_TYPE",
    "batch_events",
    "check_batch",
    "check_counts",
    "item_rows",
    "item_rows_async",
    "plan_batch",
    "probe_batch",
    "visibility_of",
]
