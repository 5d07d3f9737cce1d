"""The working-state writes of ``ContextLoop`` (SPEC section 7, ADR 0005): the control tool
and the runtime's question lifecycle, each transition one event and one checkpoint version,
in one transaction.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..core.canonical import payload_hash
from ..errors import ModelValidationError
from ..model import Checkpoint, Principal, RunContext, TrustLevel, WorkingState
from ..plan import ContextPlanner
from ..stores.events import Event, Lease, NewEvent, RawCheckpoint, Store, Visibility
from .working_state import WORKING_STATE_UPDATED, WorkingStateManager


def _key(prefix: str, payload: dict[str, Any]) -> str:
    return f"{prefix}:{payload_hash(payload)[:16]}"


def _source(value: TrustLevel | str) -> TrustLevel:
    try:
        return TrustLevel(value)
    except ValueError:
        raise ModelValidationError("ContextLoop", "source", f"unknown trust level {value!r}") from None


class WorkingStateWrites:
    """``update_working_state``, ``add_question`` and ``resolve_question`` of ``ContextLoop``."""

    store: Store
    planner: ContextPlanner
    working_state: WorkingStateManager

    async def _write(
        self, run: RunContext, checkpoint: Checkpoint, trigger: str, lease: Lease
    ) -> tuple[int, list[RawCheckpoint]]:
        raise NotImplementedError

    def _committed(self, run: RunContext, rows: list[RawCheckpoint], events: list[Event]) -> None:
        raise NotImplementedError

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
            stored = await self.store.events.append(event)
            version, rows = await self._write(run, updated, trigger, lease)
        self._committed(run, rows, [stored])
        return replace(updated, version=version)


__all__ = ["WorkingStateWrites"]
