"""Checkpoints that refer to the log instead of copying it (format 2, ADR 0011).

A run's conversation is almost all items the session log already holds: the
history it was seeded with and the items each step appended. A reference
checkpoint stores those as sequence ranges and copies only what the log does
not hold (an item built by the caller, never appended)::

    full:  {"format": "checkpoint.ref/1", "session_id": S,
            "checkpoint": {...to_dict(), but "conversation": SEGMENTS}}
    delta: {"format": "checkpoint.refdelta/1", "base_version": N - 1,
            "set": {changed top-level keys, always version},
            "conversation": {"keep": K, "append": SEGMENTS}}

``SEGMENTS`` is a list of ``[first, last]`` (the items of events ``first``
to ``last`` of session ``S``, every one of them a conversation item) and of
inline item dicts. An item is written as a reference only when it came from
that log at its ``seq`` (its ``_log`` slot names the session): the reference
then reads back as exactly the same item. A delta keeps the base's first
``K`` entries (one per item) and appends its own, as ``checkpoint.delta/1``
does. Materializing reads the referenced events in one range read and fails
closed (``CheckpointCorruption``) on a reference the log does not answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import CheckpointCorruption
from ..model import ConversationItem
from ..model.checkpoint import OMITTED_WHEN_EMPTY
from ..stores.events import MAX_INT, Store
from .session import decode_rows

REF_FORMAT = "checkpoint.ref/1"
REF_DELTA_FORMAT = "checkpoint.refdelta/1"
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


def to_segments(entries: Sequence[Entry], prefix: Sequence[Any] = ()) -> list[Any]:
    """Entries with runs of consecutive sequences folded into ``[first, last]`` (after the
    segments ``prefix`` folded earlier entries into: the same as folding them all)."""
    out: list[Any] = list(prefix)
    first = last = -2  # the open run [first, last]; none while last == -2
    if out and type(out[-1]) is list:
        first, last = out.pop()  # reopened: the next entry may continue it
    for entry in entries:
        if type(entry) is int:
            if entry == last + 1:
                last = entry
                continue
            if last != -2:
                out.append([first, last])
            first = last = entry
        else:
            if last != -2:
                out.append([first, last])
                first = last = -2
            out.append(entry)
    if last != -2:
        out.append([first, last])
    return out


def _corrupt(run_id: str, version: int | None, reason: str) -> CheckpointCorruption:
    return CheckpointCorruption(run_id, version, f"checkpoint references: {reason}")


def from_segments(run_id: str, version: int, segments: object) -> list[Entry]:
    """The entries ``segments`` stand for; ``CheckpointCorruption`` when they are malformed."""
    if not isinstance(segments, list):
        raise _corrupt(run_id, version, "conversation is not a list of segments")
    out: list[Entry] = []
    for segment in segments:
        if isinstance(segment, dict):
            out.append(segment)
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


def diff_entries(base: dict[str, Any], new: dict[str, Any], new_entries: list[Entry]) -> dict[str, Any]:
    """The ``checkpoint.refdelta/1`` payload turning ``base`` (entries in its conversation)
    into ``new`` (a checkpoint dict without conversation) with ``new_entries``."""
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
        "format": REF_DELTA_FORMAT,
        "base_version": base["version"],
        "set": changed_fields(base, new),
        "conversation": {"keep": keep, "append": to_segments(new_entries[keep:])},
    }


def apply_ref_delta(run_id: str, version: int, base: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
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
    return with_changes(base, changes, old[:keep] + from_segments(run_id, version, conv.get("append")))


async def resolve(
    store: Store, run_id: str, version: int, session_id: str, entries: list[Entry]
) -> list[dict[str, Any] | ConversationItem]:
    """The entries with every reference replaced by its item, read in one range read."""
    wanted = sorted({e for e in entries if isinstance(e, int)})
    if not wanted:
        return [e for e in entries if isinstance(e, dict)]
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
    "REF_DELTA_FORMAT",
    "REF_FORMAT",
    "Entry",
    "apply_ref_delta",
    "diff_entries",
    "entries_of",
    "from_segments",
    "resolve",
    "to_segments",
]
