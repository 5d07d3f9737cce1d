"""Value types (SPEC section 2): frozen, slotted, hashable, JSON round-trippable; no I/O.

``ctxengine.model`` is the import path of the value types; the modules
inside split them by concept: ``trust``, ``content`` (parts), ``items``
(conversation items), ``specs`` (tool, model, agent, principal, run),
``state`` (working state), ``checkpoint`` (the run checkpoint and its
parts) and ``clock`` (time enters only through a ``Clock``).
"""

from __future__ import annotations

from .checkpoint import Checkpoint, ElidedSpan, KnowledgePassage, SkillBody
from .checks import JSON as JSON  # the old module's alias for JSON-shaped values
from .clock import Clock, FixedClock, SystemClock
from .content import Content, ContentPart, FileRef, TextPart, content_text
from .items import (
    ITEM_TYPES,
    AssistantMessage,
    ConversationItem,
    ReasoningItem,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    item_from_dict,
    with_seq,
)
from .specs import AgentSpec, Principal, ResolvedModel, RunContext, ToolSpec
from .state import TASK_STATUSES, StateEntry, Task, WorkingState
from .trust import TrustLevel

__all__ = [
    "TASK_STATUSES",
    "AgentSpec",
    "Checkpoint",
    "ElidedSpan",
    "KnowledgePassage",
    "SkillBody",
    "StateEntry",
    "Task",
    "WorkingState",
    "AssistantMessage",
    "Content",
    "ContentPart",
    "ConversationItem",
    "FileRef",
    "ITEM_TYPES",
    "Principal",
    "ReasoningItem",
    "ResolvedModel",
    "RunContext",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "TrustLevel",
    "UserMessage",
    "content_text",
    "item_from_dict",
    "with_seq",
    # time (model/clock.py)
    "Clock",
    "FixedClock",
    "SystemClock",
]
