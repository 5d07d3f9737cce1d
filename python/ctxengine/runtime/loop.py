"""The runtime port (SPEC sections 6-7, seed ADR-0043 decisions 6-8, ADR 0011, ADR 0015):
what an agent runtime calls between model requests.

``ContextLoop`` is the API; each of its parts holds one concept:

- ``loop_runs.RunStarts``: a run's version 1, seeded from the session's window
  (``start_run``, ``pick_up``);
- ``loop_pressure.Compactions``: a request built, compacting under pressure
  (``build_with_pressure``);
- ``loop_steps.StepWrites``: a step's items recorded (``record_step``);
- ``loop_state.WorkingStateWrites``: working-state transitions;
- ``loop_writes.RunWrites``: the checkpoint write they share and what a worker
  notes after a commit; ``windows.Windows``: the worker's session windows.

Every method that changes a run appends its event and writes the checkpoint
inside one ``store.transaction()``: both commit or neither does. A failure
leaves the caller's checkpoint in force (nothing the method built is
adopted) and the store as it was.

Derivation keys name what an event was derived from and end with a digest of
its payload, so a retried step repeats its event exactly (the store returns
the stored one) and a different step never collides with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..assembly.builder import ContextBuilder
from ..assembly.request import ModelRequest
from ..core import telemetry
from ..core.estimator import Estimator
from ..errors import ModelValidationError
from ..model import AgentSpec, Checkpoint, ConversationItem, Principal, RunContext, TrustLevel, UserMessage
from ..plan import ContextPlanner
from ..stores.events import Lease, Store, Visibility
from .commits import Commits
from .compaction_record import Compactor
from .loop_pressure import CONTEXT_COMPACTED, MAX_COMPACTIONS_PER_STEP, Compactions
from .loop_runs import CHECKPOINT_SEEDED, RunStarts, StartedRun
from .loop_state import WorkingStateWrites
from .loop_steps import StepWrites
from .loop_writes import RunWrites
from .seeding import Seed, whole_pairs
from .steps import StateUpdate
from .usage import report_usage
from .windows import Windows
from .working_state import WorkingStateManager


def _seeded(span: telemetry.SpanLike, checkpoint: Checkpoint) -> None:
    """A seed span's outcome: version 1's size and where its carry left off."""
    if span.is_recording():
        telemetry.set_attributes(
            span,
            {
                "items": len(checkpoint.conversation),
                "replaced_through_sequence": checkpoint.replaced_through_sequence,
                "carried": checkpoint.compacted_summary is not None,
            },
        )


class ContextLoop:
    """What the agent runtime calls between model requests."""

    def __init__(
        self,
        store: Store,
        *,
        planner: ContextPlanner,
        builder: ContextBuilder,
        compactor: Compactor,
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
        #: Commits in one call where the store takes predictions (ADR 0013).
        self.commits = Commits(store)
        # The parts, one concept each; they read the loop's settings above when they run.
        self.writes = RunWrites(self)
        self.runs = RunStarts(self)
        self.steps = StepWrites(self)
        self.states = WorkingStateWrites(self)
        self.pressure = Compactions(self)

    # -- a run's start ----------------------------------------------------------------

    async def start_run(
        self,
        session_id: str,
        run_id: str,
        message: UserMessage,
        principal: Principal | None,
        *,
        owner: str,
        derivation_key: str | None = None,
        visibility: Visibility | None = None,
        max_output_tokens: int | None = None,
    ) -> StartedRun:
        """Start a run in one transaction: append its user message (with its token count),
        claim the run for ``owner`` and write its version 1 (as ``pick_up``).

        The same as ``append_item`` + ``pick_up``, with one commit instead of two.
        ``derivation_key`` makes a retry append nothing new.
        """
        with telemetry.span("ctxengine.seed", session_id=session_id, run_id=run_id, step=0) as span:
            started = await self.runs.start(
                session_id,
                run_id,
                message,
                principal,
                owner=owner,
                derivation_key=derivation_key,
                visibility=visibility,
                max_output_tokens=max_output_tokens,
            )
            _seeded(span, started.checkpoint)
        return started

    async def pick_up(self, run: RunContext, principal: Principal | None, *, owner: str) -> StartedRun:
        """Claim ``run`` for ``owner`` and write its version 1 (built from the log), in one
        transaction: what a worker does with a run whose user message is logged already,
        with one commit instead of two (one call on PostgreSQL). A retry claims again (the
        next lease epoch) and gets the stored version 1 back.

        Idempotent: the log below the seed never changes, so the build is the
        same every time. When version 1 is already stored and equal, it is
        returned and nothing is written; a run that has moved past version 1
        is a ``ContextError`` (load it with ``latest_checkpoint`` instead).
        Counts this worker had to compute (none were stored) are stored in the
        same transaction.
        """
        with telemetry.span("ctxengine.seed", session_id=run.session_id, run_id=run.run_id, step=0) as span:
            lease, checkpoint = await self.runs.seed_commit(run, principal, owner)
            _seeded(span, checkpoint)
        return StartedRun(run, lease, checkpoint)

    async def _seed_checkpoint(
        self, run: RunContext, principal: Principal | None, *, lease: Lease
    ) -> Checkpoint:
        """``pick_up`` under a lease claimed already (tests hold the lease themselves)."""
        _, checkpoint = await self.runs.seed_commit(run, principal, lease)
        return checkpoint

    async def _build_seed(self, run: RunContext, principal: Principal | None) -> Checkpoint:
        """Version 1 of ``run`` rebuilt from the log (a pure read, for tests)."""
        return (await self.runs.seed(run, principal)).checkpoint

    # -- a step ----------------------------------------------------------------------

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
        return await self.pressure.build(run, checkpoint, agent, principal, lease=lease)

    async def record_step(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        items: Sequence[ConversationItem],
        *,
        lease: Lease,
        trigger: str = "model_response",
        state_updates: Sequence[StateUpdate] = (),
        principal: Principal | None = None,
        visibility: Visibility | None = None,
    ) -> Checkpoint:
        """Append the step's items and working-state transitions and write the checkpoint,
        in one transaction; returns the checkpoint in force.

        ``items`` are the model's response items and the tool calls' results, in the
        order they happened; ``state_updates`` the control tool's inputs (applied in
        order to the checkpoint's working state, one ``context.working_state.updated``
        event each, scoped to ``principal`` when given). Derivation keys come from the
        run, ``run.step`` and the position (``conversation.item:{run}:{step}:{i}``), so a
        retried step repeats its events exactly and writes nothing new: when every
        event was already stored, the stored checkpoint is returned as it is. The
        items' raw token counts are stored with them. A terminal trigger prunes the
        run's earlier checkpoint versions (``prune_finished``).
        """
        with telemetry.span(
            "ctxengine.record", session_id=run.session_id, run_id=run.run_id, step=run.step, items=len(items)
        ) as span:
            recorded = await self.steps.record(
                run,
                checkpoint,
                items,
                lease=lease,
                trigger=trigger,
                state_updates=state_updates,
                principal=principal,
                visibility=visibility,
            )
            span.set_attribute("ctxengine.version", recorded.version)
        return recorded

    async def report_usage(
        self,
        run: RunContext,
        request: ModelRequest,
        actual: int,
        *,
        principal: Principal | None = None,
        cached_read: int | None = None,
        cache_write: int | None = None,
    ) -> None:
        """After a model response: reconcile the estimator with the provider's count of
        ``request`` and record both for ``ctxengine inspect`` (``runtime.usage``), with the
        input tokens its prompt cache served and wrote when given (ADR 0020)."""
        with telemetry.span(
            "ctxengine.usage",
            session_id=run.session_id,
            run_id=run.run_id,
            step=run.step,
            estimated=request.metadata.get("total_tokens"),
            actual=actual,
        ):
            await report_usage(
                self.store,
                self.estimator,
                run,
                request,
                actual,
                principal=principal,
                cached_read=cached_read,
                cache_write=cache_write,
            )

    # -- working state ---------------------------------------------------------------

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
        return await self.states.update(
            run, checkpoint, update, source=source, lease=lease, principal=principal, trigger=trigger
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
        return await self.states.add_question(
            run,
            checkpoint,
            text,
            lease=lease,
            question_id=question_id,
            source=source,
            principal=principal,
            trigger=trigger,
        )

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
        return await self.states.resolve_question(
            run, checkpoint, question_id, lease=lease, principal=principal, trigger=trigger
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
