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

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..assembly.builder import ContextBuilder
from ..assembly.request import ModelRequest
from ..core.canonical import canonical_json, payload_hash
from ..core.estimator import Estimator
from ..errors import ContextError, ContextOverflow, ModelValidationError
from ..model import (
    AgentSpec,
    Checkpoint,
    ConversationItem,
    Principal,
    RunContext,
    UserMessage,
)
from ..plan import ContextPlan, ContextPlanner
from ..stores.events import Event, ItemRow, Lease, NewEvent, RawCheckpoint, Store, Visibility, interned
from ..stores.formats import WritePolicy
from .carry import CARRY_RECORDED, Carry, CarryCache, carry_payload, carry_visibility
from .checkpoint_memo import RefMemo
from .checkpoints import checkpoint_from_rows, evolve, write_checkpoint
from .commits import Commits
from .compaction import CompactionResult, StructuredCompactor
from .history_reader import HistoryReader
from .loop_state import WorkingStateWrites
from .loop_steps import StepWrites
from .seed_digest import SeedDigest
from .seeding import Seed, build_seed, history_counts, summary_counts, whole_pairs
from .session import ITEM_APPENDED, item_event, logged
from .steps import StateUpdate
from .usage import report_usage
from .working_state import WorkingStateManager

CONTEXT_COMPACTED = "context.compacted"
CHECKPOINT_SEEDED = "run.checkpoint.seeded"
#: Compactions one ``build_with_pressure`` call may perform before giving up.
MAX_COMPACTIONS_PER_STEP = 2
#: Runs whose seed the loop remembers (their own carries need its lineage and view).
SEEDS_REMEMBERED = 4096


def _key(prefix: str, payload: dict[str, Any]) -> str:
    return f"{prefix}:{payload_hash(payload)[:16]}"


class StartedRun(NamedTuple):
    """What ``start_run`` returns: the run, its lease and its version 1."""

    run: RunContext
    lease: Lease
    checkpoint: Checkpoint


class ContextLoop(StepWrites, WorkingStateWrites):
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
        history: HistoryReader | None = None,
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
        #: Item rows this worker has read, per session (seeds read only what is new).
        self.history = history if history is not None else HistoryReader(store)
        #: Per run seeded here: the carry it started from and the principal it was seeded for.
        self._seeded_from: OrderedDict[str, tuple[Carry | None, Principal | None]] = OrderedDict()
        self._carries = CarryCache()
        #: The hash state of each session's last seeded conversation (``SeedDigest``).
        self._seed_digest = SeedDigest()
        #: Per run: the checkpoint rows this loop last wrote (a delta needs no read of its base).
        self._rows: OrderedDict[str, list[RawCheckpoint]] = OrderedDict()
        #: The last reference checkpoint of each run and session (a write folds what is new).
        self._refs = RefMemo()
        #: Commits in one call where the store takes predictions (ADR 0013).
        self.commits = Commits(store)
        #: Per run started here: the seed message's count, stored with the run's first step.
        self._pending_counts: OrderedDict[str, list[tuple[int, int]]] = OrderedDict()

    async def _write(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        trigger: str,
        lease: Lease,
        *,
        rows: list[RawCheckpoint] | None = None,
        prune: bool = False,
    ) -> tuple[int, list[RawCheckpoint]]:
        """Write the run's next checkpoint version inside the caller's transaction."""
        if rows is None:
            known = self._rows.get(run.run_id)
            if known and known[-1]["version"] == checkpoint.version:
                rows = known  # what this loop wrote last: the store refuses it if stale
        written: list[RawCheckpoint] = []
        version = await write_checkpoint(
            self.store,
            run.run_id,
            checkpoint,
            trigger=trigger,
            lease=lease,
            session_id=run.session_id,
            prune=prune,
            rows=rows,
            joined=True,
            into=written,
            carry=self._seeded_from.get(run.run_id, (None, None))[0],
            memo=self._refs,
        )
        return version, written

    def _next_version(self, run_id: str, version: int) -> int | None:
        """The version after ``version`` when this loop wrote the run's last rows at it (so
        a write needs no read of them), else ``None``."""
        known = self._rows.get(run_id)
        return version + 1 if known and known[-1]["version"] == version else None

    def _committed(
        self,
        run: RunContext,
        rows: list[RawCheckpoint],
        events: Sequence[Event],
        item_rows: Sequence[ItemRow] = (),
        items: Sequence[ConversationItem] = (),
    ) -> None:
        """After a commit: remember the run's rows, and hand the history reader what this
        worker just wrote (so the next seed need not read it back)."""
        self._rows[run.run_id] = rows
        self._rows.move_to_end(run.run_id)
        while len(self._rows) > SEEDS_REMEMBERED:
            self._rows.popitem(last=False)
        if events:
            self.history.extend(run.session_id, [e.sequence for e in events], item_rows, items)
            self.history.marks.committed(run.session_id, events)

    async def _plan(self, session_id: str) -> ContextPlan:
        plan = await self._plan_or_none(session_id)
        if plan is None:
            raise ContextError(f"session {session_id!r} has no context plan; call planner.plan(...) first")
        return plan

    async def _plan_or_none(self, session_id: str) -> ContextPlan | None:
        return self.planner.cached(session_id) or await self.planner.current(session_id)

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
            next_sequence=self.history.next_sequence(run.session_id),
            version=self._next_version(run.run_id, current.version),
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
        if not self._policy().allows(CARRY_RECORDED) or run.run_id not in self._seeded_from:
            return None
        seeded, writer = self._seeded_from[run.run_id]
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

    # -- seeding -------------------------------------------------------------------

    async def build_seed(self, run: RunContext, principal: Principal | None) -> Checkpoint:
        """Version 1 of ``run`` rebuilt from the log (pure read; see ``seed_checkpoint``)."""
        seed = await self._seed(run, principal)
        return seed.checkpoint

    async def _seed(self, run: RunContext, principal: Principal | None) -> Seed:
        plan = self.planner.cached(run.session_id) or await self.planner.current(run.session_id)
        seed = await build_seed(self.store, self.history, self.builder, plan, run, principal, self._carries)
        self._remember_seed(run.run_id, seed.carry, principal)
        return seed

    async def seed_checkpoint(
        self, run: RunContext, principal: Principal | None, *, lease: Lease
    ) -> Checkpoint:
        """Build version 1 from the log and write it (with a ``run.checkpoint.seeded`` event).

        Idempotent: the log below the seed never changes, so the build is the
        same every time. When version 1 is already stored and equal, it is
        returned and nothing is written; a run that has moved past version 1
        is a ``ContextError`` (load it with ``latest_checkpoint`` instead).
        Counts this worker had to compute (none were stored) are stored in the
        same transaction.
        """
        # Built before the write transaction: reading and decoding the window does not
        # hold the store's write lock (the log below the seed never changes).
        seed = await self._seed(run, principal)

        async def body(predicted: bool) -> tuple[Checkpoint, list[Event], list[RawCheckpoint]]:
            # Predicted: a run at its first lease has no checkpoint yet, or the store refuses
            # version 1 and the ordinary path reads what is there.
            rows = [] if predicted else await self.store.checkpoints.latest_raw(run.run_id)
            return await self._seed_and_write(run, principal, lease, rows, seed)

        checkpoint, events, written = await self.commits.run(
            body,
            session_id=run.session_id,
            run_id=run.run_id,
            next_sequence=self.history.next_sequence(run.session_id),
            version=1 if lease.epoch == 1 else None,
        )
        if events:
            self._committed(run, written, events)
        return checkpoint

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
        claim the run for ``owner`` and write its version 1 (``seed_checkpoint``).

        The same as ``append_item`` + ``checkpoints.claim`` + ``seed_checkpoint``, with one
        commit instead of three. ``derivation_key`` makes a retry append nothing new.
        """
        plan = await self._plan_or_none(session_id)
        new, restored = item_event(
            session_id, message, principal=principal, derivation_key=derivation_key, visibility=visibility
        )
        counts: list[tuple[int, int]] = []
        appended: list[int] = []

        async def body(
            predicted: bool,
        ) -> tuple[list[Event], RunContext, Lease, Checkpoint, list[Event], list[RawCheckpoint]]:
            stored, fresh = await self.store.events.append_all([new])
            seed = logged(restored, session_id, stored[0].sequence)
            counts.clear()
            if plan is not None:
                # Stored with the run's first recorded step (one statement fewer); a run
                # that records nothing leaves it to the next seed, which counts what lacks one.
                counts.extend(history_counts(self.estimator, plan.counting_key, [seed]))
            if fresh:  # the seed need not read back what it has just appended
                text = canonical_json(new.payload).decode("utf-8")
                count = counts[0][1] if counts else None
                row = ItemRow(seed.seq or 0, text, interned(new.visibility), count)
                self.history.extend(session_id, [row.sequence], [row], [seed])
                appended[:] = [row.sequence]
            run = RunContext(run_id, session_id, stored[0].sequence, max_output_tokens=max_output_tokens)
            lease = await self.store.checkpoints.claim(run_id, owner)
            # A run's first lease: it has no checkpoint to find.
            rows = [] if lease.epoch == 1 else await self.store.checkpoints.latest_raw(run_id)
            checkpoint, events, written = await self._seed_and_write(run, principal, lease, rows)
            return stored, run, lease, checkpoint, events, written

        def retract() -> None:  # the predicted message was not committed
            if appended:
                self.history.retract(session_id, appended.pop())

        try:
            stored, run, lease, checkpoint, events, written = await self.commits.run(
                body,
                session_id=session_id,
                run_id=run_id,
                next_sequence=self.history.next_sequence(session_id),
                version=1,
                on_miss=retract,
            )
        except BaseException:
            self.history.forget(session_id)  # it may have read rows that were rolled back
            raise
        # The seed read the user message into the history window already.
        self.history.marks.committed(session_id, stored)
        self._committed(run, written, events)
        if counts:
            self._pending_counts[run.run_id] = counts
            while len(self._pending_counts) > SEEDS_REMEMBERED:
                self._pending_counts.popitem(last=False)
        return StartedRun(run, lease, checkpoint)

    async def _seed_and_write(
        self,
        run: RunContext,
        principal: Principal | None,
        lease: Lease,
        rows: list[RawCheckpoint],
        seed: Seed | None = None,
    ) -> tuple[Checkpoint, list[Event], list[RawCheckpoint]]:
        """Version 1 built and written inside the caller's transaction (see ``seed_checkpoint``):
        the checkpoint, the events appended and the run's rows after the write."""
        if seed is None:
            seed = await self._seed(run, principal)
        built = seed.checkpoint
        # The hash of built.to_dict(), continued from this session's previous seed when it can be.
        shell = evolve(built, conversation=()).to_dict()
        payload = {
            "run_id": run.run_id,
            "seed_sequence": run.seed_sequence,
            "history_items": len(built.conversation) - 1,
            "checkpoint_sha256": self._seed_digest.digest(run.session_id, shell, built.conversation),
        }
        event = NewEvent(
            session_id=run.session_id,
            type=CHECKPOINT_SEEDED,
            payload=payload,
            derivation_key=f"run.checkpoint.seeded:{run.run_id}",
            run_id=run.run_id,
        )
        existing = await checkpoint_from_rows(self.store, run.run_id, rows)
        if existing is not None:
            if existing == built:
                return existing, [], rows
            raise ContextError(
                f"run {run.run_id!r} already has checkpoint version {existing.version}; "
                "seed_checkpoint only writes version 1"
            )
        stored, _ = await self.store.events.append_all([event])
        if seed.backfill and seed.counter is not None:
            await self.store.events.put_counts(run.session_id, seed.counter, seed.backfill)
            self.history.record_tokens(run.session_id, seed.counter, dict(seed.backfill))
        version, written = await self._write(run, built, "seeded", lease, rows=rows)
        return evolve(built, version=version), stored, written

    def _remember_seed(self, run_id: str, carry: Carry | None, principal: Principal | None) -> None:
        self._seeded_from[run_id] = (carry, principal)
        self._seeded_from.move_to_end(run_id)
        while len(self._seeded_from) > SEEDS_REMEMBERED:
            self._seeded_from.popitem(last=False)


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
