"""Pressure-driven compaction (SPEC section 6, seed ADR-0043 decision 7, ADR 0011): a step's
request built and, when it does not fit and can be compacted, the compaction's events and
checkpoint committed together and adopted, then measured again.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..assembly.builder import Pressure
from ..assembly.overflow import overflow_detail
from ..assembly.request import ModelRequest
from ..assembly.session_renders import SessionRenders
from ..core import telemetry
from ..core.canonical import payload_hash
from ..core.slices import give_back, off_loop
from ..errors import ContextError, ContextOverflow, StoreCorruption
from ..model import AgentSpec, Checkpoint, Principal, RunContext
from ..plan import STABLE_BODY_VERSIONS, ContextPlan
from ..stores.events import Event, Lease, NewEvent, RawCheckpoint
from ..stores.formats import WritePolicy
from .carry import CARRY_RECORDED, carry_payload, carry_visibility, find_carry, stored_carry
from .checkpoints import evolve
from .compaction import StructuredCompactor
from .compaction_record import SUMMARY_FORMAT, CompactionResult, SummaryRecord
from .request_records import BuiltRequest
from .seeding import summary_counts
from .session import ITEM_APPENDED

if TYPE_CHECKING:
    from .loop import ContextLoop

log = logging.getLogger("ctxengine.runtime")

CONTEXT_COMPACTED = "context.compacted"
#: Compactions one ``build_with_pressure`` call may perform before giving up.
MAX_COMPACTIONS_PER_STEP = 2


def _key(prefix: str, payload: dict[str, Any]) -> str:
    return f"{prefix}:{payload_hash(payload)[:16]}"


def _compaction_event(run: RunContext, result: CompactionResult) -> NewEvent:
    payload = result.to_dict()
    return NewEvent(
        session_id=run.session_id,
        type=CONTEXT_COMPACTED,
        payload=payload,
        derivation_key=_key(f"context.compacted:{run.run_id}:{result.replaced_through_sequence}", payload),
        run_id=run.run_id,
        format_version=result.format_version,
    )


def compacts_early(plan: ContextPlan, pressure: Pressure, checkpoint: Checkpoint, max_depth: int) -> bool:
    """Whether a request that fits only by truncating history tool results under pressure
    compacts first (builder version 3, ADR 0027): truncating the oldest result, one more at
    nearly every turn, changes the history near its start on every request, while one
    compaction moves the history's start by half its budget at once (``RETAIN_RATIO``) and
    the next requests share their prefix. The history is then over its budget (that is why
    a result was truncated), so the compaction replaces something. Not when the summary is
    at its depth limit: the request that fits is sent as before."""
    return (
        plan.builder_version in STABLE_BODY_VERSIONS
        and checkpoint.summary_depth < max_depth
        and any(step.startswith(TRUNCATED_UNDER_PRESSURE) for step in pressure.yield_steps)
    )


#: The yield step of history tool results truncated under pressure (not over their cap).
TRUNCATED_UNDER_PRESSURE = "tool_results_truncated:"


def _item_cap(loop: ContextLoop, plan: ContextPlan) -> int | None:
    rules = loop.builder.turn_rules(plan)
    return rules.item_cap if rules is not None else None


class LogSummaries:
    """The ``RecordedSummaries`` a loop hands its compactor for one run: this deployment
    records summaries when its write policy allows format 7; a recorded summary is found in
    the ``context.compacted`` events after the run's seed (the compactor reads nothing
    itself)."""

    def __init__(self, loop: ContextLoop, run: RunContext, policy: WritePolicy) -> None:
        self._loop = loop
        self._run = run
        self.records = policy.allows(CONTEXT_COMPACTED, SUMMARY_FORMAT)

    async def find(
        self, input_sha256: str, prompt_version: str, model_id: str
    ) -> tuple[int, SummaryRecord] | None:
        run = self._run
        events = await self._loop.store.events.read(
            run.session_id, after=run.seed_sequence, types=(CONTEXT_COMPACTED,)
        )
        for event in events:
            if event.format_version < SUMMARY_FORMAT:
                continue
            try:
                record = CompactionResult.from_dict(event.payload).summarizer
            except (ContextError, TypeError, ValueError) as exc:
                raise StoreCorruption(
                    event.session_id, event.sequence, f"compaction event does not decode: {exc}"
                ) from None
            if (
                record is not None
                and record.outcome == "adopted"
                and (record.input_sha256, record.prompt_version, record.model_id)
                == (input_sha256, prompt_version, model_id)
            ):
                return (record.reused if record.reused is not None else event.sequence), record
        return None


class Compactions:
    """A loop's builds under pressure."""

    def __init__(self, loop: ContextLoop) -> None:
        self.loop = loop

    def _line(self, run: RunContext) -> SessionRenders | None:
        """The render line of the run's session window, when the window holds the run's seed
        (a run this worker did not seed builds on the builder's own)."""
        window = self.loop.windows.get(run.session_id)
        if window is None or not window.known or run.run_id not in window.runs:
            return None
        return window.line

    def _policy(self) -> WritePolicy:
        policy = getattr(self.loop.store, "write_policy", None)
        return policy if isinstance(policy, WritePolicy) else WritePolicy()

    async def build(
        self, run: RunContext, checkpoint: Checkpoint, agent: AgentSpec, principal: Principal, *, lease: Lease
    ) -> tuple[ModelRequest, Checkpoint]:
        """``ContextLoop.build_with_pressure``."""
        loop = self.loop
        plan = await loop.writes.plan_or_none(run.session_id)
        if plan is None:
            raise ContextError(
                f"session {run.session_id!r} has no context plan; call planner.plan(...) first"
            )
        current = checkpoint
        compactions = 0
        while True:
            assembly = loop.builder.assemble(run, current, agent, principal, plan=plan, line=self._line(run))
            pressure = assembly.pressure
            depth = loop.builder.max_compaction_depth
            early = compactions == 0 and compacts_early(plan, pressure, current, depth)
            if pressure.fits and not early:
                # Kept for its record, written with the step that records the response.
                loop.writes.memo(run).built = BuiltRequest(run, current, principal, plan, assembly)
                return assembly.request, current
            if pressure.fits:
                # Once, before a request that fits by truncating history results under pressure.
                pressure = replace(pressure, reason="history_requires_compaction")
                current = await self._compact(run, current, plan, pressure, principal, lease)
                compactions += 1
                continue
            if not pressure.compactable or compactions >= MAX_COMPACTIONS_PER_STEP:
                tried = (
                    f"after {compactions} compaction(s) this step "
                    f"({'the limit' if pressure.compactable else 'no further compaction can help'})"
                )
                raise ContextOverflow(
                    pressure.reason,
                    pressure.total_tokens,
                    pressure.capacity_tokens,
                    overflow_detail(pressure, plan.budget, tried, item_cap=_item_cap(loop, plan)),
                )
            current = await self._compact(run, current, plan, pressure, principal, lease)
            compactions += 1

    async def _compact(
        self,
        run: RunContext,
        current: Checkpoint,
        plan: ContextPlan,
        pressure: Pressure,
        principal: Principal,
        lease: Lease,
    ) -> Checkpoint:
        """Compact ``current``, commit the compaction's events and checkpoint, and return the
        compacted checkpoint (adopted only once both are committed)."""
        loop = self.loop
        with telemetry.span(
            "ctxengine.compaction",
            session_id=run.session_id,
            run_id=run.run_id,
            step=run.step,
            reason=pressure.reason,
        ) as span:
            # Each stretch of a compaction gives the loop back (a long history's takes a while).
            await give_back()
            compacted, result = await self._compactor_answer(current, plan, pressure, run)
            # Its payload lists every pointer it elided: made and hashed off the loop.
            event = await off_loop(lambda: _compaction_event(run, result))
            carry = await self._carry_event(run, principal, current, compacted, result, plan)
            await give_back()
            events = [event] if carry is None else [event, carry]
            stored, version, rows = await self._commit_compaction(run, lease, current, compacted, events)
            loop.writes.committed(run, rows, stored)
            await give_back()
            if span.is_recording():
                telemetry.set_attributes(
                    span,
                    {
                        "replaced_through_sequence": result.replaced_through_sequence,
                        "depth": result.depth,
                        "version": version,
                        "carried": carry is not None,
                    },
                )
        telemetry.add("ctxengine.compactions", reason=pressure.reason)
        log.debug(
            "session %r run %r step %d compacted through %d (%s)",
            run.session_id,
            run.run_id,
            run.step,
            result.replaced_through_sequence,
            pressure.reason,
        )
        return evolve(compacted, version=version)

    async def _compactor_answer(
        self, current: Checkpoint, plan: ContextPlan, pressure: Pressure, run: RunContext
    ) -> tuple[Checkpoint, CompactionResult]:
        """The compactor's answer, awaited (the ``Compactor`` port: a model-backed compactor's
        call happens here, before the write block, which may run twice). A
        ``StructuredCompactor`` subclass whose synchronous ``compact`` is its own is called
        as it is."""
        compactor = self.loop.compactor
        budget, reason = plan.budget, pressure.reason
        key, seed, room = plan.counting_key, run.seed_sequence, pressure.history_budget_tokens
        if (
            isinstance(compactor, StructuredCompactor)
            and type(compactor).compact is not StructuredCompactor.compact
        ):
            return compactor.compact(
                current, budget, reason, model_id=key, seed_sequence=seed, history_budget_tokens=room
            )
        return await compactor.compact_async(
            current,
            budget,
            reason,
            model_id=key,
            seed_sequence=seed,
            history_budget_tokens=room,
            summaries=LogSummaries(self.loop, run, self._policy()),
        )

    async def _commit_compaction(
        self,
        run: RunContext,
        lease: Lease,
        current: Checkpoint,
        compacted: Checkpoint,
        events: list[NewEvent],
    ) -> tuple[list[Event], int, list[RawCheckpoint]]:
        """Append the compaction's events and write the compacted checkpoint, in one transaction."""

        async def body(predicted: bool) -> tuple[list[Event], int, list[RawCheckpoint]]:
            stored, _ = await loop.store.events.append_all(events)
            return (stored, *await loop.writes.write(run, compacted, "compaction", lease))

        loop = self.loop
        return await loop.commits.run(
            body,
            session_id=run.session_id,
            run_id=run.run_id,
            next_sequence=loop.windows.next_sequence(run.session_id),
            version=loop.writes.next_version(run, current.version),
        )

    async def _carry_event(
        self,
        run: RunContext,
        principal: Principal | None,
        before: Checkpoint,
        compacted: Checkpoint,
        result: CompactionResult,
        plan: ContextPlan,
    ) -> NewEvent | None:
        """The carry of an adopted compaction, or ``None``: not written by this deployment, or
        no visibility class under which every reader would see exactly what it summarizes.

        The summary holds what the run's seed could see, so the class is computed for the
        principal the run was seeded with (``None``: the unfiltered view)."""
        loop = self.loop
        if not self._policy().allows(CARRY_RECORDED):
            return None
        window = loop.windows.get(run.session_id)
        memo = window.runs.get(run.run_id) if window is not None else None
        if memo is not None and memo.seeded is not None:
            seeded, writer = memo.seeded
        else:
            # A run this loop picked up rather than seeded (resumed by another worker): the
            # carry its version 1 was seeded from is the one its seed reads (the log below
            # the seed never changes), for the principal it runs for; the check below drops
            # it when the checkpoint was not seeded from it. Without this a compaction in a
            # resumed run recorded no carry, and the session's next run seeded differently
            # from the one an uninterrupted worker starts (ADR 0027 made that likelier).
            decode = window.carry if window is not None else stored_carry
            seeded = await find_carry(loop.store, run.session_id, run.seed_sequence, principal, decode)
            writer = principal
        if seeded is not None and seeded.sequence not in before.summary_source_event_ids:
            seeded = None  # this checkpoint was not seeded from it
        through = compacted.replaced_through_sequence
        after = seeded.through if seeded is not None else 0
        classes = await loop.store.events.visibilities(run.session_id, ITEM_APPENDED, after, through)
        visibility = carry_visibility(classes, seeded.visibility if seeded else None, writer)
        if visibility is None:
            return None
        tokens = summary_counts(
            loop.estimator, plan.counting_key, compacted.compacted_summary or "", compacted.summary_elided
        )
        payload = carry_payload(
            run_id=run.run_id, checkpoint=compacted, depth_in_run=result.depth, previous=seeded, tokens=tokens
        )
        return NewEvent(
            session_id=run.session_id,
            type=CARRY_RECORDED,
            payload=payload,
            derivation_key=_key(f"context.carry:{run.run_id}:{through}", payload),
            run_id=run.run_id,
            visibility=visibility,
        )


__all__ = ["CONTEXT_COMPACTED", "MAX_COMPACTIONS_PER_STEP", "Compactions"]
