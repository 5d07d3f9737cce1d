"""``ProtocolController``: the protocol's transitions as ``phase.*`` events, and projection.

The instance id is the session id of its events, so the protocol lives in
the same log (and the same store) as everything else, and any worker that
can read the log can continue it: every call folds the instance's events
afresh, decides, and appends one event.

Derivation keys are ``phase:{instance_id}:{n}`` for the n-th phase event.
Two workers deciding from the same state therefore collide on one key: the
same decision is stored once (the store returns the twin), a different one
is refused by the store and surfaces as ``ProtocolStateError``. A call that
repeats the instance's last transition (a retry after a lost reply) is
recognised by re-deciding it from the state before that event, and returns
the current state without writing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast

from ..core.estimator import Estimator, TokenEstimator
from ..errors import (
    ContextError,
    IdempotencyConflict,
    ModelValidationError,
    ProtocolStateError,
    StaleConfirmation,
)
from ..model import ToolSpec
from ..model.clock import Clock, SystemClock
from ..stores.events import NewEvent, Store
from .compiler import Projection, ProjectionCompiler
from .contracts import OperationContract
from .packs import InstructionPack
from .state import ProtocolState, Source
from .transitions import (
    PHASE_EVENT_TYPES,
    ChangeRequest,
    Command,
    Confirm,
    Record,
    Replay,
    Revise,
    Submit,
    decide,
    evolve,
    replay,
    same_decision,
)

ACTOR = "protocol-controller"


def derivation_key(instance_id: str, ordinal: int) -> str:
    return f"phase:{instance_id}:{ordinal}"


class ProtocolController:
    """Owns the canonical protocol state of every instance in ``store``.

    ``clock`` is accepted for the usual constructor shape, but no transition
    reads it: events are stamped by the store, and nothing time-dependent
    enters the state, so replays compile the same bytes.
    """

    def __init__(
        self,
        store: Store,
        *,
        estimator: Estimator | None = None,
        clock: Clock | None = None,
        packs: Mapping[str, InstructionPack] | None = None,
        contracts: Mapping[str, OperationContract] | None = None,
        model_id: str = "default",
        max_output_tokens: int = 8192,
        actor: str = ACTOR,
    ) -> None:
        self.store = store
        self.estimator: Estimator = estimator if estimator is not None else cast(Estimator, TokenEstimator())
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.actor = actor
        self.compiler = ProjectionCompiler(
            packs=packs,
            contracts=contracts,
            estimator=self.estimator,
            model_id=model_id,
            max_output_tokens=max_output_tokens,
        )

    # -- transitions ----------------------------------------------------------------

    async def submit(
        self,
        instance_id: str,
        request: str,
        *,
        sources: Iterable[Source] = (),
        constraints: Iterable[str] = (),
        tools: Iterable[ToolSpec] = (),
    ) -> ProtocolState:
        """Start an instance with its authoritative request and canonical inputs."""
        return await self._transition(
            instance_id, Submit(request, tuple(sources), tuple(constraints), tuple(tools))
        )

    async def record_artifact(self, instance_id: str, kind: str, body: str) -> ProtocolState:
        """Record the model's draft of ``kind`` as its next version, displayed to the user."""
        return await self._transition(instance_id, Record(kind, body))

    async def revise(
        self, instance_id: str, kind: str, feedback: str, *, displayed_version: int
    ) -> ProtocolState:
        """The user's feedback on the displayed version: that version is rejected and revised."""
        return await self._transition(instance_id, Revise(kind, feedback, displayed_version))

    async def confirm(
        self, instance_id: str, kind: str, *, version: int, digest: str, output_mode: str | None = None
    ) -> ProtocolState:
        """Confirm the displayed version, named by version and digest (else ``StaleConfirmation``)."""
        return await self._transition(instance_id, Confirm(kind, version, digest, output_mode))

    async def change_request(self, instance_id: str, feedback: str) -> ProtocolState:
        """A semantic change during plan review: the plan is rejected, the prompt is revised."""
        return await self._transition(instance_id, ChangeRequest(feedback))

    async def state(self, instance_id: str) -> ProtocolState:
        """The instance's state, rebuilt from the log."""
        state = (await self._load(instance_id)).state
        if state is None:
            raise ProtocolStateError(f"instance {instance_id!r} has not been submitted")
        return state

    # -- projection -------------------------------------------------------------------

    def project(self, state: ProtocolState, operation: str) -> Projection:
        """The stateless context of ``operation`` (pure: no store access)."""
        return self.compiler.compile(state, operation)

    # -- internals ----------------------------------------------------------------------

    async def _load(self, instance_id: str) -> Replay:
        if not isinstance(instance_id, str) or not instance_id:
            raise ModelValidationError(
                "ProtocolController", "instance_id", f"expected a non-empty str, got {instance_id!r}"
            )
        events = await self.store.events.read(instance_id, types=PHASE_EVENT_TYPES)
        return replay(instance_id, events)

    async def _transition(self, instance_id: str, command: Command) -> ProtocolState:
        loaded = await self._load(instance_id)
        try:
            event_type, payload = decide(loaded.state, command)
        except (ProtocolStateError, StaleConfirmation):
            if self._is_retry(loaded, command):
                assert loaded.state is not None
                return loaded.state
            raise
        ordinal = len(loaded.state.history) + 1 if loaded.state is not None else 1
        event = NewEvent(
            instance_id, event_type, payload, derivation_key(instance_id, ordinal), actor=self.actor
        )
        try:
            stored = await self.store.events.append(event)
        except IdempotencyConflict as exc:
            raise ProtocolStateError(
                f"instance {instance_id!r}: transition {ordinal} was recorded concurrently by another worker "
                "with a different outcome; reload the state"
            ) from exc
        return evolve(loaded.state, instance_id, stored.type, stored.payload, stored.sequence)

    @staticmethod
    def _is_retry(loaded: Replay, command: Command) -> bool:
        if loaded.last is None:
            return False
        try:
            again = decide(loaded.previous, command)
        except ContextError:
            return False
        return same_decision(again, (loaded.last.type, loaded.last.payload))


__all__ = ["ACTOR", "ProtocolController", "derivation_key"]
