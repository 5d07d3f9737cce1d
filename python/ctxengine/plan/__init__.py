"""Durable context plans (SPEC section 4): Region A pinned per epoch, and the tool gate.

``prefix`` holds Region A as data (blocks, skill catalog, tool schema hash,
cache breakpoints) and ``framing`` its platform text; ``context_plan`` the
immutable plan of one epoch; ``planner`` writes, reuses and rotates plans
through the event log; ``gate`` authorizes tool calls at call time.
"""

from __future__ import annotations

from .context_plan import ContextPlan
from .framing import PLATFORM_POLICY
from .gate import ToolDecision, ToolGate
from .planner import (
    BUILDER_V1,
    BUILDER_V2,
    BUILDER_VERSION,
    EPOCH_ROTATED,
    PLAN_CREATED,
    PLAN_EVENT_TYPES,
    ROTATION_REASONS,
    STABLE_BODY_VERSIONS,
    ContextPlanner,
    PlanningError,
)
from .prefix import CACHE_BREAKPOINTS, PREFIX_FRAMING_TOKENS, SkillEntry, prefix_blocks, tool_schema_hash

__all__ = [
    "BUILDER_V1",
    "BUILDER_V2",
    "BUILDER_VERSION",
    "CACHE_BREAKPOINTS",
    "EPOCH_ROTATED",
    "PLAN_CREATED",
    "PLAN_EVENT_TYPES",
    "PLATFORM_POLICY",
    "PREFIX_FRAMING_TOKENS",
    "ROTATION_REASONS",
    "STABLE_BODY_VERSIONS",
    "ContextPlan",
    "ContextPlanner",
    "PlanningError",
    "SkillEntry",
    "ToolDecision",
    "ToolGate",
    "prefix_blocks",
    "tool_schema_hash",
]
