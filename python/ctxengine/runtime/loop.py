"""The runtime port: pressure-driven compaction, working-state writes and run seeding
(SPEC sections 6-7, seed ADR-0043 decisions 6-8).

Every method that changes a run appends its event and writes the checkpoint
inside one ``store.transaction()``: both commit or neither does. A failure
leaves the caller's checkpoint in force (nothing the method built is
adopted) and the store as it was.

Derivation keys name what an event was derived from and end with a digest of
its payload, so a retried step repeats its event exactly (the store returns
the stored one) and a different step never collides with it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..assembly.builder import ContextBuilder
from ..assembly.request import ModelRequest
from ..core.canonical import payload_hash
from ..core.estimator import Estimator
from ..errors import ContextError, ContextOverflow, ModelValidationError
from ..model import (
    AgentSpec,
    Checkpoint,
    ConversationItem,
    Principal,
    ReasoningItem,
    RunContext,
    ToolCall,
    ToolResult,
    TrustLevel,
    UserMessage,
    WorkingState,
)
from ..plan import ContextPlan, ContextPlanner
from ..stores.events import Lease, NewEvent, Store, Visibility
from .checkpoints import latest_checkpoint, write_checkpoint
from .compaction import StructuredCompactor
from .session import session_history
from .usage import report_usage
from .working_state import WORKING_STATE_UPDATED, WorkingStateManager, carry_working_state

CONTEXT_COMPACTED = "context.compacted"
CHECKPOINT_SEEDED = "run.checkpoint.seeded"
#: Compactions one ``build_with_pressure`` call may perform before giving up.
MAX_COMPACTIONS_PER_STEP = 2


def _key(prefix: str, payload: dict[str, Any]) -> str:
    return f"{prefix}:{payload_hash(payload)[:16]}"


class ContextLoop:
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

    async def _plan(self, session_id: str) -> ContextPlan:
        plan = self.planner.cached(session_id) or await self.planner.current(session_id)
        if plan is None:
            raise ContextError(f"session {session_id!r} has no context plan; call planner.plan(...) first")
        return plan

    # -- pressure ------------------------------------------------------------------

    async def build_with_pressure(
        self, run: RunContext, checkpoint: Checkpoint, agent: AgentSpec, principal: Principal, *, lease: Lease
    ) -> tuple[ModelRequest, Checkpoint]:
        """The request for this step and the checkpoint in force.

        When the body does not fit and can be compacted: compact, then append
        ``context.compacted`` and write the compacted checkpoint (trigger
        ``compaction``) in one transaction, adopt it and measure again; at
        most ``MAX_COMPACTIONS_PER_STEP`` times, then ``ContextOverflow``.
        """
        plan = await self._plan(run.session_id)
        current = checkpoint
        compactions = 0
        while True:
            assembly = self.builder.assemble(run, current, agent, principal, plan=plan)
            pressure = assembly.pressure
            if pressure.fits:
                return assembly.request, current
            if not pressure.compactable or compactions >= MAX_COMPACTIONS_PER_STEP:
                detail = (
                    f"after {compactions} compaction(s) this step; compactable={pressure.compactable}; "
                    f"history cut at {pressure.history_cut}"
                )
                raise ContextOverflow(
                    pressure.reason, pressure.total_tokens, pressure.capacity_tokens, detail
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
            async with self.store.transaction():
                await self.store.events.append(event)
                version = await write_checkpoint(
                    self.store, run.run_id, compacted, trigger="compaction", lease=lease
                )
            # Adopted only once both are committed.
            current = replace(compacted, version=version)
            compactions += 1

    # -- working state -------------------------------------------------------------

    async def update_working_state(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        update: dict[str, Any],
        *,
        source: TrustLevel | str,
        lease: Lease,
        principal: Principal | None = None,
        trigger: str = "tool_completed",
    ) -> Checkpoint:
        """Apply a ``context.update_working_state`` input authored at trust ``source``.

        Validates, appends ``context.working_state.updated`` (the whole new
        state and the update) and writes the checkpoint, in one transaction.
        ``principal`` scopes the event's visibility to that principal (the
        carry reads principal-visible events); without one it is session-wide.
        """
        trust = _source(source)
        model_id = await self._model_id(run.session_id)
        state = self.working_state.transition(
            checkpoint.working_state, update, source_trust=trust, model_id=model_id
        )
        return await self._commit_state(
            run,
            checkpoint,
            state,
            {"operation": "update", "update": dict(update)},
            trust,
            lease,
            principal,
            trigger,
        )

    async def add_question(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        text: str,
        *,
        lease: Lease,
        question_id: str | None = None,
        source: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
        principal: Principal | None = None,
        trigger: str = "approval_requested",
    ) -> Checkpoint:
        """Open a question (the runtime's question lifecycle), recorded like any transition."""
        trust = _source(source)
        model_id = await self._model_id(run.session_id)
        state = self.working_state.add_question(
            checkpoint.working_state, text, question_id=question_id, trust=trust, model_id=model_id
        )
        record = {"operation": "add_question", "text": text, "question_id": question_id}
        return await self._commit_state(run, checkpoint, state, record, trust, lease, principal, trigger)

    async def resolve_question(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        question_id: str,
        *,
        lease: Lease,
        principal: Principal | None = None,
        trigger: str = "approval_resolved",
    ) -> Checkpoint:
        """Close an open question, recorded like any transition."""
        state = self.working_state.resolve_question(checkpoint.working_state, question_id)
        record = {"operation": "resolve_question", "question_id": question_id}
        return await self._commit_state(
            run, checkpoint, state, record, TrustLevel.PLATFORM, lease, principal, trigger
        )

    async def report_usage(
        self, run: RunContext, request: ModelRequest, actual: int, *, principal: Principal | None = None
    ) -> None:
        """After a model response: reconcile the estimator with the provider's count of
        ``request`` and record both for ``ctxengine inspect`` (``runtime.usage``)."""
        await report_usage(self.store, self.estimator, run, request, actual, principal=principal)

    async def _model_id(self, session_id: str) -> str:
        plan = self.planner.cached(session_id) or await self.planner.current(session_id)
        return plan.counting_key if plan is not None else self.working_state.model_id

    async def _commit_state(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        state: WorkingState,
        record: dict[str, Any],
        trust: TrustLevel,
        lease: Lease,
        principal: Principal | None,
        trigger: str,
    ) -> Checkpoint:
        payload = {
            "run_id": run.run_id,
            "base_version": checkpoint.version,
            "source": trust.value,
            **record,
            "state": state.to_dict(),
        }
        event = NewEvent(
            session_id=run.session_id,
            type=WORKING_STATE_UPDATED,
            payload=payload,
            derivation_key=_key(f"context.working_state:{run.run_id}:{checkpoint.version}", payload),
            run_id=run.run_id,
            actor="model" if trust is TrustLevel.EXTERNAL_UNTRUSTED else "runtime",
            visibility=Visibility.session()
            if principal is None
            else Visibility.principal(principal.principal_id),
        )
        updated = replace(checkpoint, working_state=state)
        async with self.store.transaction():
            await self.store.events.append(event)
            version = await write_checkpoint(self.store, run.run_id, updated, trigger=trigger, lease=lease)
        return replace(updated, version=version)

    # -- seeding -------------------------------------------------------------------

    async def build_seed(self, run: RunContext, principal: Principal | None) -> Checkpoint:
        """Version 1 of ``run`` rebuilt from the log (pure read; see ``seed_checkpoint``)."""
        items = await session_history(self.store, run.session_id, run.seed_sequence + 1)
        seed = items[-1] if items else None
        if not isinstance(seed, UserMessage) or seed.seq != run.seed_sequence:
            found = "nothing" if seed is None or seed.seq != run.seed_sequence else type(seed).__name__
            raise ModelValidationError(
                "RunContext",
                "seed_sequence",
                f"session {run.session_id!r} holds {found} at sequence {run.seed_sequence}, "
                "not a UserMessage",
            )
        state = await carry_working_state(self.store, run.session_id, run.seed_sequence, principal)
        # Reasoning is replayed within its own run only, never carried.
        history = whole_pairs([item for item in items[:-1] if not isinstance(item, ReasoningItem)])
        return Checkpoint(run.run_id, version=1, conversation=(*history, seed), working_state=state)

    async def seed_checkpoint(
        self, run: RunContext, principal: Principal | None, *, lease: Lease
    ) -> Checkpoint:
        """Build version 1 from the log and write it (with a ``run.checkpoint.seeded`` event).

        Idempotent: the log below the seed never changes, so the build is the
        same every time. When version 1 is already stored and equal, it is
        returned and nothing is written; a run that has moved past version 1
        is a ``ContextError`` (load it with ``latest_checkpoint`` instead).
        """
        built = await self.build_seed(run, principal)
        payload = {
            "run_id": run.run_id,
            "seed_sequence": run.seed_sequence,
            "history_items": len(built.conversation) - 1,
            "checkpoint_sha256": payload_hash(built.to_dict()),
        }
        event = NewEvent(
            session_id=run.session_id,
            type=CHECKPOINT_SEEDED,
            payload=payload,
            derivation_key=f"run.checkpoint.seeded:{run.run_id}",
            run_id=run.run_id,
        )
        async with self.store.transaction():
            existing = await latest_checkpoint(self.store, run.run_id)
            if existing is not None:
                if existing == built:
                    return existing
                raise ContextError(
                    f"run {run.run_id!r} already has checkpoint version {existing.version}; "
                    "seed_checkpoint only writes version 1"
                )
            await self.store.events.append(event)
            version = await write_checkpoint(self.store, run.run_id, built, trigger="seeded", lease=lease)
        return replace(built, version=version)


def whole_pairs(items: list[ConversationItem]) -> tuple[ConversationItem, ...]:
    """History without the halves of tool pairs that a crashed run left behind.

    A call whose result was never recorded (or a result whose call is missing)
    would make every later request invalid; the events stay in the log for
    audit, but a new run's seeded history leaves them out.
    """
    answered: set[str] = set()
    open_calls: dict[str, int] = {}
    keep = [True] * len(items)
    for i, item in enumerate(items):
        if isinstance(item, ToolCall):
            if item.call_id in open_calls or item.call_id in answered:
                keep[i] = False
            else:
                open_calls[item.call_id] = i
        elif isinstance(item, ToolResult):
            if open_calls.pop(item.call_id, None) is None:
                keep[i] = False
            else:
                answered.add(item.call_id)
    for i in open_calls.values():
        keep[i] = False
    return tuple(item for item, kept in zip(items, keep, strict=True) if kept)


def _source(value: TrustLevel | str) -> TrustLevel:
    try:
        return TrustLevel(value)
    except ValueError:
        raise ModelValidationError("ContextLoop", "source", f"unknown trust level {value!r}") from None


__all__ = ["CHECKPOINT_SEEDED", "CONTEXT_COMPACTED", "MAX_COMPACTIONS_PER_STEP", "ContextLoop"]
