"""The session event log and the run checkpoint store: value types and ports.

Everything durable about a session is an append-only event: conversation
items, context plans, compactions, working-state transitions, phase
protocol steps. The ports here are ``typing.Protocol``s; the adapters live in
``ctxengine.stores`` (memory, SQLite, PostgreSQL) and all pass one contract
suite.

Design notes:

* ``type`` is a closed set (``EVENT_TYPES``). Appending an unknown type is a
  ``ModelValidationError``; reading one back is ``StoreCorruption`` (fail
  closed: a replay that silently skipped a row would rebuild the wrong
  state).
* ``append`` is idempotent on ``(session_id, derivation_key)``. The payload is
  stored as RFC 8785 canonical JSON text, so "the same payload" means the
  same canonical bytes, whatever key order or float spelling the caller used.
* ``Visibility`` decides which principal may read an event through
  ``latest_before(..., principal=...)``; ``principal=None`` means no filter
  (the runtime itself, replays, tooling).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypedDict, get_args

from ..errors import ModelValidationError
from ..model import Principal

if TYPE_CHECKING:
    from .migrations import MigrationReport

#: The newest stored-format version this code reads and writes (ADR 0009). Rows
#: carry the version they were written with in their ``schema_version`` column.
#: 3 reference checkpoints with spans (``checkpoint.ref/2``; 2's ``checkpoint.ref/1`` retired at 0.2.0);
#: 4 the usage event's cache counts; 5 the Agents SDK session's events (ADR 0023); 6 the loop's
#: request records (ADR 0024); 7 model summaries in ``context.compacted`` (ADR 0026).
FORMAT_VERSION = 7
#: The name this constant had before stored formats were versioned per type.
SCHEMA_VERSION = FORMAT_VERSION

#: Event type -> the format version that introduced it (``ctxengine.stores.formats``).
EVENT_FORMATS: Mapping[str, int] = MappingProxyType(
    {
        "conversation.item.appended": 1,
        "context.plan.created": 1,
        "context.epoch.rotated": 1,
        "context.compacted": 1,
        "context.working_state.updated": 1,
        "phase.submitted": 1,
        "phase.artifact.recorded": 1,
        "phase.revised": 1,
        "phase.confirmed": 1,
        "phase.change_requested": 1,
        "run.checkpoint.seeded": 1,
        # Session-level compaction carry (issue 13, ADR 0011).
        "context.carry.recorded": 2,
        # Phase protocol format 2 (issue 16): ctxengine.phases.PHASE_EVENT_TYPES_V2.
        "phase.review.received": 2,
        "phase.review.interpreted": 2,
        "phase.input.requested": 2,
        "phase.input.provided": 2,
        "phase.completed": 2,
        "phase.stopped": 2,
        "phase.failed": 2,
        # Provider usage against the estimate, per request (ADR 0012): ctxengine.runtime.usage.
        "context.usage.reported": 2,
        **dict.fromkeys(("agents.items.added", "agents.item.popped", "agents.session.cleared"), 5),
        "context.request.recorded": 6,  # what a replay needs of each request (ADR 0024)
    }
)
EVENT_TYPES: frozenset[str] = frozenset(EVENT_FORMATS)

CHECKPOINT_TRIGGERS: frozenset[str] = frozenset(
    {
        "model_response",
        "tool_completed",
        "tool_failed",
        "approval_requested",
        "approval_resolved",
        "compaction",
        "final_completion",
        "final_failure",
        # Version 1, written by ContextLoop.start_run or pick_up (adr 0005).
        "seeded",
    }
)

VisibilityScope = Literal["principal", "tenant", "session"]
CheckpointKind = Literal["full", "delta"]

VISIBILITY_SCOPES: tuple[str, ...] = get_args(VisibilityScope)
CHECKPOINT_KINDS: tuple[str, ...] = get_args(CheckpointKind)


#: Longest identifier (session, run, owner, actor, visibility id) in UTF-8 bytes: every
#: store indexes them, and PostgreSQL's index entries are bounded (ADR 0010).
MAX_ID_BYTES = 256
#: Longest derivation key in UTF-8 bytes (it embeds run ids and digests).
MAX_KEY_BYTES = 1024
#: Sequences, epochs and versions are 64-bit signed integers in every store.
MAX_INT = 2**63 - 1


def check_identifier(type_name: str, field: str, value: object, max_bytes: int = MAX_ID_BYTES) -> str:
    """``value`` if it is a storable identifier: a non-empty str, valid UTF-8 (no lone
    surrogates), no NUL, at most ``max_bytes`` bytes; otherwise a ``ModelValidationError``
    naming the field. Every store accepts exactly these (ADR 0010)."""
    if not isinstance(value, str):
        raise ModelValidationError(type_name, field, f"expected str, got {type(value).__name__}")
    if not value:
        raise ModelValidationError(type_name, field, "must not be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ModelValidationError(type_name, field, "is not valid UTF-8 (a lone surrogate)") from None
    if size > max_bytes:
        raise ModelValidationError(type_name, field, f"is {size} bytes long; the limit is {max_bytes}")
    if "\x00" in value:
        raise ModelValidationError(type_name, field, "contains a NUL character")
    return value


def check_int(type_name: str, field: str, value: object, *, minimum: int = -MAX_INT - 1) -> int:
    """``value`` if it is an int (not a bool) in ``[minimum, MAX_INT]``; else a ``ModelValidationError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelValidationError(type_name, field, f"expected int, got {type(value).__name__}")
    if not minimum <= value <= MAX_INT:
        raise ModelValidationError(type_name, field, f"{value} is outside {minimum}..{MAX_INT}")
    return value


_nonempty_str = check_identifier


def check_event_type(event_type: object, type_name: str = "NewEvent") -> str:
    """``event_type`` if it is one of ``EVENT_TYPES``; otherwise a ``ModelValidationError``."""
    if not isinstance(event_type, str) or event_type not in EVENT_TYPES:
        raise ModelValidationError(
            type_name, "type", f"unknown event type {event_type!r}; expected one of {sorted(EVENT_TYPES)}"
        )
    return event_type


def check_trigger(trigger: object) -> str:
    """``trigger`` if it is one of ``CHECKPOINT_TRIGGERS``; otherwise a ``ModelValidationError``."""
    if not isinstance(trigger, str) or trigger not in CHECKPOINT_TRIGGERS:
        raise ModelValidationError(
            "checkpoint",
            "trigger",
            f"unknown trigger {trigger!r}; expected one of {sorted(CHECKPOINT_TRIGGERS)}",
        )
    return trigger


def check_checkpoint_kind(kind: object) -> CheckpointKind:
    if kind == "full":
        return "full"
    if kind == "delta":
        return "delta"
    raise ModelValidationError("checkpoint", "kind", f"unknown kind {kind!r}; expected 'full' or 'delta'")


@dataclass(frozen=True, slots=True)
class Visibility:
    """Who may read an event.

    ``principal``: only that principal; ``tenant``: every principal of that
    tenant; ``session``: every principal that can open the session (``id`` is
    None).
    """

    scope: VisibilityScope
    id: str | None = None

    def __post_init__(self) -> None:
        if self.scope not in VISIBILITY_SCOPES:
            raise ModelValidationError(
                "Visibility", "scope", f"unknown scope {self.scope!r}; expected one of {VISIBILITY_SCOPES}"
            )
        if self.scope == "session":
            if self.id is not None:
                raise ModelValidationError("Visibility", "id", "a session-scoped visibility takes no id")
        else:
            _nonempty_str("Visibility", "id", self.id)

    @classmethod
    def principal(cls, principal_id: str) -> Visibility:
        return cls("principal", principal_id)

    @classmethod
    def tenant(cls, tenant_id: str) -> Visibility:
        return cls("tenant", tenant_id)

    @classmethod
    def session(cls) -> Visibility:
        return cls("session", None)

    def allows(self, principal: Principal | None) -> bool:
        """True when ``principal`` may read the event; ``None`` is the unfiltered runtime view."""
        if principal is None or self.scope == "session":
            return True
        if self.scope == "tenant":
            return self.id == principal.tenant_id
        return self.id == principal.principal_id

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "id": self.id}


SESSION_VISIBLE = Visibility.session()

#: Visibility classes by ``(scope, id)``, shared by the item rows of every read in the process:
#: rows of one class hold the same object, so a seed decides each class once (ADR 0011).
VISIBILITY_CLASSES: dict[tuple[str, str | None], Visibility] = {}
MAX_VISIBILITY_CLASSES = 4096


def interned(visibility: Visibility) -> Visibility:
    """The process's one object equal to ``visibility`` (see ``VISIBILITY_CLASSES``)."""
    key = (visibility.scope, visibility.id)
    found = VISIBILITY_CLASSES.get(key)
    if found is None:
        if len(VISIBILITY_CLASSES) >= MAX_VISIBILITY_CLASSES:
            VISIBILITY_CLASSES.clear()
        found = VISIBILITY_CLASSES[key] = visibility
    return found


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append. The store assigns ``sequence`` and ``created_at``.

    ``derivation_key`` names what the event was derived from, e.g.
    ``context.plan:{session_id}:{epoch}``: appending the same key twice is a
    no-op when the payload matches and an ``IdempotencyConflict`` when not.
    ``visibility`` defaults to the whole session.
    """

    session_id: str
    type: str
    payload: dict[str, Any]
    derivation_key: str
    run_id: str | None = None
    actor: str = "runtime"
    visibility: Visibility = SESSION_VISIBLE
    #: The format version of this payload; ``None`` means the type's base version.
    format_version: int | None = None

    def __post_init__(self) -> None:
        n = "NewEvent"
        _nonempty_str(n, "session_id", self.session_id)
        check_event_type(self.type)
        base = EVENT_FORMATS[self.type]
        version = base if self.format_version is None else self.format_version
        if isinstance(version, bool) or not isinstance(version, int) or not base <= version <= FORMAT_VERSION:
            raise ModelValidationError(
                n,
                "format_version",
                f"expected an int from {base} (where {self.type!r} starts) to {FORMAT_VERSION}, "
                f"got {self.format_version!r}",
            )
        object.__setattr__(self, "format_version", version)
        if not isinstance(self.payload, dict):
            raise ModelValidationError(n, "payload", f"expected dict, got {type(self.payload).__name__}")
        # A shallow copy so a caller mutating its dict after construction
        # cannot change what gets appended.
        object.__setattr__(self, "payload", dict(self.payload))
        check_identifier(n, "derivation_key", self.derivation_key, MAX_KEY_BYTES)
        if self.run_id is not None:
            _nonempty_str(n, "run_id", self.run_id)
        _nonempty_str(n, "actor", self.actor)
        if not isinstance(self.visibility, Visibility):
            raise ModelValidationError(
                n, "visibility", f"expected Visibility, got {type(self.visibility).__name__}"
            )


@dataclass(frozen=True, slots=True)
class Event:
    """A stored event, as read back from a log."""

    session_id: str
    sequence: int
    type: str
    payload: dict[str, Any]
    derivation_key: str
    run_id: str | None
    actor: str
    visibility: Visibility
    created_at: datetime
    schema_version: int = SCHEMA_VERSION

    @property
    def format_version(self) -> int:
        """The format version the row was written with (stored as ``schema_version``)."""
        return self.schema_version

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "sequence": self.sequence,
            "type": self.type,
            "payload": self.payload,
            "derivation_key": self.derivation_key,
            "run_id": self.run_id,
            "actor": self.actor,
            "visibility": self.visibility.to_dict(),
            "created_at": self.created_at.isoformat(),
            "schema_version": self.schema_version,
        }


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to write one run's checkpoints, until a newer claim (or a delete) fences it.

    ``run_id`` names the run the lease was claimed for: it writes that run
    only. Epochs only ever grow for a run, across deletes, so a fenced lease
    never becomes current again.
    """

    owner: str
    epoch: int
    run_id: str

    def __post_init__(self) -> None:
        check_identifier("Lease", "owner", self.owner)
        check_int("Lease", "epoch", self.epoch, minimum=1)
        check_identifier("Lease", "run_id", self.run_id)


class ItemRow(NamedTuple):
    """A stored ``conversation.item.appended`` row whose payload is not decoded yet (ADR 0011):
    the history reader decodes a batch of them natively. ``tokens`` is the stored raw token
    count under the counter the read asked for (``None`` when none is stored)."""

    sequence: int
    payload: str
    visibility: Visibility
    tokens: int | None = None


class RawCheckpoint(TypedDict):
    """One stored checkpoint row; the typed ``Checkpoint`` layer is built on top."""

    version: int
    kind: CheckpointKind
    trigger: str
    payload: dict[str, Any]
    created_at: datetime


class EventLog(Protocol):
    """The append-only, per-session event log."""

    async def append(self, event: NewEvent) -> Event:
        """Store ``event`` at the session's next sequence, or return the stored twin."""
        ...

    async def read(
        self,
        session_id: str,
        after: int = 0,
        types: Iterable[str] | None = None,
        *,
        before: int | None = None,
    ) -> list[Event]:
        """Events with ``after < sequence`` (and ``sequence < before`` when given), in order."""
        ...

    async def append_all(self, events: Sequence[NewEvent]) -> tuple[list[Event], int]:
        """``append`` for each event of one session, in order, as one store operation (one
        lock and one insert instead of one per event). Each is idempotent on its derivation
        key, as with ``append``. Returns the stored events and how many were newly written."""
        ...

    async def latest_before(
        self,
        session_id: str,
        before_sequence: int,
        event_type: str,
        principal: Principal | None = None,
    ) -> Event | None:
        """The greatest-sequence event of ``event_type`` strictly below ``before_sequence``
        that ``principal`` may see (any, when ``principal`` is None)."""
        ...

    async def read_items(
        self, session_id: str, after: int = 0, *, before: int | None = None, counter: str | None = None
    ) -> list[ItemRow]:
        """The ``conversation.item.appended`` rows with ``after < sequence`` (``< before``), in
        order, payloads undecoded, with their stored token count under ``counter``. Fails
        closed like a typed read: a row of an unknown type or a newer format in the range,
        or an item row whose columns do not decode, raises naming the row."""
        ...

    async def put_counts(self, session_id: str, counter: str, counts: Iterable[tuple[int, int]]) -> None:
        """Store raw token counts ``(sequence, count)`` of events under ``counter``; a count
        already stored for an event and counter is kept (insert or ignore)."""
        ...

    async def visibilities(
        self, session_id: str, event_type: str, after: int, through: int
    ) -> frozenset[Visibility]:
        """Who may read the events of ``event_type`` with ``after < sequence <= through``:
        the distinct visibility classes among them (whoever may see each)."""
        ...


class CheckpointStore(Protocol):
    """Raw, versioned, single-writer checkpoint rows per run, fenced by leases."""

    async def claim(self, run_id: str, owner: str) -> Lease:
        """A new lease for ``run_id``; every older lease of the run is fenced."""
        ...

    async def write(
        self,
        run_id: str,
        payload: dict[str, Any],
        *,
        trigger: str,
        lease: Lease,
        kind: CheckpointKind = "full",
    ) -> int:
        """Store the next version; a fenced ``lease`` raises ``LeaseLost`` and writes nothing."""
        ...

    async def latest_raw(self, run_id: str) -> list[RawCheckpoint]:
        """Rows from the newest full snapshot onwards, oldest first; empty when none."""
        ...

    async def delete(self, run_id: str) -> None:
        """Forget the run's checkpoints and lease."""
        ...

    async def prune(self, run_id: str, before_version: int) -> int:
        """Delete the run's checkpoint rows below ``before_version`` (a finished run keeps its
        last version, a full snapshot); returns how many were deleted."""
        ...


class Store(Protocol):
    """An event log and a checkpoint store that commit together."""

    @property
    def events(self) -> EventLog: ...

    @property
    def checkpoints(self) -> CheckpointStore: ...

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """Everything appended or written inside commits together or not at all."""
        ...

    async def close(self) -> None: ...

    async def migrate(self, *, dry_run: bool = False) -> MigrationReport:
        """Apply pending schema migrations (ADR 0009); a no-op report where there is no schema."""
        ...


__all__ = [
    "CHECKPOINT_KINDS",
    "CHECKPOINT_TRIGGERS",
    "EVENT_FORMATS",
    "EVENT_TYPES",
    "FORMAT_VERSION",
    "SCHEMA_VERSION",
    "MAX_VISIBILITY_CLASSES",
    "SESSION_VISIBLE",
    "VISIBILITY_CLASSES",
    "VISIBILITY_SCOPES",
    "CheckpointKind",
    "CheckpointStore",
    "Event",
    "EventLog",
    "ItemRow",
    "Lease",
    "NewEvent",
    "RawCheckpoint",
    "Store",
    "Visibility",
    "VisibilityScope",
    "MAX_ID_BYTES",
    "MAX_INT",
    "MAX_KEY_BYTES",
    "check_checkpoint_kind",
    "check_identifier",
    "check_int",
    "check_event_type",
    "check_trigger",
    "interned",
]
