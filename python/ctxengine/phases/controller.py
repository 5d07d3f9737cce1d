"""``ProtocolController``: the protocol's transitions as ``phase.*`` events, and projection.

The instance id is the session id of its events, so the protocol lives in
the same log (and the same store) as everything else, and any worker that
can read the log can continue it. A controller keeps the fold of the
instances it used last (``max_cached_instances``, least recently used go
first): every call reads only the events after the last one it folded,
checks and folds them, decides, and appends one event. Another worker's
events are therefore seen on the next call, as before; inside a caller's
``store.transaction()`` (which may roll back) the instance is folded afresh
and nothing is kept.

Every text a call would write is checked first, before the log is read
(``state.check_text``): a lone surrogate is ``CanonicalizationError`` and a
text over ``max_text_bytes`` UTF-8 bytes ``FieldTooLarge``, both naming the
call and the field, and nothing is written.

Derivation keys are ``phase:{instance_id}:{n}`` for the n-th phase event.
Two workers deciding from the same state therefore collide on one key: the
same decision is stored once (the store returns the twin), a different one
is refused by the store and surfaces as ``ProtocolStateError``. A call that
repeats the instance's last transition (a retry after a lost reply) is
recognised by re-deciding it from the state before that event, and returns
the current state without writing.

A model reply (a draft, a review verdict, an input request, a result) names
the ``projection_sha256`` of the projection it answers, and is accepted only
if that is the projection the controller compiles from the current state
now; a late reply to an earlier projection is ``StaleConfirmation``. A user
decision names what the user was shown (version and digest, or the input
request's number). A call that omits such a name is ``ProtocolStateError``.
"""

from __future__ import annotations

from collections import OrderedDict
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
from ..stores._rows import in_transaction
from ..stores.events import NewEvent, Store
from .commands import (
    PHASE_EVENT_TYPES,
    SUBMITTED,
    ChangeRequest,
    Command,
    Complete,
    Confirm,
    Fail,
    Interpret,
    ProvideInput,
    Record,
    RequestInput,
    Review,
    Revise,
    Stop,
    Submit,
    payload_format,
)
from .compiler import Projection, ProjectionCompiler
from .contracts import OperationContract
from .decide import decide, require_named, same_decision
from .packs import InstructionPack
from .state import PROTOCOL_VERSION, PROTOCOL_VERSIONS, ProtocolState, Source, check_text
from .transitions import PhaseFold

ACTOR = "protocol-controller"
#: ``ProtocolController``'s default ``max_text_bytes``: the longest request, constraint, draft,
#: feedback, question, answer, result or reason a call accepts, in UTF-8 bytes.
DEFAULT_MAX_TEXT_BYTES = 4 << 20
#: ``ProtocolController``'s default ``max_cached_instances``: how many instances' folds it keeps.
DEFAULT_MAX_CACHED_INSTANCES = 256


def derivation_key(instance_id: str, ordinal: int) -> str:
    return f"phase:{instance_id}:{ordinal}"


class ProtocolController:
    """Owns the canonical protocol state of every instance in ``store``.

    ``clock`` is accepted for the usual constructor shape, but no transition
    reads it: events are stamped by the store, and nothing time-dependent
    enters the state, so replays compile the same bytes.

    ``max_text_bytes`` bounds every text a call writes (the request, each
    constraint, a draft's body, feedback, a question, an answer, a result, a
    reason; not a source's content): a longer one is ``FieldTooLarge`` and
    nothing is written. Lowering it never affects what is stored already.
    ``max_cached_instances`` is how many instances' folded states the
    controller keeps (0: none, every call replays the log).
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
        protocol_version: int | None = None,
        max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
        max_cached_instances: int = DEFAULT_MAX_CACHED_INSTANCES,
    ) -> None:
        for name, value, least in (
            ("max_text_bytes", max_text_bytes, 1),
            ("max_cached_instances", max_cached_instances, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ModelValidationError(
                    "ProtocolController", name, f"expected an int of at least {least}, got {value!r}"
                )
        self.max_text_bytes = max_text_bytes
        self.max_cached_instances = max_cached_instances
        self._folds: OrderedDict[str, PhaseFold] = OrderedDict()
        if protocol_version is None:
            # A deployment that still writes format 1 (ADR 0009) submits version-1 instances.
            policy = getattr(store, "write_policy", None)
            allows_v2 = policy is None or policy.allows(SUBMITTED, 2)
            protocol_version = PROTOCOL_VERSION if allows_v2 else 1
        if protocol_version not in PROTOCOL_VERSIONS or isinstance(protocol_version, bool):
            raise ModelValidationError(
                "ProtocolController",
                "protocol_version",
                f"unknown protocol version {protocol_version!r}; expected one of {PROTOCOL_VERSIONS}",
            )
        #: The version new instances are submitted at. Pin it to 1 while workers that predate
        #: format 2 still read the store: version-1 instances write only format-1 rows until
        #: they use a transition format 1 lacks.
        self.protocol_version = protocol_version
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
        sources, constraints = tuple(sources), tuple(constraints)
        self._check_texts("submit", request=request)
        self._check_texts("submit", **{f"constraints[{i}]": c for i, c in enumerate(constraints)})
        for i, source in enumerate(sources):
            if isinstance(source, Source):
                for key, text in source.to_dict().items():
                    check_text("submit", f"sources[{i}].{key}", text, None)
        return await self._transition(
            instance_id, Submit(request, sources, constraints, tuple(tools), self.protocol_version)
        )

    async def record_artifact(
        self, instance_id: str, kind: str, body: str, *, projection_sha256: str | None = None
    ) -> ProtocolState:
        """Record the model's draft of ``kind`` as its next version, displayed to the user.

        ``projection_sha256`` names the projection the draft answers (the
        ``draft_*`` or ``revise_*`` projection of the current stage); a reply
        to any other projection is ``StaleConfirmation``, and omitting it is
        ``ProtocolStateError``.
        """
        self._check_texts("record_artifact", body=body)
        require_named(f"record_artifact({kind!r})", instance_id, projection_sha256=projection_sha256)
        return await self._transition(
            instance_id,
            Record(kind, body, projection_sha256),
            reply=(f"record_artifact({kind!r})", projection_sha256),
        )

    async def revise(
        self, instance_id: str, kind: str, feedback: str, *, displayed_version: int
    ) -> ProtocolState:
        """The user's feedback on the displayed version: that version is rejected and revised."""
        self._check_texts("revise", feedback=feedback)
        return await self._transition(instance_id, Revise(kind, feedback, displayed_version))

    async def confirm(
        self, instance_id: str, kind: str, *, version: int, digest: str, output_mode: str | None = None
    ) -> ProtocolState:
        """Confirm the displayed version, named by version and digest (else ``StaleConfirmation``)."""
        return await self._transition(instance_id, Confirm(kind, version, digest, output_mode))

    async def change_request(
        self,
        instance_id: str,
        feedback: str,
        *,
        displayed_version: int | None = None,
        digest: str | None = None,
    ) -> ProtocolState:
        """A semantic change during plan review: the plan is rejected, the prompt is revised.

        It names the plan version and digest the user was shown; another
        version is ``StaleConfirmation``, omitting them ``ProtocolStateError``.
        The change amends the request in every later prompt projection.
        """
        self._check_texts("change_request", feedback=feedback)
        require_named("change_request", instance_id, displayed_version=displayed_version, digest=digest)
        return await self._transition(instance_id, ChangeRequest(feedback, displayed_version, digest))

    async def review(
        self,
        instance_id: str,
        feedback: str,
        *,
        displayed_version: int | None = None,
        digest: str | None = None,
    ) -> ProtocolState:
        """Free-text feedback during plan review, to be classified before it is applied.

        The instance moves to ``review_interpreting``; compile
        ``interpret_review``, send it, and pass the model's verdict to
        ``interpret_review``. Names the displayed plan like ``change_request``.
        """
        self._check_texts("review", feedback=feedback)
        require_named("review", instance_id, displayed_version=displayed_version, digest=digest)
        return await self._transition(instance_id, Review(feedback, displayed_version, digest))

    async def interpret_review(
        self, instance_id: str, verdict: str, *, projection_sha256: str | None = None
    ) -> ProtocolState:
        """Route the pending review by the model's verdict on the ``interpret_review`` projection.

        ``task_change`` rejects the plan and reopens the prompt (the feedback
        amends the request); ``approach_change`` rejects the plan and revises it.
        """
        require_named("interpret_review", instance_id, projection_sha256=projection_sha256)
        return await self._transition(
            instance_id, Interpret(verdict, projection_sha256), reply=("interpret_review", projection_sha256)
        )

    async def request_input(
        self, instance_id: str, question: str, *, projection_sha256: str | None = None
    ) -> ProtocolState:
        """Execution asks the user for a missing non-semantic input: the instance waits for it."""
        self._check_texts("request_input", question=question)
        require_named("request_input", instance_id, projection_sha256=projection_sha256)
        return await self._transition(
            instance_id, RequestInput(question, projection_sha256), reply=("request_input", projection_sha256)
        )

    async def provide_input(
        self, instance_id: str, answer: str, *, request_number: int | None = None
    ) -> ProtocolState:
        """The user's answer to the pending input request (named by its number); execution resumes
        and its projection carries the question and the answer."""
        self._check_texts("provide_input", answer=answer)
        require_named("provide_input", instance_id, request_number=request_number)
        return await self._transition(instance_id, ProvideInput(answer, request_number))

    async def complete(
        self, instance_id: str, result: str, *, projection_sha256: str | None = None
    ) -> ProtocolState:
        """Deliver the execution's result; the instance is complete. ``state.result`` keeps it
        with its provenance (the confirmed prompt and plan, the output mode, the projection)."""
        self._check_texts("complete", result=result)
        require_named("complete", instance_id, projection_sha256=projection_sha256)
        return await self._transition(
            instance_id, Complete(result, projection_sha256), reply=("complete", projection_sha256)
        )

    async def stop(self, instance_id: str, *, reason: str | None = None) -> ProtocolState:
        """The user ends the instance from any active stage, without execution (or further execution)."""
        self._check_texts("stop", reason=reason)
        return await self._transition(instance_id, Stop(reason))

    async def fail(self, instance_id: str, reason: str) -> ProtocolState:
        """A failure the host cannot recover from: the instance ends in ``error``, its state kept."""
        self._check_texts("fail", reason=reason)
        return await self._transition(instance_id, Fail(reason))

    async def state(self, instance_id: str) -> ProtocolState:
        """The instance's state, as of the latest event in the log."""
        state = (await self._load(instance_id)).snapshot()
        if state is None:
            raise ProtocolStateError(f"instance {instance_id!r} has not been submitted")
        return state

    # -- projection -------------------------------------------------------------------

    def project(self, state: ProtocolState, operation: str) -> Projection:
        """The stateless context of ``operation`` (pure: no store access)."""
        return self.compiler.compile(state, operation)

    # -- internals ----------------------------------------------------------------------

    def _check_texts(self, action: str, **texts: object) -> None:
        for field, text in texts.items():
            check_text(action, field, text, self.max_text_bytes)

    async def _load(self, instance_id: str) -> PhaseFold:
        """The instance's fold, extended by the events appended since it was last read."""
        if not isinstance(instance_id, str) or not instance_id:
            raise ModelValidationError(
                "ProtocolController", "instance_id", f"expected a non-empty str, got {instance_id!r}"
            )
        if in_transaction(self.store):
            # What this transaction reads or writes may roll back: fold afresh, keep nothing.
            fold = PhaseFold(instance_id)
            fold.extend(await self.store.events.read(instance_id, types=PHASE_EVENT_TYPES))
            return fold
        fold = self._folds.get(instance_id) or PhaseFold(instance_id)
        after = fold.last_sequence
        events = await self.store.events.read(instance_id, after=after, types=PHASE_EVENT_TYPES)
        # Another task may have folded some of them meanwhile (folding never awaits).
        if fold.last_sequence < 0:  # it failed to fold them: start over
            self._folds.pop(instance_id, None)
            return await self._load(instance_id)
        try:
            fold.extend(e for e in events if e.sequence > fold.last_sequence)
        except BaseException:
            self._folds.pop(instance_id, None)
            raise
        self._remember(instance_id, fold)
        return fold

    def _remember(self, instance_id: str, fold: PhaseFold) -> None:
        if self.max_cached_instances == 0:
            return
        self._folds[instance_id] = fold
        self._folds.move_to_end(instance_id)
        while len(self._folds) > self.max_cached_instances:
            self._folds.popitem(last=False)

    async def _transition(
        self, instance_id: str, command: Command, *, reply: tuple[str, str | None] | None = None
    ) -> ProtocolState:
        """Decide ``command``; for a model ``reply`` (its call, the projection hash it names),
        check that it answers the current projection; append the event."""
        fold = await self._load(instance_id)
        decided_at = fold.last_sequence
        try:
            event_type, payload = decide(fold.view, command)
        except (ProtocolStateError, StaleConfirmation):
            if self._is_retry(fold, command):
                state = fold.snapshot()
                assert state is not None
                return state
            raise
        if reply is not None:
            action, named = reply
            state = fold.snapshot()
            assert state is not None and named is not None  # decide and require_named saw to it
            self._check_answers(state, action, named)
        ordinal = fold.events + 1
        event = NewEvent(
            instance_id,
            event_type,
            payload,
            derivation_key(instance_id, ordinal),
            actor=self.actor,
            format_version=payload_format(event_type, payload),
        )
        try:
            stored = await self.store.events.append(event)
        except IdempotencyConflict as exc:
            raise ProtocolStateError(
                f"instance {instance_id!r}: transition {ordinal} was recorded concurrently by another worker "
                "with a different outcome; reload the state"
            ) from exc
        if fold.last_sequence == decided_at:
            # Decided from exactly this fold, and stored as decided (or as an identical twin).
            fold.apply(stored)
        else:  # another task of this process folded newer events meanwhile
            fold = await self._load(instance_id)
        state = fold.snapshot()
        assert state is not None
        return state

    def _check_answers(self, state: ProtocolState, action: str, named: str) -> None:
        """A model reply is accepted only for the projection compiled from the current state."""
        operation = self.compiler.operation_for(state)
        assert operation is not None  # decide admitted a reply only in a projecting stage
        current = self.project(state, operation).sha256
        if named != current:
            raise StaleConfirmation(
                f"{action} for instance {state.instance_id!r} answers projection {named[:12]}..., but the "
                f"current {operation} projection is {current[:12]}...: a reply to an earlier projection "
                "is not accepted"
            )

    @staticmethod
    def _is_retry(fold: PhaseFold, command: Command) -> bool:
        if fold.last is None:
            return False
        try:
            again = decide(fold.previous, command)
        except ContextError:
            return False
        return same_decision(again, (fold.last.type, fold.last.payload))


__all__ = [
    "ACTOR",
    "DEFAULT_MAX_CACHED_INSTANCES",
    "DEFAULT_MAX_TEXT_BYTES",
    "ProtocolController",
    "derivation_key",
]
