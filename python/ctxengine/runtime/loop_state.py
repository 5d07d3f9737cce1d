"""Working-state writes (SPEC section 7, ADR 0005): the control tool and the runtime's
question lifecycle, each transition one event and one checkpoint version, in one transaction.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..core.canonical import payload_hash
from ..errors import ModelValidationError
from ..model import Checkpoint, Principal, RunContext, TrustLevel, WorkingState
from ..stores.events import Lease, NewEvent, Visibility
from .working_state import WORKING_STATE_UPDATED

if TYPE_CHECKING:
    from .loop import ContextLoop


def _key(prefix: str, payload: dict[str, Any]) -> str:
    return f"{prefix}:{payload_hash(payload)[:16]}"


def _source(value: TrustLevel | str) -> TrustLevel:
    try:
        return TrustLevel(value)
    except ValueError:
        raise ModelValidationError("ContextLoop", "source", f"unknown trust level {value!r}") from None


class WorkingStateWrites:
    """A loop's working-state transitions."""

    def __init__(self, loop: ContextLoop) -> None:
        self.loop = loop

    async def update(
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
        """``ContextLoop.update_working_state``."""
        trust = _source(source)
        model_id = await self._model_id(run.session_id)
        state = self.loop.working_state.transition(
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
        state = self.loop.working_state.add_question(
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
        state = self.loop.working_state.resolve_question(checkpoint.working_state, question_id)
        record = {"operation": "resolve_question", "question_id": question_id}
        return await self._commit_state(
            run, checkpoint, state, record, TrustLevel.PLATFORM, lease, principal, trigger
        )

    async def _model_id(self, session_id: str) -> str:
        plan = await self.loop.writes.plan_or_none(session_id)
        return plan.counting_key if plan is not None else self.loop.working_state.model_id

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
        loop = self.loop
        async with loop.store.transaction():
            stored = await loop.store.events.append(event)
            version, rows = await loop.writes.write(run, updated, trigger, lease)
        loop.writes.committed(run, rows, [stored])
        return replace(updated, version=version)


__all__ = ["WorkingStateWrites"]
