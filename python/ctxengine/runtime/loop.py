"""The runtime port: pressure-driven compaction, working-state writes, run seeding and
step recording (SPEC sections 6-7, seed ADR-0043 decisions 6-8, ADR 0011).

Every method that changes a run appends its event and writes the checkpoint
inside one ``store.transaction()``: both commit or neither does. A failure
leaves the caller's checkpoint in force (nothing the method built is
adopted) and the store as it was.

Derivation keys name what an event was derived from and end with a digest of
its payload, so a retried step repeats its event exactly (the store returns
the stored one) and a different step never collides with it.
"""

from __future__ import annotations

from typing import Any

from ..assembly.builder import ContextBuilder
from ..assembly.overflow import overflow_detail
from ..assembly.request import ModelRequest
from ..core.canonical import payload_hash
from ..core.estimator import Estimator
from ..errors import ContextError, ContextOverflow, ModelValidationError
from ..model import (
    AgentSpec,
    Checkpoint,
    Principal,
    RunContext,
)
from ..plan import ContextPlan, ContextPlanner
from ..stores.events import Event, Lease, NewEvent, RawCheckpoint, Store
from ..stores.formats import WritePolicy
from .carry import CARRY_RECORDED, carry_payload, carry_visibility
from .checkpoints import evolve
from .commits import Commits
from .compaction import CompactionResult, StructuredCompactor
from .loop_runs import CHECKPOINT_SEEDED, RunStarts, StartedRun
from .loop_state import WorkingStateWrites
from .loop_steps import StepWrites
from .seeding import Seed, summary_counts, whole_pairs
from .session import ITEM_APPENDED
from .steps import StateUpdate
from .usage import report_usage
from .windows import Windows
from .working_state import WorkingStateManager

CONTEXT_COMPACTED = "context.compacted"
#: Compactions one ``build_with_pressure`` call may perform before giving up.
MAX_COMPACTIONS_PER_STEP = 2


def _key(prefix: str, payload: dict[str, Any]) -> str:
    return f"{prefix}:{payload_hash(payload)[:16]}"


class ContextLoop(RunStarts, StepWrites, WorkingStateWrites):
    """What the agent runtime calls between model requests."""

    def __init__(
        self,
        store: Store,
        *,
        planner: ContextPlanner,
        builder: ContextBuilder,
        compactor: StructuredCompactor,
        estimator: Estimator,
        working_state: WorkingStateManager | None = None,
        prune_finished: bool = True,
        windows: Windows | None = None,
    ) -> None:
        if builder.max_compaction_depth != compactor.max_depth:
            raise ModelValidationError(
                "ContextLoop",
                "compactor",
                f"max_depth {compactor.max_depth} != the builder's max_compaction_depth "
                f"{builder.max_compaction_depth}: one depth limit must govern both",
            )
        self.store = store
        self.planner = planner
        self.builder = builder
        self.compactor = compactor
        self.estimator = estimator
        self.working_state = (
            working_state if working_state is not None else WorkingStateManager(estimator=estimator)
        )
        #: Delete a finished run's earlier checkpoint versions when it ends (ADR 0011).
        self.prune_finished = prune_finished
        #: What this worker holds of each session it serves: one window each (ADR 0016).
        self.windows = windows if windows is not None else Windows(store)
        self._fold_refs = True
        #: Commits in one call where the store takes predictions (ADR 0013).
        self.commits = Commits(store)

    async def _plan(self, session_id: str) -> ContextPlan:
        plan = await self._plan_or_none(session_id)
        if plan is None:
            raise ContextError(f"session {session_id!r} has no context plan; call planner.plan(...) first")
        return plan

    def _line(self, run: RunContext) -> Any:
        """The render line of the run's session window, when the window holds the run's seed
        (a run this worker did not seed builds on the builder's own)."""
        window = self.windows.get(run.session_id)
        if window is None or not window.known or run.run_id not in window.runs:
            return None
        return window.line

    def _policy(self) -> WritePolicy:
        policy = getattr(self.store, "write_policy", None)
        return policy if isinstance(policy, WritePolicy) else WritePolicy()

    # -- pressure ------------------------------------------------------------------

    async def build_with_pressure(
        self, run: RunContext, checkpoint: Checkpoint, agent: AgentSpec, principal: Principal, *, lease: Lease
    ) -> tuple[ModelRequest, Checkpoint]:
        """The request for this step and the checkpoint in force.

        When the body does not fit and can be compacted: compact, then append
        ``context.compacted`` (and the session-level ``context.carry.recorded``,
        when this deployment writes it and a visibility class fits; ADR 0011) and
        write the compacted checkpoint (trigger ``compaction``) in one
        transaction, adopt it and measure again; at most
        ``MAX_COMPACTIONS_PER_STEP`` times, then ``ContextOverflow``.
        """
        plan = await self._plan(run.session_id)
        current = checkpoint
        compactions = 0
        while True:
            assembly = self.builder.assemble(run, current, agent, principal, plan=plan, line=self._line(run))
            pressure = assembly.pressure
            if pressure.fits:
                return assembly.request, current
            if not pressure.compactable or compactions >= MAX_COMPACTIONS_PER_STEP:
                tried = (
                    f"after {compactions} compaction(s) this step "
                    f"({'the limit' if pressure.compactable else 'no further compaction can help'})"
                )
                raise ContextOverflow(
                    pressure.reason,
                    pressure.total_tokens,
                    pressure.capacity_tokens,
                    overflow_detail(pressure, plan.budget, tried),
                )
            compacted, result = self.compactor.compact(
                current,
                plan.budget,
                pressure.reason,
                model_id=plan.counting_key,
                seed_sequence=run.seed_sequence,
                history_budget_tokens=pressure.history_budget_tokens,
            )
            payload = result.to_dict()
            event = NewEvent(
                session_id=run.session_id,
                type=CONTEXT_COMPACTED,
                payload=payload,
                derivation_key=_key(
                    f"context.compacted:{run.run_id}:{result.replaced_through_sequence}", payload
                ),
                run_id=run.run_id,
            )
            carry = await self._carry_event(run, principal, current, compacted, result, plan)
            events = [event] if carry is None else [event, carry]
            stored, version, rows = await self._commit_compaction(run, lease, current, compacted, events)
            self._committed(run, rows, stored)
            # Adopted only once both are committed.
            current = evolve(compacted, version=version)
            compactions += 1

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
            stored, _ = await self.store.events.append_all(events)
            return (stored, *await self._write(run, compacted, "compaction", lease))

        return await self.commits.run(
            body,
            session_id=run.session_id,
            run_id=run.run_id,
            next_sequence=self.windows.next_sequence(run.session_id),
            version=self._next_version(run, current.version),
        )

    async def report_usage(
        self, run: RunContext, request: ModelRequest, actual: int, *, principal: Principal | None = None
    ) -> None:
        """After a model response: reconcile the estimator with the provider's count of
        ``request`` and record both for ``ctxengine inspect`` (``runtime.usage``)."""
        await report_usage(self.store, self.estimator, run, request, actual, principal=principal)

    async def _carry_event(
        self,
        run: RunContext,
        principal: Principal | None,
        before: Checkpoint,
        compacted: Checkpoint,
        result: CompactionResult,
        plan: ContextPlan,
    ) -> NewEvent | None:
        """The carry of an adopted compaction, or ``None``: not written by this deployment, a
        run this loop did not seed (whose view of the log it does not know), or no visibility
        class under which every reader would see exactly what it summarizes.

        The summary holds what the run's seed could see, so the class is computed for the
        principal the run was seeded with (``None``: the unfiltered view)."""
        window = self.windows.get(run.session_id)
        memo = window.runs.get(run.run_id) if window is not None else None
        if not self._policy().allows(CARRY_RECORDED) or memo is None or memo.seeded is None:
            return None
        seeded, writer = memo.seeded
        if seeded is not None and seeded.sequence not in before.summary_source_event_ids:
            seeded = None  # this checkpoint was not seeded from it
        through = compacted.replaced_through_sequence
        after = seeded.through if seeded is not None else 0
        classes = await self.store.events.visibilities(run.session_id, ITEM_APPENDED, after, through)
        visibility = carry_visibility(classes, seeded.visibility if seeded else None, writer)
        if visibility is None:
            return None
        tokens = summary_counts(
            self.estimator, plan.counting_key, compacted.compacted_summary or "", compacted.summary_elided
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


__all__ = [
    "CHECKPOINT_SEEDED",
    "CONTEXT_COMPACTED",
    "MAX_COMPACTIONS_PER_STEP",
    "ContextLoop",
    "Seed",
    "StartedRun",
    "StateUpdate",
    "whole_pairs",
]
