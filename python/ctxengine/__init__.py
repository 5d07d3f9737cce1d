"""ctxengine: the context engine of an LLM agent runtime.

A frozen, cache-stable prefix pinned in a durable plan, and a turn body
assembled under an absolute token budget. The hot core runs in Rust
(``ctxengine._core``) with a byte-identical pure-Python twin
(``ctxengine.reference``); see ``use_backend``.
"""

from __future__ import annotations

from . import providers
from .backends import backend, use_backend
from .budget import BudgetPolicy, ContextBudget, allocate, check_prefix_class
from .builder import Assembly, ContextBuilder, Pressure
from .canonical import canonical_json, payload_hash
from .checkpoints import CheckpointWriter, latest_checkpoint, write_checkpoint
from .clock import Clock, FixedClock, SystemClock
from .compaction import CompactionResult, StructuredCompactor
from .errors import (
    BackendError,
    CanonicalizationError,
    CompactionDepthExceeded,
    ContextError,
    ContextOverflow,
    ConversionError,
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
from .estimator import Estimator, TokenEstimator
from .events import Event, Lease, NewEvent, Visibility
from .history import select_history, validate_tool_pairs
from .loop import ContextLoop
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
from .plan import ContextPlan, ContextPlanner, SkillEntry, ToolDecision, ToolGate
from .request import ModelRequest, RenderedItem
from .session import append_item, session_history
from .stores import MemoryStore, PostgresStore, SQLiteStore, open_store
from .working_state import (
    UPDATE_WORKING_STATE_TOOL,
    WorkingStateLimits,
    WorkingStateManager,
    carry_working_state,
)

__version__ = "0.1.0"

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
    "ConversionError",
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
