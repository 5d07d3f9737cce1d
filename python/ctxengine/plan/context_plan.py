"""``ContextPlan``: the complete, immutable plan of one epoch of a session, validated on
construction and on load."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..core.budget import ContextBudget
from ..core.canonical import payload_hash
from ..errors import CorruptPlan, PlanIntegrityError
from ..model import ResolvedModel, ToolSpec
from .prefix import SkillEntry, prefix_blocks, tool_schema_hash

HEURISTIC = "heuristic"
# The methods a plan may record (the reference's ``tokenize.METHODS``; kept here so
# that a plan is validated without loading a tokenizer).
COUNTING_METHODS = frozenset({HEURISTIC, "o200k_base", "cl100k_base"})


@dataclass(frozen=True, slots=True)
class ContextPlan:
    """The complete, immutable plan of one epoch of a session."""

    session_id: str
    epoch: int
    prefix_sha256: str
    prefix_tokens: int
    model_id: str
    model: ResolvedModel
    tool_names: tuple[str, ...]
    tool_specs: tuple[ToolSpec, ...]
    tool_schema_sha256: str
    platform_policy: str
    agent_id: str
    agent_version: str
    agent_instructions: str
    memory_snapshot: str
    skill_catalog: tuple[SkillEntry, ...]
    cache_breakpoints: tuple[int, ...]
    policy_version: str
    builder_version: str
    budget: ContextBudget
    created_at: datetime
    reason: str = "initial"
    # How this plan's tokens are counted (ADR 0012): ``"heuristic"`` or an encoding
    # such as ``"o200k_base"``. ``None`` for a plan written before plans recorded it:
    # it counts with the byte heuristic for its whole epoch.
    counting: str | None = None
    _blocks: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_names", tuple(self.tool_names))
        object.__setattr__(self, "tool_specs", tuple(self.tool_specs))
        object.__setattr__(self, "skill_catalog", tuple(self.skill_catalog))
        object.__setattr__(self, "cache_breakpoints", tuple(self.cache_breakpoints))
        where = f"plan {self.session_id!r} epoch {self.epoch}"
        spec_names = tuple(spec.name for spec in self.tool_specs)
        if self.tool_names != spec_names:
            raise PlanIntegrityError(
                f"{where}: tool names {list(self.tool_names)} != spec names {list(spec_names)}"
            )
        actual = tool_schema_hash(self.tool_specs)
        if actual != self.tool_schema_sha256:
            raise PlanIntegrityError(
                f"{where}: tool schema hash {self.tool_schema_sha256} != hash of specs {actual}"
            )
        if self.model.model_id != self.model_id:
            raise PlanIntegrityError(f"{where}: model_id {self.model_id!r} != model {self.model.model_id!r}")
        blocks = prefix_blocks(
            self.platform_policy,
            self.agent_instructions,
            self.tool_specs,
            self.skill_catalog,
            self.memory_snapshot,
        )
        prefix = payload_hash(blocks)
        if prefix != self.prefix_sha256:
            raise PlanIntegrityError(f"{where}: prefix hash {self.prefix_sha256} != hash of prefix {prefix}")
        if self.epoch < 1:
            raise PlanIntegrityError(f"{where}: epoch must be >= 1")
        if self.counting is not None and self.counting not in COUNTING_METHODS:
            raise PlanIntegrityError(
                f"{where}: unknown counting method {self.counting!r}; "
                f"known: {', '.join(sorted(COUNTING_METHODS))}"
            )
        object.__setattr__(self, "_blocks", blocks)

    @property
    def identity(self) -> tuple[str, str, str, str, str]:
        """What decides reuse: (model_id, policy_version, builder_version, prefix hash,
        counting method); a plan that records no method counts with the heuristic."""
        return (
            self.model_id,
            self.policy_version,
            self.builder_version,
            self.prefix_sha256,
            self.counting_method,
        )

    @property
    def counting_method(self) -> str:
        return HEURISTIC if self.counting is None else self.counting

    @property
    def counting_key(self) -> str:
        """The model id the estimator is called with for this plan: the model id and
        the plan's counting method (``openai:gpt-4o#o200k_base``), so every build of
        the epoch counts the way its prefix was measured, whatever the estimator's
        table says today."""
        return f"{self.model_id}#{self.counting_method}"

    def prefix(self) -> list[dict[str, Any]]:
        """The Region A blocks (a fresh list; the plan stays immutable)."""
        return [dict(block) for block in self._blocks]

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "epoch": self.epoch,
            "prefix_sha256": self.prefix_sha256,
            "prefix_tokens": self.prefix_tokens,
            "model_id": self.model_id,
            "model": self.model.to_dict(),
            "tool_names": list(self.tool_names),
            "tool_specs": [spec.to_dict() for spec in self.tool_specs],
            "tool_schema_sha256": self.tool_schema_sha256,
            "platform_policy": self.platform_policy,
            "agent_id": self.agent_id,
            "agent_version": self.agent_version,
            "agent_instructions": self.agent_instructions,
            "memory_snapshot": self.memory_snapshot,
            "skill_catalog": [entry.to_dict() for entry in self.skill_catalog],
            "cache_breakpoints": list(self.cache_breakpoints),
            "policy_version": self.policy_version,
            "builder_version": self.builder_version,
            "budget": self.budget.to_dict(),
            "created_at": self.created_at.isoformat(),
            "reason": self.reason,
            # Absent for plans without a recorded method: their bytes never change.
            **({} if self.counting is None else {"counting": self.counting}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ContextPlan:
        """Decode and validate; a plan that disagrees with itself raises ``PlanIntegrityError``."""
        try:
            return cls(
                session_id=d["session_id"],
                epoch=d["epoch"],
                prefix_sha256=d["prefix_sha256"],
                prefix_tokens=d["prefix_tokens"],
                model_id=d["model_id"],
                model=ResolvedModel.from_dict(d["model"]),
                tool_names=tuple(d["tool_names"]),
                tool_specs=tuple(ToolSpec.from_dict(s) for s in d["tool_specs"]),
                tool_schema_sha256=d["tool_schema_sha256"],
                platform_policy=d["platform_policy"],
                agent_id=d["agent_id"],
                agent_version=d["agent_version"],
                agent_instructions=d["agent_instructions"],
                memory_snapshot=d["memory_snapshot"],
                skill_catalog=tuple(SkillEntry.from_dict(s) for s in d["skill_catalog"]),
                cache_breakpoints=tuple(d["cache_breakpoints"]),
                policy_version=d["policy_version"],
                builder_version=d["builder_version"],
                budget=ContextBudget.from_dict(d["budget"]),
                created_at=datetime.fromisoformat(d["created_at"]),
                reason=d.get("reason", "initial"),
                counting=d.get("counting"),
            )
        except PlanIntegrityError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanIntegrityError(f"malformed plan: {type(exc).__name__}: {exc}") from exc


def stored_plan(event: Any) -> ContextPlan:
    """The plan a ``context.plan.created``/``context.epoch.rotated`` event carries; a payload
    without a valid plan is ``CorruptPlan`` naming the session and sequence (never a KeyError)."""
    data = event.payload.get("plan")
    if not isinstance(data, dict):
        raise CorruptPlan(event.session_id, event.sequence, "plan event has no 'plan' object")
    try:
        return ContextPlan.from_dict(data)
    except PlanIntegrityError as exc:
        raise CorruptPlan(event.session_id, event.sequence, f"stored plan is invalid: {exc}") from None


__all__ = ["COUNTING_METHODS", "HEURISTIC", "ContextPlan", "stored_plan"]
