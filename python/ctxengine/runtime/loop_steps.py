"""Recording a step (issue 13, ADR 0011): a step's items and working-state transitions
appended and the run's checkpoint written, in one transaction (one call where the store
takes a prediction, ADR 0013).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from ..errors import IdempotencyConflict
from ..model import Checkpoint, ConversationItem, Principal, RunContext
from ..stores.events import Event, Lease, NewEvent, RawCheckpoint, Visibility
from .checkpoints import evolve, latest_checkpoint
from .request_records import BuiltRequest, record_event, record_payload, writes_records
from .seeding import HISTORY, history_counts
from .steps import StateUpdate, prepare_step
from .window import RunMemo

if TYPE_CHECKING:
    from .loop import ContextLoop


class _Recorded(NamedTuple):
    """What a step's write block committed (``record_step``)."""

    stored: list[Event]
    #: The request record appended with the step (``request_records``), if any.
    extra: list[Event]
    written: int
    appended: list[ConversationItem]
    updated: Checkpoint
    version: int
    rows: list[RawCheckpoint]


class StepWrites:
    """A loop's step records."""

    def __init__(self, loop: ContextLoop) -> None:
        self.loop = loop

    async def record(
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
        """``ContextLoop.record_step``."""
        loop = self.loop
        plan = await loop.writes.plan_or_none(run.session_id)
        model_id = plan.counting_key if plan is not None else loop.working_state.model_id
        steps = prepare_step(
            run, checkpoint, items, state_updates, loop.working_state, model_id, principal, visibility
        )
        counts: list[tuple[int, int]] = []
        memo = loop.writes.memo(run)
        record = self._record(run, memo)

        async def body(predicted: bool) -> _Recorded | Checkpoint:
            try:
                stored, written = await loop.store.events.append_all(steps.events)
            except IdempotencyConflict as exc:
                raise _step_reused(run, exc) from exc
            if not written and steps.events:
                latest = await latest_checkpoint(loop.store, run.run_id)
                if latest is not None and latest.version > checkpoint.version:
                    return latest  # a retry of a step already recorded: nothing new
            appended = steps.appended(run.session_id, stored)
            extra: list[Event] = []
            if record is not None:  # in the step's write block: queued with it when predicted
                extra, n = await loop.store.events.append_all([record])
                written += n
            pending = memo.pending
            counts.clear()
            if plan is not None and (appended or pending):
                counter = loop.estimator.counter_id(plan.counting_key, HISTORY)
                counts.extend(history_counts(loop.estimator, plan.counting_key, appended))
                await loop.store.events.put_counts(run.session_id, counter, [*pending, *counts])
            conversation = (*checkpoint.conversation, *appended)
            last = next((i.seq for i in reversed(checkpoint.conversation) if i.seq is not None), None)
            if appended and last is not None and appended[0].seq is not None and last < appended[0].seq:
                # New events follow everything the checkpoint holds: nothing to check again.
                updated = evolve(checkpoint, conversation=conversation, working_state=steps.state)
            else:
                updated = replace(checkpoint, conversation=conversation, working_state=steps.state)
            version, rows = await loop.writes.write(
                run,
                updated,
                trigger,
                lease,
                prune=loop.prune_finished,
                appended=stored,
                appended_items=appended,
            )
            return _Recorded(stored, extra, written, appended, updated, version, rows)

        done = await loop.commits.run(
            body,
            session_id=run.session_id,
            run_id=run.run_id,
            next_sequence=loop.windows.next_sequence(run.session_id),
            version=loop.writes.next_version(run, checkpoint.version),
        )
        if isinstance(done, Checkpoint):
            return done
        stored, extra, written, appended, updated, version, rows = done
        memo.pending = []
        if record is not None:
            memo.built = None
        events = [*stored, *extra]
        fresh = written == len(events)  # all new: this worker knows exactly what it wrote
        tokens = dict(counts)
        item_rows = [steps.item_row(stored, i, tokens.get(item.seq or 0)) for i, item in enumerate(appended)]
        loop.writes.committed(run, rows, events if fresh else [], item_rows, appended)
        return evolve(updated, version=version)

    def _record(self, run: RunContext, memo: RunMemo) -> NewEvent | None:
        """The record of the request this step answers: the one the loop built last for the
        run at this step, when this deployment writes format 6 (made before the write block)."""
        built = memo.built
        loop = self.loop
        if not isinstance(built, BuiltRequest) or not writes_records(loop.store):
            return None
        if (built.run.run_id, built.run.step) != (run.run_id, run.step):
            return None
        window = loop.windows.get(run.session_id)
        payload = record_payload(
            built,
            loop.builder,
            loop.estimator,
            carry=memo.seeded[0] if memo.seeded is not None else None,
            items=loop.windows.item_sequences(run.session_id),
            memo=window if window is not None and window.known and loop.writes.fold_refs else None,
        )
        return record_event(payload, built.run, built.principal)


def _step_reused(run: RunContext, exc: IdempotencyConflict) -> IdempotencyConflict:
    """A step's keys are its run, step number and positions: a conflict on one means the
    step number was recorded before with other items, most often a caller that did not advance it."""
    return IdempotencyConflict(
        f"{exc}: step {run.step} of run {run.run_id!r} was already recorded with other items; "
        "each new step needs its own step number: advance it with "
        "dataclasses.replace(run, step=run.step + 1) before record_step "
        "(a retried step must repeat its items exactly)"
    )


__all__ = ["StepWrites"]
