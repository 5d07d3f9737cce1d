"""Typed errors. Every error the package raises subclasses ``ContextError``.

Each error names what is wrong: the JSON path, the budget class, the row.
"""

from __future__ import annotations


class ContextError(Exception):
    """Base class of every ctxengine error."""


class ArgumentError(ContextError, TypeError, ValueError):
    """A backend entry point called with an argument of the wrong type or value.

    ``function`` and ``argument`` name it (``items[3]`` for one element).
    Both backends raise it alike; it is also a ``TypeError`` and a
    ``ValueError``, the builtin errors such calls raised before.
    """

    def __init__(self, function: str, argument: str, reason: str) -> None:
        super().__init__(f"{function}: {argument}: {reason}")
        self.function = function
        self.argument = argument
        self.reason = reason


class CanonicalizationError(ContextError, ValueError):
    """A value cannot be written as RFC 8785 canonical JSON.

    ``path`` is the JSON path of the offending value (``$`` is the root,
    ``.key`` a dict key, ``[i]`` a list index).
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class ContextOverflow(ContextError):
    """A budget class does not fit: ``budget_class`` measured ``tokens`` against ``cap``
    (a cap it exceeds, or a floor it is below). ``detail``, when given, is the whole
    explanation: what is larger than what, and the policy knob that moves it."""

    def __init__(
        self, budget_class: str, tokens: int, cap: int, detail: str = "", *, message: str | None = None
    ) -> None:
        if message is None:
            message = f"{budget_class}: {detail or f'{tokens} tokens exceeds the cap of {cap} tokens'}"
        super().__init__(message)
        self.budget_class = budget_class
        self.tokens = tokens
        self.cap = cap


class PolicyError(ContextError, ValueError):
    """A budget policy key is unknown or its value is invalid; ``key`` names it."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"policy {key}: {reason}")
        self.key = key
        self.reason = reason


class OrphanedToolPair(ContextError, ValueError):
    """A tool call without its result, or a result without its call."""

    def __init__(self, call_id: str, index: int, reason: str) -> None:
        super().__init__(f"tool pair {call_id!r} at item {index}: {reason}")
        self.call_id = call_id
        self.index = index
        self.reason = reason


class ModelValidationError(ContextError, ValueError):
    """A value type was constructed or decoded from malformed input."""

    def __init__(self, type_name: str, field: str, reason: str) -> None:
        super().__init__(f"{type_name}.{field}: {reason}")
        self.type_name = type_name
        self.field = field
        self.reason = reason


class ConversionError(ContextError, ValueError):
    """A foreign history (OpenAI, Anthropic, LangChain) that ctxengine items cannot hold exactly,
    or items that a foreign format cannot hold: ``index`` is the message (or item) index,
    ``field`` the offending field inside it, ``source`` the format."""

    def __init__(self, source: str, index: int, field: str, reason: str) -> None:
        super().__init__(f"{source} [{index}].{field}: {reason}")
        self.source = source
        self.index = index
        self.field = field
        self.reason = reason


class FieldTooLarge(ContextError, ValueError):
    """A text longer than the limit set for it: ``field`` of ``type_name`` (the call or value
    type) is ``size`` UTF-8 bytes where ``limit`` is the most allowed. Nothing was written."""

    def __init__(self, type_name: str, field: str, size: int, limit: int, detail: str = "") -> None:
        message = f"{type_name}.{field}: {size} bytes exceeds the limit of {limit} bytes"
        if detail:
            message = f"{message} ({detail})"
        super().__init__(message)
        self.type_name = type_name
        self.field = field
        self.size = size
        self.limit = limit


class EstimatorError(ContextError, ValueError):
    """Bad input to the token estimator (a negative count, a bad snapshot)."""


class BackendError(ContextError, ValueError):
    """An unknown backend name, or the Rust extension is not importable."""


class BackendFallbackWarning(ContextError, RuntimeWarning):
    """A warning, not raised: the Rust extension could not be imported and no backend was
    asked for, so the pure-Python reference backend runs (the same results, slower). Warned
    once a process; set ``CTXENGINE_BACKEND=python`` to choose that backend and silence it,
    or install a built wheel (``make wheel``) for the Rust one."""


class PlanIntegrityError(ContextError):
    """A context plan whose tool names, specs and schema hash disagree."""


class StoreError(ContextError):
    """A store that cannot be opened or used: an unknown URL scheme, a schema
    newer than this code, a closed store, a driver failure. Every error a store
    raises is a ``StoreError`` (ADR 0010); ``retryable`` says whether the same
    call may succeed later unchanged."""

    retryable = False


class StoreUnavailable(StoreError):
    """The store cannot be reached right now: a lost connection, a server that is
    down or restarting, a lock or pool wait that ran out (bounded and configurable).
    Retryable: repeat the call (appends are idempotent on their derivation key)."""

    retryable = True


class StoreOpenError(StoreError):
    """A store that cannot be opened and will not open on a retry: a malformed URL; a path
    that is not a regular file (a directory, a FIFO, a device), whose directory is missing or
    not writable, or that does not exist where nothing may be created (a read-only open, a
    dry run); a file that is not a SQLite database or not a ctxengine store; a PostgreSQL
    database or role that does not exist, a refused login. Not retryable (unlike
    ``StoreUnavailable``): fix the URL, the file or the server's configuration."""

    retryable = False


class StatementTimeout(StoreError):
    """A statement ran past the store's ``statement_timeout`` and was interrupted (SQLite:
    the connection's progress handler; PostgreSQL: the server's ``statement_timeout``): a
    runaway statement (a crafted view or trigger) or a store too slow for the limit.
    ``limit`` is the limit in seconds. Not retryable: the same statement on the same data
    runs as long again; raise the limit if the data needs it."""

    retryable = False

    def __init__(self, where: str, limit: float) -> None:
        super().__init__(
            f"{where}: a statement ran past the statement timeout of {limit:g} s and was interrupted "
            "(a runaway statement, or raise statement_timeout)"
        )
        self.limit = limit


class StorePredictionMissed(StoreError):
    """A predicted commit the store refused: the session moved on, an event was stored
    already, the run was claimed or its lease or version changed, or the block needed an
    answer from the server (ADR 0013). Nothing of it was written. The engine catches it
    and runs the same writes in an ordinary transaction; it reaches a caller only from
    ``store._predicted(...)`` used directly."""

    retryable = True


class StoreCorruption(StoreError):
    """A stored row this code cannot read: it fails to decode, has an unknown type, a
    field of the wrong type, a payload that is not canonical JSON. It fails closed:
    never skipped. ``session_id`` and ``sequence`` name the row."""

    def __init__(self, session_id: str, sequence: int | None, reason: str) -> None:
        where = f"session {session_id!r}" + (f" sequence {sequence}" if sequence is not None else "")
        super().__init__(f"{where}: {reason}")
        self.session_id = session_id
        self.sequence = sequence
        self.reason = reason


class CheckpointCorruption(StoreCorruption):
    """A checkpoint row (or chain) this code cannot read, named by run id and version.

    ``session_id``/``sequence`` repeat ``run_id``/``version`` so that code
    handling any ``StoreCorruption`` finds the row."""

    def __init__(self, run_id: str, version: int | None, reason: str) -> None:
        StoreError.__init__(
            self,
            f"run {run_id!r}"
            + (f" checkpoint version {version}" if version is not None else "")
            + f": {reason}",
        )
        self.run_id = run_id
        self.version = version
        self.session_id = run_id
        self.sequence = version
        self.reason = reason


class CorruptPlan(StoreCorruption, PlanIntegrityError):
    """A stored plan event that does not decode to a valid plan: its row is named like any
    corrupt row, and it is a ``PlanIntegrityError`` like a plan that disagrees with itself."""


class UnsupportedFormat(StoreCorruption):
    """A stored row written in a newer format than this code reads (fail closed; ADR 0009).

    ``where`` names the row (session and sequence, or run and checkpoint
    version) and ``needed_version`` the format version a reader must know.
    """

    def __init__(
        self,
        where: str,
        needed_version: int,
        what: str = "row",
        *,
        reads_up_to: int,
        session_id: str = "",
        sequence: int | None = None,
    ) -> None:
        StoreError.__init__(
            self,
            f"{where}: {what} is written in format version {needed_version}; this ctxengine reads up to "
            f"version {reads_up_to}. Upgrade this worker before it reads the session "
            "(nothing was skipped)",
        )
        self.where = where
        self.needed_version = needed_version
        self.session_id = session_id
        self.sequence = sequence
        self.reason = f"needs format version {needed_version}"


class FormatDisabled(ContextError):
    """An event type this deployment does not write yet (the rolling-upgrade switch, ADR 0009)."""


class IdempotencyConflict(ContextError):
    """The same derivation key was appended again with a different payload."""


class LeaseLost(ContextError):
    """A checkpoint write under a lease that a newer claim has fenced."""


class CompactionDepthExceeded(ContextError):
    """Compaction would summarize a summary beyond the maximum depth."""


class StaleConfirmation(ContextError):
    """A confirmation names a version or digest other than the one displayed."""


class ProtocolStateError(ContextError):
    """A protocol operation that its current stage does not allow."""


class ProjectionContractError(ContextError):
    """A phase projection with a missing or extra symbol."""


class UndeclaredRegionClass(ContextError):
    """An item class that the region table does not declare."""


class PlanningError(ContextError):
    """Concurrent planners kept disagreeing about the next epoch."""


class SessionNotFound(ContextError, LookupError):
    """The store holds no event for the session."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no events for session {session_id!r} in this store")
        self.session_id = session_id


class RunNotFound(ContextError, LookupError):
    """No run of ``run_id`` to resume in this store; ``reason`` says what is missing."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"run {run_id!r}: {reason}")
        self.run_id = run_id
        self.reason = reason


class TurnStateError(ContextError):
    """A session-API call the turn is not ready for: ``run_id`` names the turn's run, ``call``
    the method, ``state`` where the turn stands (``"awaiting request"``, ``"finished"``)."""

    def __init__(self, run_id: str, call: str, state: str, hint: str) -> None:
        super().__init__(f"run {run_id!r}: {call} while the turn is {state}: {hint}")
        self.run_id = run_id
        self.call = call
        self.state = state


class WorkingStateLimitExceeded(ContextError):
    """A working-state transition that would break a cap: ``field`` would hold ``attempted``
    (entries or tokens) where ``limit`` is the most allowed. Nothing is evicted to make room."""

    def __init__(self, field: str, limit: int, attempted: int, detail: str = "") -> None:
        message = f"working state {field}: {attempted} exceeds the limit of {limit}"
        if detail:
            message = f"{message} ({detail})"
        super().__init__(message)
        self.field = field
        self.limit = limit
        self.attempted = attempted


__all__ = [
    "ArgumentError",
    "BackendError",
    "BackendFallbackWarning",
    "CanonicalizationError",
    "CheckpointCorruption",
    "CompactionDepthExceeded",
    "ContextError",
    "ContextOverflow",
    "ConversionError",
    "CorruptPlan",
    "EstimatorError",
    "FieldTooLarge",
    "FormatDisabled",
    "IdempotencyConflict",
    "LeaseLost",
    "ModelValidationError",
    "OrphanedToolPair",
    "PlanIntegrityError",
    "PlanningError",
    "PolicyError",
    "ProjectionContractError",
    "ProtocolStateError",
    "RunNotFound",
    "SessionNotFound",
    "StaleConfirmation",
    "StatementTimeout",
    "StoreCorruption",
    "StoreError",
    "StoreOpenError",
    "StorePredictionMissed",
    "StoreUnavailable",
    "TurnStateError",
    "UndeclaredRegionClass",
    "UnsupportedFormat",
    "WorkingStateLimitExceeded",
]
