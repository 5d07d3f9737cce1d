"""Region A as data: the prefix blocks in their fixed order, the skill catalog entries,
the tool schema hash and the cache breakpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.canonical import payload_hash
from ..errors import ModelValidationError
from ..model import ToolSpec

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


# Cache breakpoints, as indices into the rendered prefix (platform policy,
# agent instructions, skill catalog, memory snapshot). Providers cache tools
# before the system prompt, so index 1 covers tools, platform and agent; 3 is
# the end of the prefix.
CACHE_BREAKPOINTS = (1, 3)


__all__ = [
    "CACHE_BREAKPOINTS",
    "PREFIX_FRAMING_TOKENS",
    "SkillEntry",
    "prefix_blocks",
    "tool_schema_hash",
]
