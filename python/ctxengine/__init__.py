"""ctxengine: the context engine of an LLM agent runtime.

A frozen, cache-stable prefix pinned in a durable plan, and a turn body
assembled under an absolute token budget. The hot core runs in Rust
(``ctxengine._core``) with a byte-identical pure-Python twin
(``ctxengine.reference``); see ``use_backend``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _aliases, providers
from .assembly.builder import Assembly, ContextBuilder, Pressure
from .assembly.request import ModelRequest, RenderedItem
from .core.backends import backend, use_backend
from .core.budget import BudgetPolicy, ContextBudget, allocate, check_prefix_class
from .core.canonical import canonical_json, payload_hash
from .core.estimator import Estimator, TokenEstimator
from .core.history import select_history, validate_tool_pairs
from .errors import (
    BackendError,
    CanonicalizationError,
    CompactionDepthExceeded,
    ContextError,
    ContextOverflow,
    EstimatorError,
    IdempotencyConflict,
    LeaseLost,
    ModelValidationError,
    OrphanedToolPair,
    PlanIntegrityError,
    PolicyError,
    ProjectionContractError,
    ProtocolStateError,
    StaleConfirmation,
    StoreCorruption,
    WorkingStateLimitExceeded,
)
from .model import (
    AgentSpec,
    AssistantMessage,
    Checkpoint,
    ConversationItem,
    ElidedSpan,
    FileRef,
    KnowledgePassage,
    Principal,
    ReasoningItem,
    ResolvedModel,
    RunContext,
    SkillBody,
    StateEntry,
    SystemMessage,
    Task,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSpec,
    TrustLevel,
    UserMessage,
    WorkingState,
    item_from_dict,
)
from .model.clock import Clock, FixedClock, SystemClock
from .plan import ContextPlan, ContextPlanner, SkillEntry, ToolDecision, ToolGate
from .runtime.checkpoints import CheckpointWriter, latest_checkpoint, write_checkpoint
from .runtime.compaction import CompactionResult, StructuredCompactor
from .runtime.loop import ContextLoop
from .runtime.session import append_item, session_history
from .runtime.working_state import (
    UPDATE_WORKING_STATE_TOOL,
    WorkingStateLimits,
    WorkingStateManager,
    carry_working_state,
)
from .stores import MemoryStore, PostgresStore, SQLiteStore, open_store
from .stores.events import Event, Lease, NewEvent, Visibility

__version__ = "0.1.0"

# Old module paths (``ctxengine.builder``...) keep importing, with a warning.
_aliases.install()

if not TYPE_CHECKING:  # hidden from type checkers, so ``ce.<typo>`` stays an error there

    def __getattr__(name: str) -> object:
        """``ctxengine.<moved module>`` as an attribute, as before the layout (deprecated)."""
        if f"{__name__}.{name}" in _aliases.MOVED:
            return _aliases.moved_module(name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentSpec",
    "Assembly",
    "AssistantMessage",
    "BackendError",
    "BudgetPolicy",
    "CanonicalizationError",
    "Checkpoint",
    "Clock",
    "CompactionDepthExceeded",
    "ContextBudget",
    "ContextBuilder",
    "ContextError",
    "ContextOverflow",
    "ContextPlan",
    "ContextPlanner",
    "ConversationItem",
    "ElidedSpan",
    "Estimator",
    "EstimatorError",
    "Event",
    "FileRef",
    "FixedClock",
    "IdempotencyConflict",
    "KnowledgePassage",
    "Lease",
    "LeaseLost",
    "MemoryStore",
    "ModelRequest",
    "ModelValidationError",
    "NewEvent",
    "OrphanedToolPair",
    "PlanIntegrityError",
    "PolicyError",
    "PostgresStore",
    "Pressure",
    "Principal",
    "ProjectionContractError",
    "ProtocolStateError",
    "ReasoningItem",
    "RenderedItem",
    "ResolvedModel",
    "RunContext",
    "SQLiteStore",
    "SkillBody",
    "SkillEntry",
    "StaleConfirmation",
    "StateEntry",
    "StoreCorruption",
    "SystemClock",
    "SystemMessage",
    "Task",
    "TextPart",
    "TokenEstimator",
    "ToolCall",
    "ToolDecision",
    "ToolGate",
    "ToolResult",
    "ToolSpec",
    "TrustLevel",
    "UserMessage",
    "Visibility",
    "WorkingState",
    "allocate",
    "append_item",
    "backend",
    "canonical_json",
    "check_prefix_class",
    "item_from_dict",
    "open_store",
    "payload_hash",
    "providers",
    "select_history",
    "session_history",
    "use_backend",
    "validate_tool_pairs",
    "__version__",
    # issue 5: compaction, checkpoints, working state, the runtime loop
    "UPDATE_WORKING_STATE_TOOL",
    "CheckpointWriter",
    "CompactionResult",
    "ContextLoop",
    "StructuredCompactor",
    "WorkingStateLimitExceeded",
    "WorkingStateLimits",
    "WorkingStateManager",
    "carry_working_state",
    "latest_checkpoint",
    "write_checkpoint",
]
