"""Session-level compaction carry (issue 13, ADR 0011).

When a run adopts a compaction, the loop also records ``context.carry.recorded``
(format 2) in the same transaction: the capped summary, its listed and folded
elided spans, the sequence it replaced through and the lineage (the carry the
run was seeded from, the range of sequences this carry added). A later run
seeds from the latest carry strictly below its seed that its principal may
use, plus only the items after ``replaced_through_sequence``; a run below
every carry (or for whom none is usable) seeds from the full log.

Visibility: the carry summarizes what its writer could see of the items up
to ``through``. Its visibility class is the narrowest one under which every
reader sees exactly those items (``carry_visibility``): all session-visible
-> the session; session and one tenant's -> that tenant; anything scoped to
a principal or another tenant -> the writer alone. A reader outside the class
never sees the carry and seeds from the log, so a carry never shows anyone
what an item hidden from them said. With no principal (the unfiltered
runtime view) only carries exact for everyone are used or written.

The payload never copies the working state (it has its own carry) and never
holds item text other than the summary's trusted excerpts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeGuard

from ..core.canonical import payload_hash
from ..errors import ModelValidationError, StoreCorruption
from ..model import Checkpoint, ConversationItem, ElidedSpan, Principal, WorkingState
from ..stores.events import Event, Store, Visibility

CARRY_RECORDED = "context.carry.recorded"
#: Carries a run with no principal looks past (ones scoped to a principal) before
#: it gives up and seeds from the log.
MAX_CARRY_PROBES = 8


@dataclass(frozen=True, slots=True)
class Carry:
    """A recorded carry, as a later run seeds from it."""

    sequence: int
    run_id: str
    summary: str
    elided: tuple[ElidedSpan, ...]
    through: int
    depth_in_run: int
    previous_carry: int | None
    source_range: tuple[int, int]
    visibility: Visibility
    tokens: dict[str, int]

    def seed(
        self, run_id: str, conversation: tuple[ConversationItem, ...] = (), state: WorkingState | None = None
    ) -> Checkpoint:
        """A run's version 1 seeded from this carry (depth re-based to 0; the carry is the source)."""
        return Checkpoint(
            run_id,
            conversation=conversation,
            working_state=state if state is not None else WorkingState(),
            compacted_summary=self.summary,
            summary_source_event_ids=(self.sequence,),
            summary_elided=self.elided,
            replaced_through_sequence=self.through,
            summary_depth=0,
        )


def carry_payload(
    *,
    run_id: str,
    checkpoint: Checkpoint,
    depth_in_run: int,
    previous: Carry | None,
    tokens: dict[str, int],
) -> dict[str, Any]:
    """The ``context.carry.recorded`` payload of an adopted compacted ``checkpoint``."""
    summary = checkpoint.compacted_summary or ""
    through = checkpoint.replaced_through_sequence
    first = previous.through + 1 if previous is not None else 1
    return {
        "run_id": run_id,
        "summary": summary,
        "summary_sha256": payload_hash(summary),
        "elided": [span.to_dict() for span in checkpoint.summary_elided],
        "replaced_through_sequence": through,
        "depth_in_run": depth_in_run,
        "previous_carry": previous.sequence if previous is not None else None,
        "source_range": [min(first, through), through],
        "tokens": dict(sorted(tokens.items())),
    }


def stored_carry(event: Event) -> Carry:
    """The carry a ``context.carry.recorded`` event records; ``StoreCorruption`` when it does not decode."""
    p = event.payload

    def bad(reason: str) -> StoreCorruption:
        return StoreCorruption(event.session_id, event.sequence, f"carry does not decode: {reason}")

    summary, through, depth = p.get("summary"), p.get("replaced_through_sequence"), p.get("depth_in_run")
    previous, source = p.get("previous_carry"), p.get("source_range")
    run_id, tokens = p.get("run_id"), p.get("tokens")
    if not isinstance(summary, str) or not isinstance(run_id, str):
        raise bad("summary and run_id must be text")
    if not _int(through) or not 0 <= through < event.sequence or not _int(depth) or depth < 1:
        raise bad(f"replaced_through_sequence {through!r} / depth_in_run {depth!r}")
    if previous is not None and (not _int(previous) or not 0 < previous < event.sequence):
        raise bad(f"previous_carry {previous!r}")
    if not (isinstance(source, list) and len(source) == 2 and all(_int(n) for n in source)):
        raise bad(f"source_range {source!r}")
    if not isinstance(tokens, dict) or not all(
        isinstance(k, str) and _int(v) and v >= 0 for k, v in tokens.items()
    ):
        raise bad("tokens must map counters to counts")
    elided = p.get("elided")
    if not isinstance(elided, list):
        raise bad("elided is not a list")
    try:
        spans = tuple(ElidedSpan.from_dict(span) for span in elided)
    except (ModelValidationError, TypeError, AttributeError) as exc:
        raise bad(f"elided span: {exc}") from None
    return Carry(
        sequence=event.sequence,
        run_id=run_id,
        summary=summary,
        elided=spans,
        through=through,
        depth_in_run=depth,
        previous_carry=previous,
        source_range=(source[0], source[1]),
        visibility=event.visibility,
        tokens=dict(tokens),
    )


def _int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


async def find_carry(
    store: Store,
    session_id: str,
    seed_sequence: int,
    principal: Principal | None,
    decode: Callable[[Event], Carry] = stored_carry,
) -> Carry | None:
    """The latest carry strictly below ``seed_sequence`` that ``principal`` may use.

    With a principal: the latest carry it may see. Without one (the unfiltered
    view) only a carry exact for every reader (session or tenant scoped) will
    do; a principal-scoped carry summarizes one principal's view and is passed
    over. ``None``: seed from the log.
    """
    before = seed_sequence
    for _ in range(MAX_CARRY_PROBES):
        event = await store.events.latest_before(session_id, before, CARRY_RECORDED, principal)
        if event is None:
            return None
        carry = decode(event)
        if principal is not None or carry.visibility.scope != "principal":
            return carry
        before = event.sequence
    return None


def carry_visibility(
    classes: Iterable[Visibility], previous: Visibility | None, writer: Principal | None
) -> Visibility | None:
    """The narrowest class under which every reader sees exactly what ``writer`` saw of items
    of ``classes`` (and of the previous carry's); ``None`` when no class is exact (then no
    carry is recorded)."""
    seen = set(classes)
    if previous is not None:
        seen.add(previous)
    tenants = {v.id for v in seen if v.scope == "tenant"}
    scoped = any(v.scope == "principal" for v in seen)
    if not tenants and not scoped:
        return Visibility.session()
    if not scoped and len(tenants) == 1:
        (tenant,) = tenants
        if tenant is not None and (writer is None or writer.tenant_id == tenant):
            return Visibility.tenant(tenant)
    if writer is not None:
        return Visibility.principal(writer.principal_id)
    return None


__all__ = [
    "CARRY_RECORDED",
    "MAX_CARRY_PROBES",
    "Carry",
    "carry_payload",
    "carry_visibility",
    "find_carry",
    "stored_carry",
]
