"""The typed checkpoint layer over the raw ``CheckpointStore`` (SPEC section 6).

``write_checkpoint`` is the one writer: it picks a full snapshot or a delta,
stamps the version, and writes under the caller's lease; ``latest_checkpoint``
materializes the newest full snapshot plus the deltas after it.

Full or delta: version 1, every version with ``version % 8 == 1``, and the
triggers in ``FULL_TRIGGERS`` (compaction, suspension, terminal) write a full
snapshot; everything else writes a delta against the previous version, so
a chain is at most 7 deltas long and a read decodes at most 8 rows.

Payloads (``Checkpoint.to_dict()`` is the unit)::

    full:  {"format": "checkpoint.full/1", "checkpoint": {...to_dict()...}}
    delta: {"format": "checkpoint.delta/1", "base_version": N - 1,
            "set": {top-level keys whose value changed, except conversation},
            "conversation": {"keep": K, "append": [items...]}}

A field ``to_dict()`` leaves out when empty (``OMITTED_WHEN_EMPTY``: notes)
is cleared by ``"set": {field: []}``. A delta's conversation is the base's
first ``keep`` items plus ``append``:
a turn that grows appends, a rewrite shares its common prefix. ``set``
always holds ``version``. A chain that does not line up (a missing base,
a version gap, a ``keep`` past the base, an unknown format) is
``StoreCorruption`` naming the run and version, never a guess.

Given the run's ``session_id`` (and a store whose write policy allows format
3), the writer stores the conversation as references into the session log
instead (``checkpoint_refs``: ``checkpoint.ref/2`` and its deltas), so a run's
checkpoints hold sequence ranges and spans, not a copy of the window; without
it (or pinned below format 3 for older readers) it writes the first formats.
A chain changes format only at a full snapshot. With ``prune``, a terminal
version (always a full snapshot) deletes the run's earlier versions in the
same transaction.

What is read (ADR 0009): ``checkpoint.full/1``, ``checkpoint.delta/1`` and the
reference formats, forever. ``checkpoint.ref/1`` and ``checkpoint.refdelta/1``,
which only development builds before 0.2.0 wrote, are refused with
``CheckpointCorruption`` naming the format.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

from ..core.slices import pause
from ..errors import CheckpointCorruption, ModelValidationError, StoreError
from ..model import Checkpoint, ConversationItem, item_from_dict
from ..stores.events import CheckpointKind, Lease, RawCheckpoint, Store, check_trigger
from ..stores.formats import RETIRED_CHECKPOINT_FORMATS, WritePolicy
from . import checkpoint_refs as refs
from .carry import CARRY_RECORDED, Carry, stored_carry

FULL_FORMAT = "checkpoint.full/1"
DELTA_FORMAT = "checkpoint.delta/1"
#: Triggers that always write a full snapshot: compaction, suspension, terminal.
FULL_TRIGGERS: frozenset[str] = frozenset(
    {"compaction", "approval_requested", "final_completion", "final_failure"}
)
#: A full snapshot at least every this many versions (so at most ``FULL_EVERY - 1`` deltas).
FULL_EVERY = 8
#: Triggers that end a run: with ``prune``, its earlier versions are deleted.
TERMINAL_TRIGGERS: frozenset[str] = frozenset({"final_completion", "final_failure"})
#: The format version of the reference formats (``checkpoint.ref/2``).
SPAN_FORMAT_VERSION = 3
#: A reference snapshot's key naming the carry whose summary it stands for (or ``None``).
SUMMARY_CARRY = "summary_carry"


def is_full(version: int, trigger: str) -> bool:
    return version == 1 or version % FULL_EVERY == 1 or trigger in FULL_TRIGGERS


def diff(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The delta payload turning checkpoint dict ``base`` into ``new``."""
    old_conv: list[Any] = base.get("conversation", [])
    new_conv: list[Any] = new["conversation"]
    keep = 0
    for a, b in zip(old_conv, new_conv, strict=False):
        if a != b:
            break
        keep += 1
    return {
        "format": DELTA_FORMAT,
        "base_version": base["version"],
        "set": refs.changed_fields(base, new),
        "conversation": {"keep": keep, "append": new_conv[keep:]},
    }


def _corrupt(run_id: str, version: int | None, reason: str) -> CheckpointCorruption:
    return CheckpointCorruption(run_id, version, f"checkpoint chain: {reason}")


def materialize(run_id: str, rows: list[RawCheckpoint]) -> dict[str, Any] | None:
    """The checkpoint dict the rows (newest full snapshot first) describe; ``None`` for no rows."""
    if not rows:
        return None
    current: dict[str, Any] | None = None
    for row in rows:
        version, payload = row["version"], row["payload"]
        fmt = payload.get("format")
        if current is None:
            if fmt in RETIRED_CHECKPOINT_FORMATS:
                raise _corrupt(
                    run_id,
                    version,
                    f"format {fmt!r} was written only by development builds before ctxengine 0.2.0 "
                    "and is not read: start the run again (a new run seeds from the session log)",
                )
            if row["kind"] != "full" or fmt != FULL_FORMAT or not isinstance(payload.get("checkpoint"), dict):
                raise _corrupt(run_id, version, f"first row is {row['kind']!r}/{fmt!r}, not a full snapshot")
            current = dict(payload["checkpoint"])
        else:
            if row["kind"] != "delta" or fmt != DELTA_FORMAT:
                raise _corrupt(
                    run_id, version, f"expected a delta after the snapshot, got {row['kind']!r}/{fmt!r}"
                )
            current = _apply(run_id, version, current, payload)
        if current.get("version") != version:
            raise _corrupt(run_id, version, f"row holds checkpoint version {current.get('version')!r}")
    return current


def _apply(run_id: str, version: int, base: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    if delta.get("base_version") != base.get("version"):
        raise _corrupt(
            run_id, version, f"delta base {delta.get('base_version')!r} is not {base.get('version')!r}"
        )
    changes, conv = delta.get("set"), delta.get("conversation")
    if not isinstance(changes, dict) or not isinstance(conv, dict):
        raise _corrupt(run_id, version, "delta lacks its 'set' or 'conversation' object")
    keep, append = conv.get("keep"), conv.get("append")
    old: list[Any] = base.get("conversation", [])
    if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= len(old):
        raise _corrupt(run_id, version, f"delta keeps {keep!r} of {len(old)} conversation items")
    if not isinstance(append, list):
        raise _corrupt(run_id, version, "delta 'append' is not a list")
    return refs.with_changes(base, changes, old[:keep] + append)


def decode(run_id: str, data: dict[str, Any] | None) -> Checkpoint | None:
    if data is None:
        return None
    try:
        checkpoint = Checkpoint.from_dict(data)
    except ModelValidationError as exc:
        raise _corrupt(run_id, data.get("version"), f"does not decode: {exc}") from None
    if checkpoint.run_id != run_id:
        raise _corrupt(run_id, checkpoint.version, f"holds run {checkpoint.run_id!r}")
    return checkpoint


def is_ref_chain(rows: list[RawCheckpoint]) -> bool:
    return bool(rows) and rows[0]["payload"].get("format") == refs.SPAN_FORMAT


def materialize_refs(
    run_id: str, rows: list[RawCheckpoint], spans: dict[tuple[int, int], list[int]] | None = None
) -> tuple[dict[str, Any], str]:
    """The checkpoint dict of a reference chain (its conversation: entries) and its session.
    ``spans``: the chain's spans read (``refs.read_spans``)."""
    first = rows[0]
    payload = first["payload"]
    session_id, data = payload.get("session_id"), payload.get("checkpoint")
    if first["kind"] != "full" or not isinstance(session_id, str) or not isinstance(data, dict):
        raise _corrupt(run_id, first["version"], "reference snapshot lacks its session or checkpoint")
    spans = spans or {}
    conversation = refs.from_segments(run_id, first["version"], data.get("conversation"), spans)
    current = {**data, "conversation": conversation}
    for i, row in enumerate(rows):
        version = row["version"]
        if i:
            fmt = row["payload"].get("format")
            if row["kind"] != "delta" or fmt != refs.SPAN_DELTA_FORMAT:
                raise _corrupt(run_id, version, f"expected a reference delta, got {row['kind']!r}/{fmt!r}")
            current = refs.apply_ref_delta(run_id, version, current, row["payload"], spans)
        if current.get("version") != version:
            raise _corrupt(run_id, version, f"row holds checkpoint version {current.get('version')!r}")
    return current, session_id


async def read_refs(
    store: Store, run_id: str, rows: list[RawCheckpoint]
) -> tuple[dict[str, Any], str, refs.SpanRead | None]:
    """``materialize_refs`` with the chain's spans read from its session's log (and what
    was read for them, which ``refs.resolve`` reuses)."""
    session_id = rows[0]["payload"].get("session_id")
    read = None
    if isinstance(session_id, str):
        read = await refs.read_spans(store, run_id, session_id, rows)
    return (*materialize_refs(run_id, rows, read.spans if read is not None else None), read)


def decode_resolved(
    run_id: str, data: dict[str, Any], conversation: list[dict[str, Any] | ConversationItem]
) -> Checkpoint:
    """A checkpoint from a reference chain's dict and its resolved conversation."""
    try:
        fields = {key: value for key, value in data.items() if key != SUMMARY_CARRY}
        shell = Checkpoint.from_dict({**fields, "conversation": []})
        items = tuple(e if not isinstance(e, dict) else item_from_dict(e) for e in conversation)
        checkpoint = replace(shell, conversation=items)
    except ModelValidationError as exc:
        raise _corrupt(run_id, data.get("version"), f"does not decode: {exc}") from None
    if checkpoint.run_id != run_id:
        raise _corrupt(run_id, checkpoint.version, f"holds run {checkpoint.run_id!r}")
    return checkpoint


async def latest_checkpoint(store: Store, run_id: str) -> Checkpoint | None:
    """The run's newest checkpoint, materialized; ``None`` when it has none."""
    return await checkpoint_from_rows(store, run_id, await store.checkpoints.latest_raw(run_id))


async def checkpoint_from_rows(store: Store, run_id: str, rows: list[RawCheckpoint]) -> Checkpoint | None:
    """The checkpoint ``latest_raw`` rows describe (references resolved through ``store``)."""
    if is_ref_chain(rows):
        data, session_id, read = await read_refs(store, run_id, rows)
        version = data["version"]
        resolved = await refs.resolve(store, run_id, version, session_id, data["conversation"], read)
        return decode_resolved(run_id, await _carried_summary(store, run_id, session_id, data), resolved)
    return decode(run_id, materialize(run_id, rows))


_FIELDS = tuple(f.name for f in dataclasses.fields(Checkpoint))


def evolve(checkpoint: Checkpoint, **changes: Any) -> Checkpoint:
    """``replace(checkpoint, **changes)`` without validating again what was validated when
    ``checkpoint`` was made: for the loop's own changes (a stored version, an empty
    conversation), which cannot break what ``Checkpoint`` checks. ``replace`` re-checks the
    whole conversation, item by item, on every change."""
    new = object.__new__(Checkpoint)
    for name in _FIELDS:
        object.__setattr__(new, name, changes[name] if name in changes else getattr(checkpoint, name))
    return new


def shell_dict(checkpoint: Checkpoint, **changes: Any) -> dict[str, Any]:
    """``evolve(checkpoint, **changes).to_dict()`` without converting its conversation."""
    data = evolve(checkpoint, conversation=(), **changes).to_dict()
    del data["conversation"]
    return data


def ref_shell(checkpoint: Checkpoint, carry: Carry | None) -> dict[str, Any]:
    """``shell_dict`` in reference form: a summary that is the seed carry's (its text, spans
    and source) is stored as the carry's sequence under ``SUMMARY_CARRY`` (ADR 0011)."""
    if (
        carry is not None
        and checkpoint.summary_source_event_ids == (carry.sequence,)
        and checkpoint.compacted_summary == carry.summary
        and checkpoint.summary_elided == carry.elided
    ):
        data = shell_dict(checkpoint, compacted_summary=None, summary_elided=())
        data[SUMMARY_CARRY] = carry.sequence
    else:
        data = shell_dict(checkpoint)
        data[SUMMARY_CARRY] = None
    return data


async def _carried_summary(
    store: Store, run_id: str, session_id: str, data: dict[str, Any]
) -> dict[str, Any]:
    """A reference chain's dict with the summary its ``SUMMARY_CARRY`` names read back."""
    sequence = data.get(SUMMARY_CARRY)
    if sequence is None:
        return data
    version = data.get("version")
    if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 1:
        raise _corrupt(run_id, version, f"bad {SUMMARY_CARRY} {sequence!r}")
    found = await store.events.read(session_id, sequence - 1, [CARRY_RECORDED], before=sequence + 1)
    if not found:
        raise _corrupt(run_id, version, f"session {session_id!r} holds no carry at sequence {sequence}")
    carry = stored_carry(found[0])
    elided = [span.to_dict() for span in carry.elided]
    return {**data, "compacted_summary": carry.summary, "summary_elided": elided}


def _writes_refs(store: Store, session_id: str | None) -> bool:
    """References when the run's session is known and every reader knows format 3."""
    policy = getattr(store, "write_policy", None)
    return session_id is not None and (policy or WritePolicy()).writes(SPAN_FORMAT_VERSION)


class RefMemory(Protocol):
    """What a worker keeps of its last reference writes (``window.SessionWindow``)."""

    def full_refs(
        self, session_id: str, conversation: tuple[ConversationItem, ...], items: Sequence[int] | None
    ) -> tuple[list[refs.Entry], list[Any]]: ...

    def ref_base(
        self, run_id: str, rows: list[RawCheckpoint]
    ) -> tuple[dict[str, Any], tuple[ConversationItem, ...]] | None: ...

    def ref_entries(
        self,
        session_id: str,
        base: dict[str, Any],
        known: tuple[ConversationItem, ...],
        conversation: tuple[ConversationItem, ...],
    ) -> list[refs.Entry]: ...

    def ref_wrote(
        self,
        run_id: str,
        row: RawCheckpoint,
        data: dict[str, Any],
        conversation: tuple[ConversationItem, ...],
    ) -> None: ...

    def ref_forget(self, run_id: str) -> None: ...


async def write_checkpoint(
    store: Store,
    run_id: str,
    checkpoint: Checkpoint,
    *,
    trigger: str,
    lease: Lease,
    session_id: str | None = None,
    prune: bool = False,
    rows: list[RawCheckpoint] | None = None,
    joined: bool = False,
    into: list[RawCheckpoint] | None = None,
    carry: Carry | None = None,
    memo: RefMemory | None = None,
    items: Sequence[int] | None = None,
) -> int:
    """Write ``checkpoint`` as the run's next version (full or delta) and return that version.

    The checkpoint's own ``version`` is ignored and replaced by the stored
    one. Runs in a store transaction (joining the caller's), so a stale
    lease (``LeaseLost``) or any failure leaves the store unchanged. With
    ``session_id`` (the run's session) items read from that log are stored
    as references; with ``prune`` a terminal trigger deletes earlier versions.
    ``rows``: the run's ``latest_raw`` rows, when the caller knows them (it just
    read or wrote them; a stale list cannot slip a version in: the store
    refuses the version). ``joined``: the caller holds a store transaction
    (no savepoint of its own). ``into`` receives the run's rows after the
    write, for the caller's next ``rows``. ``carry``: the carry the run was seeded from (a
    reference chain then stores a summary that is still the carry's as its sequence).
    ``memo``: the caller's ``RefMemory`` (a session window, with ``into``): a conversation
    that grew at its end is folded from where the last write left it (the same payload).
    ``items``: the session's conversation-item sequences as the caller read them (sorted,
    complete over its window): a reference chain folds runs of consecutive items into spans.
    """
    if not isinstance(checkpoint, Checkpoint):
        raise ModelValidationError(
            "checkpoint", "checkpoint", f"expected Checkpoint, got {type(checkpoint).__name__}"
        )
    if checkpoint.run_id != run_id:
        raise ModelValidationError(
            "checkpoint", "run_id", f"checkpoint is for {checkpoint.run_id!r}, not {run_id!r}"
        )
    check_trigger(trigger)
    async with contextlib.nullcontext() if joined else store.transaction():
        if rows is None:
            rows = await store.checkpoints.latest_raw(run_id)
        version = rows[-1]["version"] + 1 if rows else 1
        stamped = evolve(checkpoint, version=version)
        use_refs = _writes_refs(store, session_id)
        ref_base = is_ref_chain(rows)
        if use_refs and ref_base and rows[0]["payload"].get("session_id") != session_id:
            ref_base = False  # another session's references: start over with a full snapshot
        materialized: dict[str, Any] | None = None  # what the new row materializes to (for memo)
        if is_full(version, trigger) or use_refs != ref_base:
            if use_refs:
                assert session_id is not None
                shell = ref_shell(stamped, carry)
                if memo is not None:
                    entries, segments = memo.full_refs(session_id, stamped.conversation, items)
                    materialized = {**shell, "conversation": entries}
                else:
                    entries = refs.entries_of(stamped.conversation, session_id)
                    segments = refs.to_segments(entries, items=items)
                checkpoint_dict = {**shell, "conversation": segments}
                await pause(len(stamped.conversation))  # (a long one's entries took a while)
                payload = {
                    "format": refs.SPAN_FORMAT,
                    "session_id": session_id,
                    "checkpoint": checkpoint_dict,
                }
            else:
                payload = {"format": FULL_FORMAT, "checkpoint": stamped.to_dict()}
            written = await store.checkpoints.write(
                run_id, payload, trigger=trigger, lease=lease, kind="full"
            )
            chain: list[RawCheckpoint] = []
        elif use_refs:
            assert session_id is not None
            known = memo.ref_base(run_id, rows) if memo is not None else None
            if known is not None:
                base = known[0]  # what this process wrote last: it came from a checkpoint
            else:
                base = (await read_refs(store, run_id, rows))[0]  # (the items are not needed)
                # As below: a delta is never written on a base that does not decode.
                decode_resolved(run_id, base, [e for e in base["conversation"] if isinstance(e, dict)])
            if memo is not None and known is not None:
                entries = memo.ref_entries(session_id, base, known[1], stamped.conversation)
            else:
                entries = refs.entries_of(stamped.conversation, session_id)
            delta = refs.diff_entries(base, ref_shell(stamped, carry), entries, items)
            payload = delta
            if memo is not None:
                # What the row materializes to: the base's entries kept, then the new ones.
                materialized = refs.with_changes(base, delta["set"], entries)
            written = await store.checkpoints.write(
                run_id, payload, trigger=trigger, lease=lease, kind="delta"
            )
            chain = list(rows)
        else:
            new = stamped.to_dict()
            old = materialize(run_id, rows)
            assert old is not None  # rows is non-empty: version > 1
            # A delta on a base that does not decode would bury the corruption
            # under a row that looks fine: refuse before writing anything.
            decode(run_id, old)
            payload = diff(old, new)
            written = await store.checkpoints.write(
                run_id, payload, trigger=trigger, lease=lease, kind="delta"
            )
            chain = list(rows)
        if written != version:
            # Another writer slipped a version in under the same lease: undo ours.
            raise StoreError(f"run {run_id!r}: wrote version {written}, expected {version}")
        if prune and trigger in TERMINAL_TRIGGERS and version > 1:
            await store.checkpoints.prune(run_id, version)
    if into is not None:
        kind: CheckpointKind = "delta" if chain else "full"
        now = datetime.now(UTC)
        row = RawCheckpoint(version=version, kind=kind, trigger=trigger, payload=payload, created_at=now)
        into[:] = [*chain, row]
        if memo is not None:
            if materialized is not None:
                await pause(len(stamped.conversation))
                memo.ref_wrote(run_id, row, materialized, stamped.conversation)
            else:
                memo.ref_forget(run_id)
    return version


class CheckpointWriter:
    """``write_checkpoint``/``latest_checkpoint`` bound to one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def write(self, checkpoint: Checkpoint, *, trigger: str, lease: Lease) -> Checkpoint:
        """Write and return ``checkpoint`` stamped with its stored version."""
        version = await write_checkpoint(
            self.store, checkpoint.run_id, checkpoint, trigger=trigger, lease=lease
        )
        return replace(checkpoint, version=version)

    async def latest(self, run_id: str) -> Checkpoint | None:
        return await latest_checkpoint(self.store, run_id)


__all__ = [
    "DELTA_FORMAT",
    "FULL_EVERY",
    "FULL_FORMAT",
    "FULL_TRIGGERS",
    "SPAN_FORMAT_VERSION",
    "SUMMARY_CARRY",
    "TERMINAL_TRIGGERS",
    "CheckpointWriter",
    "diff",
    "is_full",
    "latest_checkpoint",
    "checkpoint_from_rows",
    "evolve",
    "decode_resolved",
    "is_ref_chain",
    "ref_shell",
    "materialize",
    "materialize_refs",
    "read_refs",
    "shell_dict",
    "write_checkpoint",
]
