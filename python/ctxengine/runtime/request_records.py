"""Per-request records (issue 42, ADR 0024): what a replay needs of each model request.

The log holds the conversation, the plans, the compactions and the working-state
transitions, but a request also depends on what was never logged: the clock reading
and the principal it was built for, the estimator's calibration at that moment, and the
checkpoint it was built from (its knowledge, recall, skills, notes and corrections are
the caller's, and a finished run's earlier checkpoint versions are pruned). A
``context.request.recorded`` event (format 6) keeps those, with the request's prefix and
body hashes and one digest per region of the body, so that ``ctxengine.replay.verify``
can rebuild the request from the log and name the first region that differs.

The loop keeps the request it built (``BuiltRequest``, in the run's memo) and appends
its record with the step that records the model's response, in that step's write
block: no extra transaction and, on PostgreSQL, no extra round trip. The checkpoint is
stored as a reference snapshot (``checkpoint.ref/2``: logged items as sequence ranges,
a summary that is the seed carry's as its sequence), which the checkpoint reader
materializes as it does any stored version. A deployment that does not write format 6
(``CTXENGINE_WRITE_FORMAT=5``) records nothing and runs as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from typing import Any, Protocol

from ..assembly.builder import Assembly, ContextBuilder
from ..assembly.render import digest_of
from ..assembly.request import ModelRequest
from ..core.canonical import canonical_json, payload_hash
from ..core.estimator import Estimator
from ..core.history import shared_prefix
from ..model import Checkpoint, Principal, RunContext
from ..plan import ContextPlan
from ..stores.encoded import EncodedEvent, reads_back, with_text
from ..stores.events import NewEvent, Visibility
from ..stores.formats import WritePolicy
from . import checkpoint_refs as refs
from .carry import Carry
from .checkpoints import RefMemory, ref_shell

REQUEST_RECORDED = "context.request.recorded"
#: The format version that introduced the record (``EVENT_FORMATS``).
REQUEST_FORMAT = 6
#: The estimator snapshot's keys a record keeps (its calibration); the rest is settings,
#: kept as a digest.
CALIBRATION_KEYS = ("corrections", "samples")
#: A record's members (``record_payload``).
RECORD_KEYS = frozenset(
    {"run", "principal", "clock", "surface", "max_compaction_depth", "plan", "policy", "estimator"}
    | {"checkpoint", "hashes", "tokens", "cut"}
)
#: The members holding values from outside the engine's typed settings, counts and digests:
#: the caller's checkpoint (a passage's float score) and the calibration from usage reports.
FOREIGN = ("checkpoint", "estimator")


@dataclass(frozen=True, slots=True)
class BuiltRequest:
    """A request the loop built and has not recorded yet: what its record is made of."""

    run: RunContext
    checkpoint: Checkpoint
    principal: Principal
    plan: ContextPlan
    assembly: Assembly


class RegionMemory(Protocol):
    """Where a worker keeps the last history region it digested (``window.SessionWindow``)."""

    region: tuple[tuple[Any, ...], Any] | None


def region_digests(request: ModelRequest, memo: RegionMemory | None = None) -> list[list[Any]]:
    """``[region, items, sha256]`` for the prefix (its digest covers the tools) and each run
    of body items of one region class, in order: where two builds of a request part. A
    region's digest is the SHA-256 of its items' digests (each cached on the item), so a
    record costs a join per item, not a second pass over the body's bytes; with ``memo``
    a history region that extends the last one digested is continued from its state."""
    out: list[list[Any]] = [["prefix", len(request.prefix), request.metadata["prefix_sha256"]]]
    for region, group in groupby(request.body, key=_REGION):
        items = tuple(group)
        known = memo.region if memo is not None and region == "history" else None
        if known is not None and shared_prefix(known[0], items) == len(known[0]):
            state, tail = known[1].copy(), items[len(known[0]) :]
        else:
            state, tail = hashlib.sha256(), items
        state.update(b"".join([c[1] if (c := item._cj) is not None else digest_of(item) for item in tail]))
        if memo is not None and region == "history":
            memo.region = (items, state.copy())
        out.append([region, len(items), state.hexdigest()])
    return out


_REGION = attrgetter("region_class")


def estimator_state(estimator: Estimator) -> dict[str, Any]:
    """The estimator's calibration (what ``corrected`` applies) and a digest of its settings."""
    snapshot = estimator.snapshot()
    return {
        "settings_sha256": settings_digest(snapshot),
        **{key: snapshot.get(key, {}) for key in CALIBRATION_KEYS},
    }


def settings_digest(snapshot: dict[str, Any]) -> str:
    """The digest of an estimator snapshot's settings (everything but its calibration and
    version; a version-1 snapshot's missing table read as empty)."""
    settings = {k: v for k, v in snapshot.items() if k not in CALIBRATION_KEYS and k != "version"}
    settings.setdefault("encodings", {})
    return payload_hash(settings)


def checkpoint_snapshot(
    checkpoint: Checkpoint,
    session_id: str,
    carry: Carry | None,
    items: Sequence[int] | None,
    memo: RefMemory | None = None,
) -> dict[str, Any]:
    """``checkpoint`` as a reference snapshot payload (``checkpoint.ref/2``), as a run's full
    checkpoint row would hold it (``memo``: the session window, which folds a conversation
    that grew at its end from where it last left it)."""
    if memo is not None:
        segments = memo.full_refs(session_id, checkpoint.conversation, items)[1]
    else:
        segments = refs.to_segments(refs.entries_of(checkpoint.conversation, session_id), items=items)
    shell = ref_shell(checkpoint, carry)
    return {
        "format": refs.SPAN_FORMAT,
        "session_id": session_id,
        "checkpoint": {**shell, "conversation": segments},
    }


def record_payload(
    built: BuiltRequest,
    builder: ContextBuilder,
    estimator: Estimator,
    *,
    carry: Carry | None = None,
    items: Sequence[int] | None = None,
    memo: Any = None,
) -> dict[str, Any]:
    """The record of ``built`` (see the module; ``memo``: the session window, a
    ``RefMemory`` and a ``RegionMemory``)."""
    run, plan, assembly = built.run, built.plan, built.assembly
    request, pressure = assembly.request, assembly.pressure
    meta = request.metadata
    now = assembly.now
    return {
        "run": run.to_dict(),
        "principal": built.principal.to_dict(),
        "clock": now.isoformat() if now is not None else None,
        "surface": builder.surface,
        "max_compaction_depth": builder.max_compaction_depth,
        "plan": {
            "epoch": plan.epoch,
            "prefix_sha256": plan.prefix_sha256,
            "model_id": plan.model_id,
            "policy_version": plan.policy_version,
            "builder_version": plan.builder_version,
            "counting": plan.counting,
        },
        "policy": builder.planner.policy.to_dict(),
        "estimator": estimator_state(estimator),
        "checkpoint": checkpoint_snapshot(built.checkpoint, run.session_id, carry, items, memo),
        "hashes": {
            "prefix": meta["prefix_sha256"],
            "body": meta["body_sha256"],
            "regions": region_digests(request, memo),
        },
        "tokens": {
            "total": pressure.total_tokens,
            "prefix": pressure.prefix_tokens,
            "body": pressure.body_tokens,
            "reserve": pressure.reserve_tokens,
            "capacity": pressure.capacity_tokens,
            "max_output": request.max_output_tokens,
        },
        "cut": {
            "history_cut": pressure.history_cut,
            "history_budget_tokens": pressure.history_budget_tokens,
            "yield_steps": list(pressure.yield_steps),
        },
    }


def record_event(payload: dict[str, Any], run: RunContext, principal: Principal) -> NewEvent:
    """The record as an event of the run, idempotent on its derivation key (a retried step
    repeats it), readable as the principal's (it holds what that principal saw). The payload
    is encoded once: its digest (the key's, ``payload_hash``) is of the text the store writes,
    which the store does not decode again when the record's parts from outside the engine
    (``FOREIGN``) read back; otherwise the store checks it whole, as any event's."""
    text = canonical_json(payload)
    event = EncodedEvent(
        session_id=run.session_id,
        type=REQUEST_RECORDED,
        payload=payload,
        derivation_key=f"context.request:{run.run_id}:{run.step}:{hashlib.sha256(text).hexdigest()[:16]}",
        run_id=run.run_id,
        visibility=Visibility.principal(principal.principal_id),
        format_version=REQUEST_FORMAT,
    )
    if payload.keys() == RECORD_KEYS and all(reads_back(payload[key]) for key in FOREIGN):
        return with_text(event, text.decode("utf-8"))
    return event


def writes_records(store: object) -> bool:
    """Whether the store's write policy lets this process write request records."""
    policy = getattr(store, "write_policy", None)
    return (policy if isinstance(policy, WritePolicy) else WritePolicy()).allows(REQUEST_RECORDED)


__all__ = [
    "CALIBRATION_KEYS",
    "FOREIGN",
    "RECORD_KEYS",
    "REQUEST_FORMAT",
    "REQUEST_RECORDED",
    "BuiltRequest",
    "RegionMemory",
    "checkpoint_snapshot",
    "estimator_state",
    "record_event",
    "record_payload",
    "region_digests",
    "settings_digest",
    "writes_records",
]
