"""Checkpoints that refer to the log instead of copying it (ADR 0011).

A run's conversation is almost all items the session log already holds: the
history it was seeded with and the items each step appended. A reference
checkpoint (format version 3) stores those as sequence ranges and spans and
copies only what the log does not hold (an item built by the caller, never
appended)::

    full:  {"format": "checkpoint.ref/2", "session_id": S,
            "checkpoint": {...to_dict(), but "conversation": SEGMENTS}}
    delta: {"format": "checkpoint.refdelta/2", "base_version": N - 1,
            "set": {changed top-level keys, always version},
            "conversation": {"keep": K, "append": SEGMENTS}}

``SEGMENTS`` is a list of inline item dicts, of ranges ``[first, last]`` (the
items of events ``first`` to ``last`` of session ``S``, every one of them a
conversation item) and of spans ``[first, last, count]`` (the ``count``
conversation items among events ``first`` to ``last``, every one of them:
``first`` and ``last`` are items, the events between that are not, a run's
``checkpoint.seeded`` and the like, are skipped). A session's log interleaves
a few such events with every turn's items, so a window of ``n`` turns would
take about ``2n`` ranges; a span takes one. An item is written as a reference
only when it came from that log at its ``seq`` (its ``_log`` slot names the
session): the reference then reads back as exactly the same item. The writer
folds entries into a span only where it knows the log's item events (a
worker's history window), and into ranges otherwise. A delta keeps the base's
first ``K`` entries (one per item) and appends its own, as
``checkpoint.delta/1`` does. Materializing reads the referenced events in one
range read and fails closed (``CheckpointCorruption``) on a reference the log
does not answer, or a span where the log holds another count of items.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..errors import CheckpointCorruption
from ..model import ConversationItem
from ..model.checkpoint import OMITTED_WHEN_EMPTY
from ..stores.events import MAX_INT, ItemRow, Store
from .session import decode_rows

#: The reference formats (format version 3): a full snapshot and the deltas of its chain.
SPAN_FORMAT = "checkpoint.ref/2"
SPAN_DELTA_FORMAT = "checkpoint.refdelta/2"
#: The most items one reference range may stand for (a window never holds more).
MAX_RANGE_ITEMS = 1_000_000

#: One conversation entry: the sequence of a logged item, or an inline item dict.
Entry = int | dict[str, Any]


def entries_of(conversation: Sequence[ConversationItem], session_id: str) -> list[Entry]:
    """One entry per item: its sequence when it is the log's own item, else its dict."""
    return [
        item.seq if item._log == session_id and item.seq is not None else item.to_dict()
        for item in conversation
    ]


def _at(items: Sequence[int], sequence: int) -> int:
    """The index of ``sequence`` in the sorted ``items`` (-1: not there)."""
    i = bisect_left(items, sequence)
    return i if i < len(items) and items[i] == sequence else -1


def to_segments(
    entries: Sequence[Entry], prefix: Sequence[Any] = (), items: Sequence[int] | None = None
) -> list[Any]:
    """Entries with runs of consecutive sequences folded into ``[first, last]`` (after the
    segments ``prefix`` folded earlier entries into: the same as folding them all).

    ``items``: the session's conversation-item sequences, sorted, complete over the
    entries' range: a run of entries that are consecutive among them folds into a span
    ``[first, last, count]``; without, only runs of consecutive events fold.
    """
    known: Sequence[int] = items if items is not None else ()
    out: list[Any] = list(prefix)
    first = last = -2  # the open run [first, last] of `count` items; none while last == -2
    count = 0
    at = -1  # the index of `last` in `known` (-1: not there)
    if out and type(out[-1]) is list:
        reopened = out.pop()  # the next entry may continue it
        first, last = reopened[0], reopened[1]
        count = reopened[2] if len(reopened) == 3 else last - first + 1
        at = _at(known, last)
    n = len(entries)
    head = entries[0] if n > 1 else None
    if isinstance(head, int) and (start := _at(known, head)) >= 0:
        if known[start : start + n] == list(entries):  # all consecutive items (one C compare)
            if last != -2 and not (at == start - 1 or head == last + 1):
                out.append([first, last] if count == last - first + 1 else [first, last, count])
                last = -2
            if last == -2:
                first, count = head, 0
            last, count, at = known[start + n - 1], count + n, start + n - 1
            entries = ()
    for entry in entries:
        if type(entry) is int:
            if last != -2:
                follows = 0 <= at < len(known) - 1 and known[at + 1] == entry
                if follows or entry == last + 1:
                    last, count = entry, count + 1
                    at = at + 1 if follows else _at(known, entry)
                    continue
                out.append([first, last] if count == last - first + 1 else [first, last, count])
            first = last = entry
            count, at = 1, _at(known, entry)
        else:
            if last != -2:
                out.append([first, last] if count == last - first + 1 else [first, last, count])
                first = last = -2
            out.append(entry)
    if last != -2:
        out.append([first, last] if count == last - first + 1 else [first, last, count])
    return out


def _corrupt(run_id: str, version: int | None, reason: str) -> CheckpointCorruption:
    return CheckpointCorruption(run_id, version, f"checkpoint references: {reason}")


def from_segments(
    run_id: str, version: int, segments: object, spans: dict[tuple[int, int], list[int]] | None = None
) -> list[Entry]:
    """The entries ``segments`` stand for; ``CheckpointCorruption`` when they are malformed.
    ``spans``: the item sequences of each span ``[first, last, count]`` (``read_spans``);
    ``None``: segments that are not spans."""
    if not isinstance(segments, list):
        raise _corrupt(run_id, version, "conversation is not a list of segments")
    out: list[Entry] = []
    for segment in segments:
        if isinstance(segment, dict):
            out.append(segment)
            continue
        if spans is not None and _is_span(segment):
            found = spans.get((segment[0], segment[1]))
            if found is None or len(found) != segment[2]:
                raise _corrupt(run_id, version, f"span {segment!r} was not read")
            out.extend(found)
            continue
        if (
            not isinstance(segment, list)
            or len(segment) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in segment)
            or not 1 <= segment[0] <= segment[1] <= MAX_INT
            or segment[1] - segment[0] >= MAX_RANGE_ITEMS
        ):
            raise _corrupt(run_id, version, f"bad segment {segment!r}")
        out.extend(range(segment[0], segment[1] + 1))
    return out


def _is_span(segment: object) -> bool:
    """A well-formed ``[first, last, count]``."""
    return (
        isinstance(segment, list)
        and len(segment) == 3
        and all(isinstance(n, int) and not isinstance(n, bool) for n in segment)
        and 1 <= segment[0] < segment[1] <= MAX_INT
        and 2 <= segment[2] <= min(segment[1] - segment[0], MAX_RANGE_ITEMS)
    )


def _chain_segments(rows: Sequence[Any]) -> list[tuple[int, list[Any]]]:
    """Every row's segments: a full snapshot's conversation, each delta's ``append``."""
    out: list[tuple[int, list[Any]]] = []
    for i, row in enumerate(rows):
        payload = row["payload"]
        if i == 0:
            data = payload.get("checkpoint")
            segments = data.get("conversation") if isinstance(data, dict) else None
        else:
            conv = payload.get("conversation")
            segments = conv.get("append") if isinstance(conv, dict) else None
        if isinstance(segments, list):
            out.append((row["version"], segments))
    return out


class SpanRead(NamedTuple):
    """A chain's spans expanded, and the item rows read for them (``after < seq <= through``)."""

    spans: dict[tuple[int, int], list[int]]
    rows: list[ItemRow]
    after: int
    through: int


async def read_spans(store: Store, run_id: str, session_id: str, rows: Sequence[Any]) -> SpanRead:
    """The item sequences of every span of a reference chain, from one range read;
    ``CheckpointCorruption`` when the log holds another count of items in one."""
    spans = [(version, s) for version, segments in _chain_segments(rows) for s in segments if _is_span(s)]
    if not spans:
        return SpanRead({}, [], 0, 0)
    lo, hi = min(s[0] for _, s in spans), max(s[1] for _, s in spans)
    found = await store.events.read_items(session_id, lo - 1, before=hi + 1)
    seqs = [row.sequence for row in found]
    out: dict[tuple[int, int], list[int]] = {}
    for version, (first, last, count) in spans:
        inside = seqs[bisect_left(seqs, first) : bisect_right(seqs, last)]
        if len(inside) != count or inside[0] != first or inside[-1] != last:
            raise _corrupt(
                run_id,
                version,
                f"span {[first, last, count]!r}: session {session_id!r} holds {len(inside)} items there",
            )
        out[(first, last)] = inside
    return SpanRead(out, found, lo - 1, hi)


def changed_fields(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A delta's ``set``: the fields of checkpoint dict ``new`` that differ from ``base``
    (conversation aside), a field ``new`` leaves out when empty set to ``[]``, and its version."""
    changed = {k: v for k, v in new.items() if k != "conversation" and base.get(k) != v}
    for key in OMITTED_WHEN_EMPTY:
        if key in base and key not in new:
            changed[key] = []
    changed["version"] = new["version"]
    return changed


def with_changes(base: dict[str, Any], changes: dict[str, Any], conversation: list[Any]) -> dict[str, Any]:
    """``base`` with a delta's ``set`` applied and ``conversation``; an emptied field left out."""
    out = {**base, **changes}
    out["conversation"] = conversation
    for key in OMITTED_WHEN_EMPTY:
        if out.get(key) == []:
            del out[key]
    return out


def diff_entries(
    base: dict[str, Any],
    new: dict[str, Any],
    new_entries: list[Entry],
    items: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The reference delta payload turning ``base`` (entries in its conversation) into
    ``new`` (a checkpoint dict without conversation) with ``new_entries`` (``items``: see
    ``to_segments``)."""
    old: list[Entry] = base["conversation"]
    if new_entries[: len(old)] == old:  # the usual step: the old entries and more (one C compare)
        keep = len(old)
    else:
        keep = 0
        for a, b in zip(old, new_entries, strict=False):
            if a != b or type(a) is not type(b):
                break
            keep += 1
    return {
        "format": SPAN_DELTA_FORMAT,
        "base_version": base["version"],
        "set": changed_fields(base, new),
        "conversation": {"keep": keep, "append": to_segments(new_entries[keep:], items=items)},
    }


def apply_ref_delta(
    run_id: str,
    version: int,
    base: dict[str, Any],
    delta: dict[str, Any],
    spans: dict[tuple[int, int], list[int]] | None = None,
) -> dict[str, Any]:
    if delta.get("base_version") != base.get("version"):
        raise _corrupt(
            run_id, version, f"delta base {delta.get('base_version')!r} is not {base.get('version')!r}"
        )
    changes, conv = delta.get("set"), delta.get("conversation")
    if not isinstance(changes, dict) or not isinstance(conv, dict):
        raise _corrupt(run_id, version, "delta lacks its 'set' or 'conversation' object")
    keep = conv.get("keep")
    old: list[Entry] = base["conversation"]
    if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= len(old):
        raise _corrupt(run_id, version, f"delta keeps {keep!r} of {len(old)} conversation items")
    return with_changes(base, changes, old[:keep] + from_segments(run_id, version, conv.get("append"), spans))


async def resolve(
    store: Store,
    run_id: str,
    version: int,
    session_id: str,
    entries: list[Entry],
    read: SpanRead | None = None,
) -> list[dict[str, Any] | ConversationItem]:
    """The entries with every reference replaced by its item, read in one range read (none
    when ``read``, the rows the chain's spans were read from, covers them)."""
    wanted = sorted({e for e in entries if isinstance(e, int)})
    if not wanted:
        return [e for e in entries if isinstance(e, dict)]
    if read is not None and read.after < wanted[0] and wanted[-1] <= read.through:
        rows = read.rows
    else:
        rows = await store.events.read_items(session_id, wanted[0] - 1, before=wanted[-1] + 1)
    want = set(wanted)
    found = [row for row in rows if row.sequence in want]
    if len(found) != len(want):
        missing = sorted(want - {row.sequence for row in found})
        raise _corrupt(
            run_id,
            version,
            f"session {session_id!r} holds no conversation item at sequence(s) {missing[:5]}",
        )
    by_seq = {item.seq: item for item in decode_rows(session_id, found)}
    return [by_seq[e] if isinstance(e, int) else e for e in entries]


__all__ = [
    "MAX_RANGE_ITEMS",
    "SPAN_DELTA_FORMAT",
    "SPAN_FORMAT",
    "Entry",
    "apply_ref_delta",
    "diff_entries",
    "entries_of",
    "from_segments",
    "read_spans",
    "SpanRead",
    "resolve",
    "to_segments",
]
