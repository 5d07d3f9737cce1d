"""ctxengine: the context engine of an LLM agent runtime.

A frozen, cache-stable prefix pinned in a durable plan, and a turn body
assembled under an absolute token budget. The hot core runs in Rust
(``ctxengine._core``) with a byte-identical pure-Python twin
(``ctxengine.reference``); see ``use_backend``.
"""

from __future__ import annotations

from .backends import backend, use_backend
from .budget import BudgetPolicy, ContextBudget, allocate, check_prefix_class
from .canonical import canonical_json, payload_hash
from .clock import Clock, FixedClock, SystemClock
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
)
from .estimator import Estimator, TokenEstimator
from .history import select_history, validate_tool_pairs
from .model import (
    AgentSpec,
    AssistantMessage,
    ConversationItem,
    FileRef,
    Principal,
    ReasoningItem,
    ResolvedModel,
    RunContext,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSpec,
    TrustLevel,
    UserMessage,
    item_from_dict,
)

__version__ = "0.1.0"

__all__ = [
    "AgentSpec",
    "AssistantMessage",
    "BackendError",
    "BudgetPolicy",
    "CanonicalizationError",
    "Clock",
    "CompactionDepthExceeded",
    "ContextBudget",
    "ContextError",
    "ContextOverflow",
    "ConversationItem",
    "Estimator",
    "EstimatorError",
    "FileRef",
    "FixedClock",
    "IdempotencyConflict",
    "LeaseLost",
    "ModelValidationError",
    "OrphanedToolPair",
    "PlanIntegrityError",
    "PolicyError",
    "Principal",
    "ProjectionContractError",
    "ProtocolStateError",
    "ReasoningItem",
    "ResolvedModel",
    "RunContext",
    "StaleConfirmation",
    "StoreCorruption",
    "SystemClock",
    "SystemMessage",
    "TextPart",
    "TokenEstimator",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "TrustLevel",
    "UserMessage",
    "__version__",
    "allocate",
    "backend",
    "canonical_json",
    "check_prefix_class",
    "item_from_dict",
    "payload_hash",
    "select_history",
    "use_backend",
    "validate_tool_pairs",
]
