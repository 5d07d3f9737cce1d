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
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import CheckpointCorruption, ModelValidationError, StoreError
from ..model import Checkpoint
from ..model.checkpoint import OMITTED_WHEN_EMPTY
from ..stores.events import Lease, RawCheckpoint, Store, check_trigger

FULL_FORMAT = "checkpoint.full/1"
DELTA_FORMAT = "checkpoint.delta/1"
#: Triggers that always write a full snapshot: compaction, suspension, terminal.
FULL_TRIGGERS: frozenset[str] = frozenset(
    {"compaction", "approval_requested", "final_completion", "final_failure"}
)
#: A full snapshot at least every this many versions (so at most ``FULL_EVERY - 1`` deltas).
FULL_EVERY = 8


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
    changed = {k: v for k, v in new.items() if k != "conversation" and base.get(k) != v}
    # A field the new checkpoint leaves out (empty) is cleared.
    for key in OMITTED_WHEN_EMPTY:
        if key in base and key not in new:
            changed[key] = []
    changed["version"] = new["version"]
    return {
        "format": DELTA_FORMAT,
        "base_version": base["version"],
        "set": changed,
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
    out = {**base, **changes}
    out["conversation"] = old[:keep] + append
    for key in OMITTED_WHEN_EMPTY:
        if out.get(key) == []:
            del out[key]
    return out


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


async def latest_checkpoint(store: Store, run_id: str) -> Checkpoint | None:
    """The run's newest checkpoint, materialized; ``None`` when it has none."""
    rows = await store.checkpoints.latest_raw(run_id)
    return decode(run_id, materialize(run_id, rows))


async def write_checkpoint(
    store: Store, run_id: str, checkpoint: Checkpoint, *, trigger: str, lease: Lease
) -> int:
    """Write ``checkpoint`` as the run's next version (full or delta) and return that version.

    The checkpoint's own ``version`` is ignored and replaced by the stored
    one. Runs in a store transaction (joining the caller's), so a stale
    lease (``LeaseLost``) or any failure leaves the store unchanged.
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
    async with store.transaction():
        rows = await store.checkpoints.latest_raw(run_id)
        version = rows[-1]["version"] + 1 if rows else 1
        new = replace(checkpoint, version=version).to_dict()
        if is_full(version, trigger):
            written = await store.checkpoints.write(
                run_id, {"format": FULL_FORMAT, "checkpoint": new}, trigger=trigger, lease=lease, kind="full"
            )
        else:
            base = materialize(run_id, rows)
            assert base is not None  # rows is non-empty: version > 1
            # A delta on a base that does not decode would bury the corruption
            # under a row that looks fine: refuse before writing anything.
            decode(run_id, base)
            written = await store.checkpoints.write(
                run_id, diff(base, new), trigger=trigger, lease=lease, kind="delta"
            )
        if written != version:
            # Another writer slipped a version in under the same lease: undo ours.
            raise StoreError(f"run {run_id!r}: wrote version {written}, expected {version}")
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
    "CheckpointWriter",
    "diff",
    "is_full",
    "latest_checkpoint",
    "materialize",
    "write_checkpoint",
]
