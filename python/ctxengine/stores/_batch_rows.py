"""Rows read and written in batches (ADR 0011): the item rows of the history reader
(columns checked, payloads left for the native decoder), batched appends, token counts.

What every adapter shares, like ``_rows``: they raise ``StoreCorruption``
naming the row, never skip one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import ModelValidationError, StoreCorruption
from ._rows import (
    Row,
    check_session,
    decode_event,
    event_row,
    payload_text,
    repeat_of,
)
from .events import (
    FORMAT_VERSION,
    MAX_VISIBILITY_CLASSES,
    VISIBILITY_CLASSES,
    Event,
    ItemRow,
    NewEvent,
    Visibility,
    check_identifier,
    check_int,
)

ITEM_TYPE = "conversation.item.appended"
#: The column of an adapter's item row after the count: the session's last sequence at the read.
TAIL = 12


_fromiso = datetime.fromisoformat


def item_rows(session_id: str, rows: Iterable[Row]) -> list[ItemRow]:
    """The item rows among ``rows`` (stored columns in ``EVENT_COLUMNS`` order, then the token
    count), checked but with their payload text undecoded (ADR 0011). A row of an unknown
    type or a newer format fails closed (``decode_event``); other known types are skipped."""
    out: list[ItemRow] = []
    visibilities = VISIBILITY_CLASSES
    if len(visibilities) >= MAX_VISIBILITY_CLASSES:
        visibilities.clear()
    for row in rows:
        seq, event_type, version = row[1], row[2], row[10]
        if event_type != ITEM_TYPE or type(version) is not int or not 1 <= version <= FORMAT_VERSION:
            decode_event(row[:11])  # an anomaly raises; another known type is passed over
            continue
        key = (row[7], row[8])
        visibility = visibilities.get(key)
        count = row[11] if len(row) > 11 else None
        ok = (
            len(row) in (11, 12, 13)
            and row[0] == session_id
            and type(seq) is int
            and seq >= 1
            and type(row[3]) is str
            and type(row[4]) is str
            and row[4] != ""
            and (row[5] is None or type(row[5]) is str)
            and type(row[6]) is str
            and row[6] != ""
            and (count is None or (type(count) is int and count >= 0))
        )
        if ok and visibility is None:
            try:
                visibility = visibilities[key] = Visibility(row[7], row[8])
            except ModelValidationError:
                ok = False
        if ok:
            stamp = row[9]
            try:
                # As decode_event reads it (an aware timestamp), without converting it.
                parsed = _fromiso(stamp) if type(stamp) is str else stamp
                ok = isinstance(parsed, datetime) and parsed.utcoffset() is not None
            except ValueError:
                ok = False
        if not ok or visibility is None:
            decode_event(row[:11])  # names what is wrong with the columns it knows
            where = seq if type(seq) is int else None
            raise StoreCorruption(str(row[0]), where, f"bad token count {count!r}")
        out.append(ItemRow(seq, row[3], visibility, count))
    return out


def visibility_of(session_id: str, scope: object, ident: object) -> Visibility:
    """A stored visibility class, or ``StoreCorruption`` naming the session."""
    try:
        return Visibility(scope, ident)  # type: ignore[arg-type]
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
    for sequence, count in counts:
        out.append(
            (check_int(where, "sequence", sequence, minimum=1), check_int(where, "count", count, minimum=0))
        )
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
    return news, [payload_text(new.payload) for new in news]


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
    "plan_batch",
    "visibility_of",
]
