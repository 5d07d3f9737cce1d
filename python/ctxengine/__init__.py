"""ctxengine: the context engine of an LLM agent runtime.

A frozen, cache-stable prefix pinned in a durable plan, and a turn body
assembled under an absolute token budget. The hot core runs in Rust
(``ctxengine._core``) with a byte-identical pure-Python twin
(``ctxengine.reference``); see ``use_backend``.

This module is the public face: ``__all__`` holds the SPEC's public names.
It leads with the session API (``Engine``, ``Session``, ``Turn``: an agent
loop in a few lines, ``ctxengine.engine``); the layers behind it (``model``,
``core``, ``stores``, ``plan``, ``assembly``, ``runtime``, ``phases``,
``providers``) are the advanced layer, described in ``adr/0006-layer-map.md``.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from . import phases, providers
from .assembly.builder import Assembly, ContextBuilder, Pressure
from .assembly.request import ModelRequest
from .assembly.request import RenderedItem as RenderedItem
from .assembly.router import RouterReply
from .core.backends import backend, use_backend
from .core.budget import BudgetPolicy, ContextBudget, allocate
from .core.budget import check_prefix_class as check_prefix_class
from .core.canonical import canonical_json, payload_hash
from .core.estimator import Estimator as Estimator
from .core.estimator import TokenEstimator
from .core.history import select_history, validate_tool_pairs
from .core.memory import MemoryLimits as MemoryLimits
from .core.memory import memory_limits as memory_limits
from .core.memory import set_memory_limits as set_memory_limits
from .errors import (
    ArgumentError,
    BackendError,
    BackendFallbackWarning,
    CanonicalizationError,
    CheckpointCorruption,
    CompactionDepthExceeded,
    ContextError,
    ContextOverflow,
    ConversionError,
    CorruptPlan,
    EstimatorError,
    FieldTooLarge,
    FormatDisabled,
    IdempotencyConflict,
    LeaseLost,
    ModelValidationError,
    OrphanedToolPair,
    PlanIntegrityError,
    PlanningError,
    PolicyError,
    ProjectionContractError,
    ProtocolStateError,
    RunNotFound,
    SessionNotFound,
    StaleConfirmation,
    StatementTimeout,
    StoreCorruption,
    StoreError,
    StoreOpenError,
    StoreUnavailable,
    TurnStateError,
    UndeclaredRegionClass,
    UnsupportedFormat,
    WorkingStateLimitExceeded,
)
from .model import (
    AgentSpec,
    AssistantMessage,
    Checkpoint,
    Clock,
    ConversationItem,
    ElidedSpan,
    FileRef,
    FixedClock,
    KnowledgePassage,
    Principal,
    ReasoningItem,
    ResolvedModel,
    RunContext,
    SkillBody,
    StateEntry,
    SystemClock,
    SystemMessage,
    Task,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSpec,
    TrustLevel,
    UserMessage,
    WorkingState,
)
from .model import item_from_dict as item_from_dict
from .plan import ContextPlan, ContextPlanner, SkillEntry, ToolGate
from .plan import ToolDecision as ToolDecision
from .runtime.checkpoints import CheckpointWriter, latest_checkpoint, write_checkpoint
from .runtime.compaction import CompactionResult, StructuredCompactor
from .runtime.compaction_record import Compactor
from .runtime.loop import ContextLoop
from .runtime.model_compactor import ModelCompactor
from .runtime.session import append_item, session_history
from .runtime.summary_input import CompactionPrompt
from .runtime.working_state import (
    UPDATE_WORKING_STATE_TOOL,
    WorkingStateLimits,
    WorkingStateManager,
    carry_working_state,
)
from .stores import MemoryStore, SQLiteStore, open_store
from .stores.events import CheckpointStore, Event, EventLog, Lease, NewEvent, Store, Visibility

if TYPE_CHECKING:
    from .engine import Engine, Session, Turn, register_model
    from .stores.postgres import PostgresStore

# Quiet unless the application configures logging: each layer logs to its own child of this
# logger (``ctxengine.stores``, ``ctxengine.assembly``, ...; ADR 0017).
logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.2.0"


#: The session API, loaded on first use: it brings the foreign formats (``interop``) with it.
_ENGINE_NAMES = frozenset({"Engine", "Session", "Turn", "register_model"})


def __getattr__(name: str) -> Any:
    # ``PostgresStore`` imports psycopg, which only a PostgreSQL store needs (the postgres
    # extra): loaded on first use (PEP 562), so ``import ctxengine`` stays without it.
    if name == "PostgresStore":
        from .stores import postgres_store_class

        return postgres_store_class()
    if name in _ENGINE_NAMES or name == "engine":
        engine = importlib.import_module(".engine", __name__)
        return engine if name == "engine" else getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The SPEC's public names (sections 1-10). Names public before the layout but not
# in the SPEC (imported above as ``X as X``: Estimator, RenderedItem, ToolDecision,
# check_prefix_class, item_from_dict) and ``__version__`` stay importable from
# here without being star-exported (ADR 0006).
__all__ = [
    # the session API (issue 41): the front door; everything below is the advanced layer
    "Engine",
    "Session",
    "Turn",
    "register_model",
    # section 1: one engine, two backends
    "backend",
    "use_backend",
    # section 2: value types and time
    "AgentSpec",
    "AssistantMessage",
    "Checkpoint",
    "ConversationItem",
    "ElidedSpan",
    "FileRef",
    "KnowledgePassage",
    "ModelRequest",
    "Principal",
    "ReasoningItem",
    "ResolvedModel",
    "RunContext",
    "SkillBody",
    "StateEntry",
    "SystemMessage",
    "Task",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "TrustLevel",
    "UserMessage",
    "WorkingState",
    "Clock",
    "FixedClock",
    "SystemClock",
    # section 3: canonical JSON, estimation, budget, the history cut
    "canonical_json",
    "payload_hash",
    "TokenEstimator",
    "BudgetPolicy",
    "ContextBudget",
    "allocate",
    "select_history",
    "validate_tool_pairs",
    # section 4: stores, session history, plans
    "EventLog",
    "CheckpointStore",
    "Store",
    "Event",
    "NewEvent",
    "Visibility",
    "Lease",
    "MemoryStore",
    "SQLiteStore",
    "PostgresStore",
    "open_store",
    "append_item",
    "session_history",
    "ContextPlan",
    "ContextPlanner",
    "SkillEntry",
    "ToolGate",
    # section 5: assembly and the provider renderers
    "Assembly",
    "ContextBuilder",
    "Pressure",
    "providers",
    # section 6: compaction, checkpoints, the runtime loop
    "CompactionResult",
    "StructuredCompactor",
    # model-backed compaction (issue 43, ADR 0026)
    "Compactor",
    "CompactionPrompt",
    "ModelCompactor",
    "RouterReply",
    "CheckpointWriter",
    "latest_checkpoint",
    "write_checkpoint",
    "ContextLoop",
    # section 7: working state
    "UPDATE_WORKING_STATE_TOOL",
    "WorkingStateLimits",
    "WorkingStateManager",
    "carry_working_state",
    # section 8: phase projections
    "phases",
    # sections 1 and 10: every error (ctxengine.errors)
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
    "StoreUnavailable",
    "TurnStateError",
    "UndeclaredRegionClass",
    "UnsupportedFormat",
    "WorkingStateLimitExceeded",
]
