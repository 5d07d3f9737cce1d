"""Region A as data: the prefix blocks in their fixed order, the skill catalog entries,
the tool schema hash and the cache breakpoints."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.canonical import canonical_json, payload_hash
from ..errors import ModelValidationError
from ..model import ToolSpec, TrustLevel
from .envelope import envelope

# Framing overhead of the whole prefix (system-message wrappers, tool array
# brackets) added once on top of the per-block estimates.
PREFIX_FRAMING_TOKENS = 16


def tool_schema_hash(specs: Sequence[ToolSpec]) -> str:
    """SHA-256 of the canonical tool specifications, in advertised order."""
    return payload_hash([spec.to_dict() for spec in specs])


@dataclass(frozen=True, slots=True)
class SkillEntry:
    """One line of the skill catalog: a skill the model may load by name."""

    name: str
    description: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SkillEntry:
        try:
            return cls(str(d["name"]), str(d["description"]))
        except (KeyError, TypeError) as exc:
            raise ModelValidationError("SkillEntry", "<dict>", f"malformed: {exc}") from exc


def prefix_blocks(
    platform_policy: str,
    agent_instructions: str,
    tool_specs: Sequence[ToolSpec],
    skill_catalog: Sequence[SkillEntry],
    memory_snapshot: str,
) -> list[dict[str, Any]]:
    """Region A in its fixed order, as canonical-JSON-ready blocks."""
    return [
        {"class": "platform_policy", "text": platform_policy},
        {"class": "agent_instructions", "text": agent_instructions},
        {"class": "tool_definitions", "tools": [spec.to_dict() for spec in tool_specs]},
        {"class": "skill_catalog", "skills": [entry.to_dict() for entry in skill_catalog]},
        {"class": "memory_snapshot", "text": memory_snapshot},
    ]


# The rendered prefix: one system message per class, in this order.
PREFIX_MESSAGE_CLASSES = ("platform_policy", "agent_instructions", "skill_catalog", "memory_snapshot")


def prefix_texts(
    platform_policy: str,
    agent_instructions: str,
    skill_catalog: Sequence[SkillEntry],
    memory_snapshot: str,
) -> tuple[str, str, str, str]:
    """The text of each rendered prefix message, as the model sees it (the memory
    snapshot fenced in its envelope); the tools travel beside them."""
    catalog = "\n".join(f"- {entry.name}: {entry.description}" for entry in skill_catalog) or "(none)"
    memory = memory_snapshot or "(empty)"
    digest = hashlib.sha256(canonical_json(["memory", memory])).digest()
    memory_text = envelope(memory, trust=TrustLevel.MEMORY, source="memory_snapshot", digest=digest)
    return (
        platform_policy,
        agent_instructions,
        "Skills you can load by name:\n" + catalog,
        "Memory at session start:\n" + memory_text,
    )


def prefix_messages(
    platform_policy: str,
    agent_instructions: str,
    skill_catalog: Sequence[SkillEntry],
    memory_snapshot: str,
    *,
    omit_empty: bool = False,
) -> tuple[tuple[str, str], ...]:
    """Each rendered prefix message as (class, text). ``omit_empty`` (builder version 3, ADR
    0027): an empty skill catalog and an empty memory snapshot render no message at all
    (before it: "(none)" and a fenced "(empty)", about 80 tokens on every request)."""
    texts = prefix_texts(platform_policy, agent_instructions, skill_catalog, memory_snapshot)
    messages = tuple(zip(PREFIX_MESSAGE_CLASSES, texts, strict=True))
    if not omit_empty:
        return messages
    empty = {"skill_catalog": not skill_catalog, "memory_snapshot": not memory_snapshot}
    return tuple(m for m in messages if not empty.get(m[0], False))


def prefix_breakpoints(messages: int) -> tuple[int, ...]:
    """The cache breakpoints of a prefix of ``messages`` rendered messages that omits empty
    ones (builder version 3): after the agent instructions and at the prefix's end."""
    return tuple(sorted({min(1, messages - 1), messages - 1}))


# Cache breakpoints, as indices into the rendered prefix (platform policy,
# agent instructions, skill catalog, memory snapshot). Providers cache tools
# before the system prompt, so index 1 covers tools, platform and agent; 3 is
# the end of the prefix.
CACHE_BREAKPOINTS = (1, 3)


__all__ = [
    "CACHE_BREAKPOINTS",
    "PREFIX_FRAMING_TOKENS",
    "PREFIX_MESSAGE_CLASSES",
    "SkillEntry",
    "prefix_blocks",
    "prefix_breakpoints",
    "prefix_messages",
    "prefix_texts",
    "tool_schema_hash",
]
