"""Stored-format versions and the rolling-upgrade rule (ADR 0009).

Every stored row carries the **format version** it was written with (the
``schema_version`` column of events and checkpoints). The rules:

* Each event type (and each payload shape of it) has the version that
  introduced it (``EVENT_FORMATS``). A writer stamps a row with the lowest
  version that can express it, so a newer worker's rows of old types stay
  readable by older workers.
* A reader accepts every version up to ``FORMAT_VERSION``, forever. A row of
  a newer version fails closed with ``UnsupportedFormat`` naming the session,
  the sequence (or the run and checkpoint version) and the version needed,
  never skipped and never guessed at: an older worker must not misbuild a
  session a newer worker has moved on.
* A deployment turns a new writer on only after every reader understands
  it: ``WritePolicy`` caps the version this process writes and can switch
  single event types off. Start a rolling upgrade with
  ``CTXENGINE_WRITE_FORMAT=<old version>`` (or ``open_store(...,
  write_policy=WritePolicy(max_version=...))``); once no older worker runs,
  lift it. Features that would write a disabled type either fall back to
  what the older format can say or raise ``FormatDisabled``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import (
    CheckpointCorruption,
    FormatDisabled,
    ModelValidationError,
    StoreCorruption,
    UnsupportedFormat,
)
from .events import EVENT_FORMATS, FORMAT_VERSION

#: The first format version: everything written before versions were tracked.
BASE_FORMAT = 1

#: Checkpoint payload format tag -> the format version that introduced it: the first formats
#: (what ``tests/golden`` holds), and the reference formats with spans (ADR 0011), which hold
#: the conversation as sequence ranges into the session log: a reader from before them could
#: not materialize one.
CHECKPOINT_FORMATS: dict[str, int] = {
    "checkpoint.full/1": 1,
    "checkpoint.delta/1": 1,
    "checkpoint.ref/2": 3,
    "checkpoint.refdelta/2": 3,
}

#: Formats only development builds before 0.2.0 wrote (stamped format version 2): no release
#: reads them, and a run whose chain is in one is refused with ``CheckpointCorruption`` naming
#: the format.
RETIRED_CHECKPOINT_FORMATS = frozenset({"checkpoint.ref/1", "checkpoint.refdelta/1"})

#: The format version checkpoint rows of the first formats are stamped with.
CHECKPOINT_FORMAT = 1


def checkpoint_payload_version(payload: Mapping[str, object]) -> int:
    """The format version a checkpoint row with ``payload`` is stamped with: its format tag's
    (the first version for a payload without a known tag; the raw port stores any object)."""
    tag = payload.get("format")
    return CHECKPOINT_FORMATS.get(tag, CHECKPOINT_FORMAT) if isinstance(tag, str) else CHECKPOINT_FORMAT


#: Environment switches read by ``WritePolicy.from_env``.
ENV_WRITE_FORMAT = "CTXENGINE_WRITE_FORMAT"
ENV_DISABLED_EVENTS = "CTXENGINE_DISABLED_EVENTS"


def event_format(event_type: str) -> int:
    """The format version a row of ``event_type`` is stamped with (its base shape)."""
    return EVENT_FORMATS[event_type]


@dataclass(frozen=True, slots=True)
class WritePolicy:
    """What this process may write: format versions up to ``max_version``, minus ``disabled`` types.

    The default writes everything this code knows. During a rolling upgrade,
    pin ``max_version`` to the version the oldest running worker reads.
    """

    max_version: int = FORMAT_VERSION
    disabled: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if isinstance(self.max_version, bool) or not isinstance(self.max_version, int):
            raise ModelValidationError(
                "WritePolicy", "max_version", f"expected an int, got {self.max_version!r}"
            )
        if not BASE_FORMAT <= self.max_version <= FORMAT_VERSION:
            raise ModelValidationError(
                "WritePolicy",
                "max_version",
                f"{self.max_version} is outside the versions this code writes "
                f"({BASE_FORMAT}..{FORMAT_VERSION})",
            )
        disabled = frozenset(self.disabled)
        unknown = sorted(t for t in disabled if t not in EVENT_FORMATS)
        if unknown:
            raise ModelValidationError("WritePolicy", "disabled", f"unknown event types {unknown}")
        object.__setattr__(self, "disabled", disabled)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WritePolicy:
        """``CTXENGINE_WRITE_FORMAT`` (an int) and ``CTXENGINE_DISABLED_EVENTS`` (comma-separated)."""
        env = os.environ if environ is None else environ
        raw = env.get(ENV_WRITE_FORMAT, "").strip()
        try:
            max_version = int(raw) if raw else FORMAT_VERSION
        except ValueError:
            raise ModelValidationError(
                "WritePolicy", ENV_WRITE_FORMAT, f"expected an integer format version, got {raw!r}"
            ) from None
        disabled = frozenset(t.strip() for t in env.get(ENV_DISABLED_EVENTS, "").split(",") if t.strip())
        return cls(max_version, disabled)

    def allows(self, event_type: str, version: int | None = None) -> bool:
        """True when this process may write ``event_type`` at ``version`` (its base version by default)."""
        needed = EVENT_FORMATS.get(event_type)
        if needed is None:
            return False
        return event_type not in self.disabled and max(needed, version or needed) <= self.max_version

    def writes(self, version: int) -> bool:
        """True when this process may write rows of format ``version`` (checkpoint formats)."""
        return version <= self.max_version

    def check(self, event_type: str, version: int | None = None) -> None:
        """``FormatDisabled`` unless ``allows(event_type, version)``."""
        if self.allows(event_type, version):
            return
        if event_type in self.disabled:
            why = f"it is disabled ({ENV_DISABLED_EVENTS})"
        else:
            needed = max(EVENT_FORMATS.get(event_type, 0), version or 0)
            why = f"it needs format version {needed} and this deployment writes up to {self.max_version}"
        raise FormatDisabled(
            f"event type {event_type!r} is not written by this deployment: {why}; "
            "enable it once every worker reading these stores is upgraded"
        )


def row_version(session_id: str, sequence: int | None, event_type: object, value: object) -> int:
    """The checked format version of an event row: ``UnsupportedFormat`` when newer than this code."""
    if isinstance(value, bool) or not isinstance(value, int) or value < BASE_FORMAT:
        raise StoreCorruption(session_id, sequence, f"bad format version {value!r}")
    if value > FORMAT_VERSION:
        raise UnsupportedFormat(
            f"session {session_id!r} sequence {sequence}",
            value,
            f"event type {event_type!r}",
            reads_up_to=FORMAT_VERSION,
            session_id=session_id,
            sequence=sequence,
        )
    needed = EVENT_FORMATS.get(event_type) if isinstance(event_type, str) else None
    if needed is None:
        raise StoreCorruption(session_id, sequence, f"unknown event type {event_type!r}")
    if value < needed:
        raise StoreCorruption(
            session_id,
            sequence,
            f"event type {event_type!r} exists from format version {needed}, row says {value}",
        )
    return value


def checkpoint_version(run_id: str, version: int | None, value: object) -> int:
    """The checked format version of a checkpoint row (``UnsupportedFormat`` when newer)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < BASE_FORMAT:
        raise CheckpointCorruption(run_id, version, f"bad format version {value!r}")
    if value > FORMAT_VERSION:
        raise UnsupportedFormat(
            f"run {run_id!r} checkpoint version {version}",
            value,
            "checkpoint row",
            reads_up_to=FORMAT_VERSION,
            session_id=run_id,
            sequence=version,
        )
    return value


__all__ = [
    "BASE_FORMAT",
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_FORMATS",
    "ENV_DISABLED_EVENTS",
    "ENV_WRITE_FORMAT",
    "RETIRED_CHECKPOINT_FORMATS",
    "WritePolicy",
    "checkpoint_payload_version",
    "checkpoint_version",
    "event_format",
    "row_version",
]
