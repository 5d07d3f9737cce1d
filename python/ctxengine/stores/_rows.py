"""What every adapter shares: the stored row layout, encoding, fail-closed decoding,
idempotency and lease checks, and the per-task transaction slot.

Adapters store events as flat rows in ``EVENT_COLUMNS`` order and hand rows
read back to ``decode_event``, which raises ``StoreCorruption`` naming the
session and sequence instead of ever skipping a row.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import partial
from typing import Any, ClassVar, Generic, TypeVar

from ..core.canonical import canonical_json
from ..core.slices import Steps, batches, offloaded
from ..errors import (
    CanonicalizationError,
    CheckpointCorruption,
    FormatDisabled,
    IdempotencyConflict,
    LeaseLost,
    ModelValidationError,
    StoreCorruption,
)
from ..model.clock import Clock
from . import formats
from .encoded import encoded_text
from .events import (
    EVENT_TYPES,
    FORMAT_VERSION,
    VISIBILITY_CLASSES,
    Event,
    Lease,
    NewEvent,
    RawCheckpoint,
    Visibility,
    check_checkpoint_kind,
    check_event_type,
    check_identifier,
    check_int,
    check_trigger,
    interned,
)

EVENT_COLUMNS = (
    "session_id",
    "sequence",
    "type",
    "payload",
    "derivation_key",
    "run_id",
    "actor",
    "visibility_scope",
    "visibility_id",
    "created_at",
    "schema_version",
)
CHECKPOINT_COLUMNS = ("version", "kind", "trigger", "payload", "created_at", "schema_version")
#: Each as a statement's column list (both SQL adapters select and insert them in this order).
EVENT_COLUMN_LIST = ", ".join(EVENT_COLUMNS)
CHECKPOINT_COLUMN_LIST = ", ".join(CHECKPOINT_COLUMNS)

# Stored row: one value per column above. ``created_at`` is a datetime
# (memory, PostgreSQL) or ISO-8601 text (SQLite).
Row = Sequence[Any]


def payload_text(payload: dict[str, Any]) -> str:
    """The canonical JSON text a payload is stored (and compared) as."""
    return canonical_json(payload).decode("utf-8")


def event_text(new: NewEvent) -> str:
    """The text ``new``'s payload is stored as: the engine's own when it encoded it (``encoded``)."""
    text = encoded_text(new)
    return payload_text(new.payload) if text is None else text


def utc_now(clock: Clock) -> datetime:
    now = clock.now()
    if now.tzinfo is None or now.utcoffset() is None:
        raise ModelValidationError(type(clock).__name__, "now()", "returned a naive datetime; need UTC")
    return now.astimezone(UTC)


def event_row(new: NewEvent, text: str, sequence: int, created_at: Any) -> tuple[Any, ...]:
    """The row to insert for ``new`` at ``sequence``."""
    return (
        new.session_id,
        sequence,
        new.type,
        text,
        new.derivation_key,
        new.run_id,
        new.actor,
        new.visibility.scope,
        new.visibility.id,
        created_at,
        new.format_version,
    )


def _timestamp(value: object) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise ValueError(f"expected a timestamp, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"timestamp {value.isoformat()} has no timezone")
    return value.astimezone(UTC)


def _no_constant(name: str) -> Any:
    raise ValueError(f"payload holds {name}, which canonical JSON never does")


def json_object(text: object) -> dict[str, Any]:
    """A stored payload decoded, or ``ValueError`` unless it is exactly what a store writes:
    an RFC 8785 canonical JSON object (no NaN, no out-of-range integers, no nesting past the
    canonicalizer's depth budget, no other spelling). Anything else was not written by this
    code and is read as corrupt, never half-understood."""
    if not isinstance(text, str):
        raise ValueError(f"payload is {type(text).__name__}, not JSON text")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("payload nests too deeply to decode") from None
    except ValueError as exc:
        raise ValueError(f"payload is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"payload is a JSON {type(value).__name__}, not an object")
    try:
        canonical = canonical_json(value)
    except CanonicalizationError as exc:
        raise ValueError(f"payload is not canonical JSON ({exc})") from None
    if canonical != text.encode("utf-8", "surrogatepass"):
        raise ValueError("payload is not in canonical form (it was not written by a ctxengine store)")
    return value


def _optional_str(name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} is {type(value).__name__}, not text")
    return value


def _str(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} is {value!r}, not non-empty text")
    return value


def visibility_class(scope: object, ident: object) -> Visibility:
    """The process's one ``Visibility(scope, ident)`` (``interned``), made (and checked) only
    when it is not known yet: a read of 20,000 events holds one object per class, not one per
    event (each a container the cyclic collector would track and walk)."""
    try:
        found = VISIBILITY_CLASSES.get((scope, ident))  # type: ignore[arg-type]
    except TypeError:  # an unhashable column value: Visibility names what is wrong with it
        found = None
    return found if found is not None else interned(Visibility(scope, ident))  # type: ignore[arg-type]


def decode_event(row: Row, payload: dict[str, Any] | None = None) -> Event:
    """An ``Event`` from a stored row; ``StoreCorruption`` naming session and sequence if it is bad
    (``payload``: what the engine encoded as the row's text, taken as its decoded form)."""
    session_id = str(row[0]) if len(row) > 0 else "<unknown>"
    raw_sequence = row[1] if len(row) > 1 else None
    sequence = raw_sequence if isinstance(raw_sequence, int) and not isinstance(raw_sequence, bool) else None
    try:
        if len(row) != len(EVENT_COLUMNS):
            raise ValueError(f"row has {len(row)} columns, expected {len(EVENT_COLUMNS)}")
        if sequence is None or sequence < 1:
            raise ValueError(f"bad sequence {raw_sequence!r}")
        # The version comes first: a newer row may be laid out differently, and
        # an unknown type from a newer writer is "upgrade", not "corrupt".
        version = formats.row_version(session_id, sequence, row[2], row[10])
        event_type = row[2]
        try:
            visibility = visibility_class(row[7], row[8])
        except ModelValidationError as exc:
            raise ValueError(f"bad visibility: {exc}") from None
        return Event(
            session_id=session_id,
            sequence=sequence,
            type=event_type,
            payload=json_object(row[3]) if payload is None else payload,
            derivation_key=_str("derivation_key", row[4]),
            run_id=_optional_str("run_id", row[5]),
            actor=_str("actor", row[6]),
            visibility=visibility,
            created_at=_timestamp(row[9]),
            schema_version=version,
        )
    except ValueError as exc:
        raise StoreCorruption(session_id, sequence, str(exc)) from None


#: Payload text (characters) past which an event is decoded (and a batch written is probed)
#: off the event loop: a compaction's event lists every pointer it elided (700 KB at 20,000
#: items: decoding it and checking its form takes 10-20 ms, in calls no slice can cut).
LONG_PAYLOAD = 1 << 17


#: Events decoded by the first call of a slice (``core.slices.batches``; the next calls take
#: as many as fit in ``SLICE_SECONDS``): a decode in Python (JSON, the canonical form
#: checked) takes about 20 us an event, so ``SLICE_ITEMS`` of them held the loop 5 ms.
DECODE_ITEMS = 32


def _long(part: Sequence[Row]) -> list[bool]:
    return [len(row) > 3 and type(row[3]) is str and len(row[3]) >= LONG_PAYLOAD for row in part]


def decode_events_steps(rows: Sequence[Row], types: Container[str] | None = None) -> Steps[list[Event]]:
    """``decode_event`` of each row (of ``types``' events only, when given), in slices
    (``core.slices``: a long read decoded on the event loop gives it back between them);
    a row with a long payload (``LONG_PAYLOAD``) on its own, off the loop."""

    def decode(part: Sequence[Row]) -> list[Event]:
        events = [decode_event(row) for row in part]
        return events if types is None else [event for event in events if event.type in types]

    long = yield from batches(_long, rows)
    out: list[Event] = []
    start = 0
    for at in [i for i, is_long in enumerate(long) if is_long]:
        out.extend((yield from batches(decode, rows[start:at], DECODE_ITEMS)))
        out.extend((yield from offloaded(partial(decode, [rows[at]]))))
        start = at + 1
    out.extend((yield from batches(decode, rows[start:], DECODE_ITEMS)))
    return out


def probe_event(new: NewEvent, text: str, created_at: Any) -> Event:
    """``new`` as it will read back (at a placeholder sequence), decoded by the reader's own
    rules before it is written; a failure is the writer's error, and nothing is stored. The
    payload of an event the engine encoded itself (``encoded``) is not decoded again."""
    row = event_row(new, text, 1, created_at)
    try:
        return decode_event(row) if encoded_text(new) != text else decode_event(row, new.payload)
    except StoreCorruption as exc:
        raise ModelValidationError("NewEvent", "payload", f"would not read back: {exc.reason}") from None


def repeat_of(stored_row: Row, new: NewEvent, text: str) -> Event:
    """The stored event when ``new`` repeats it exactly; ``IdempotencyConflict`` when it differs."""
    stored = decode_event(stored_row)
    if stored.type == new.type and stored_row[3] == text:
        return stored
    if stored.type != new.type:
        what = f"type ({stored.type!r}, now {new.type!r})"
    else:
        what = "payload"
    raise IdempotencyConflict(
        f"session {new.session_id!r} derivation key {new.derivation_key!r}: already stored at "
        f"sequence {stored.sequence} with a different {what}"
    )


#: Every event type this code knows, for the SQL that must not pass over anything else.
KNOWN_TYPES: tuple[str, ...] = tuple(sorted(EVENT_TYPES))


def must_decode(event_type: object, version: object, wanted: tuple[str, ...] | None) -> bool:
    """Whether a typed read has to decode a row: it is wanted, or it is a row no type filter may
    pass over silently (an unknown type, or a newer format: decoding fails closed on it)."""
    return (
        wanted is None
        or event_type in wanted
        or event_type not in EVENT_TYPES
        or not isinstance(version, int)
        or version > FORMAT_VERSION
    )


def type_filter(types: Iterable[str] | None) -> tuple[str, ...] | None:
    """Validated, de-duplicated event types to filter on; None means all."""
    if types is None:
        return None
    if isinstance(types, str):  # a lone str would iterate as characters
        types = (types,)
    return tuple(sorted({check_event_type(t, "EventLog.read") for t in types}))


def check_ints(where: str, **values: object) -> None:
    """``ModelValidationError`` naming the first argument that is not a 64-bit int (None is allowed)."""
    for name, value in values.items():
        if value is not None:
            check_int(where, name, value)


def check_session(where: str, session_id: object) -> str:
    """A session id a read may look up: the same rules as for writing one."""
    return check_identifier(where, "session_id", session_id)


# --------------------------------------------------------------------------
# checkpoints


def check_checkpoint_write(
    run_id: str, payload: dict[str, Any], trigger: str, lease: Lease, kind: str, policy: Any = None
) -> tuple[str, str, int]:
    """Validate a checkpoint write before touching the store; returns (kind, payload text,
    the format version to stamp). A format this deployment does not write (``policy``) is
    ``FormatDisabled`` before anything is written."""
    check_run_id(run_id)
    check_trigger(trigger)
    checked_kind = check_checkpoint_kind(kind)
    if not isinstance(lease, Lease):
        raise ModelValidationError("checkpoint", "lease", f"expected Lease, got {type(lease).__name__}")
    if not isinstance(payload, dict):
        raise ModelValidationError("checkpoint", "payload", f"expected dict, got {type(payload).__name__}")
    version = formats.checkpoint_payload_version(payload)
    if policy is not None and not policy.writes(version):
        raise FormatDisabled(
            f"checkpoint format {payload.get('format')!r} needs format version {version} and this "
            f"deployment writes up to {policy.max_version}"
        )
    return checked_kind, payload_text(payload), version


def check_run_id(run_id: object) -> str:
    return check_identifier("checkpoint", "run_id", run_id)


def check_claim(run_id: object, owner: object) -> None:
    check_run_id(run_id)
    check_identifier("Lease", "owner", owner)


#: The owner a run's lease row holds after ``delete()``: no claim ever returns it.
FENCED_OWNER = ""


def check_lease(run_id: str, lease: Lease, current: tuple[str, int] | None) -> None:
    """``LeaseLost`` unless ``lease`` is the run's current lease (claimed for this very run)."""
    if lease.run_id != run_id:
        raise LeaseLost(
            f"run {run_id!r}: the lease of {lease.owner!r} (epoch {lease.epoch}) was claimed for run "
            f"{lease.run_id!r} and writes that run only"
        )
    if current is None:
        raise LeaseLost(f"run {run_id!r}: lease epoch {lease.epoch} of {lease.owner!r} was never claimed")
    owner, epoch = current
    if (owner, epoch) != (lease.owner, lease.epoch):
        raise LeaseLost(
            f"run {run_id!r}: lease epoch {lease.epoch} of {lease.owner!r} is fenced by "
            f"epoch {epoch} of {owner!r}"
        )


def no_base_for_delta(run_id: str) -> ModelValidationError:
    return ModelValidationError(
        "checkpoint", "kind", f"run {run_id!r} has no full snapshot for a delta to follow"
    )


def decode_checkpoint(run_id: str, row: Row) -> RawCheckpoint:
    """A ``RawCheckpoint`` from a stored row in ``CHECKPOINT_COLUMNS`` order, failing closed."""
    raw_version = row[0] if row else None
    version = raw_version if isinstance(raw_version, int) and not isinstance(raw_version, bool) else None
    try:
        if len(row) != len(CHECKPOINT_COLUMNS):
            raise ValueError(f"row has {len(row)} columns, expected {len(CHECKPOINT_COLUMNS)}")
        if version is None or version < 1:
            raise ValueError(f"bad version {raw_version!r}")
        formats.checkpoint_version(run_id, version, row[5])
        try:
            kind = check_checkpoint_kind(row[1])
            trigger = check_trigger(row[2])
        except ModelValidationError as exc:
            raise ValueError(str(exc)) from None
        return RawCheckpoint(
            version=version,
            kind=kind,
            trigger=trigger,
            payload=json_object(row[3]),
            created_at=_timestamp(row[4]),
        )
    except ValueError as exc:
        raise CheckpointCorruption(run_id, version, f"checkpoint row: {exc}") from None


# --------------------------------------------------------------------------
# transactions

T = TypeVar("T")


class TransactionSlot(Generic[T]):
    """Which transaction handle (if any) the current task is inside, per store.

    A ``ContextVar`` so that only code running inside ``async with
    store.transaction()`` (and tasks it spawns) joins the transaction, while
    other tasks sharing the store wait for it to finish. It maps store ->
    handle, so a transaction on one store nested in another's does not hide
    the outer one.
    """

    #: Every slot made, so that ``in_transaction`` can ask them all.
    made: ClassVar[list[TransactionSlot[Any]]] = []

    def __init__(self, name: str) -> None:
        self._var: ContextVar[tuple[tuple[object, T], ...]] = ContextVar(name, default=())
        TransactionSlot.made.append(self)

    def get(self, owner: object) -> T | None:
        for bound_owner, handle in reversed(self._var.get()):  # innermost first
            if bound_owner is owner:
                return handle
        return None

    @contextmanager
    def bind(self, owner: object, handle: T) -> Iterator[None]:
        token = self._var.set((*self._var.get(), (owner, handle)))
        try:
            yield
        finally:
            self._var.reset(token)


def in_transaction(store: object) -> bool:
    """True when the current task is inside ``store.transaction()`` (or a predicted commit) of
    ``store``: what it reads there may still roll back, so a cache must not keep it."""
    return any(slot.get(store) is not None for slot in TransactionSlot.made)


__all__ = [
    "CHECKPOINT_COLUMNS",
    "CHECKPOINT_COLUMN_LIST",
    "EVENT_COLUMNS",
    "EVENT_COLUMN_LIST",
    "FENCED_OWNER",
    "KNOWN_TYPES",
    "LONG_PAYLOAD",
    "Row",
    "TransactionSlot",
    "check_checkpoint_write",
    "check_claim",
    "check_lease",
    "check_ints",
    "in_transaction",
    "check_session",
    "check_run_id",
    "decode_checkpoint",
    "decode_event",
    "event_row",
    "json_object",
    "must_decode",
    "no_base_for_delta",
    "event_text",
    "payload_text",
    "probe_event",
    "repeat_of",
    "type_filter",
    "utc_now",
]
