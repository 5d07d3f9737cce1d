"""Durable context plans (SPEC section 4, seed ADR-0043 decisions 1-4).

A plan pins a session's Region A prefix — platform policy and framing, agent
instructions, tool definitions, skill catalog, memory snapshot — with the
model, the measured prefix size and the budget. It is an idempotent session
event (``context.plan.created`` for epoch 1, ``context.epoch.rotated``
after), so any worker reconstructs the same plan from the log alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from .budget import BudgetPolicy, ContextBudget, allocate, check_prefix_class
from .canonical import payload_hash
from .clock import Clock, SystemClock
from .errors import ContextError, IdempotencyConflict, ModelValidationError, PlanIntegrityError
from .estimator import Estimator, TokenEstimator
from .events import NewEvent, Visibility
from .framing import PLATFORM_POLICY
from .model import AgentSpec, Principal, ResolvedModel, ToolSpec

PLAN_CREATED = "context.plan.created"
EPOCH_ROTATED = "context.epoch.rotated"
PLAN_EVENT_TYPES = frozenset({PLAN_CREATED, EPOCH_ROTATED})
BUILDER_VERSION = "ctxengine-builder/1"
# Framing overhead of the whole prefix (system-message wrappers, tool array
# brackets) added once on top of the per-block estimates.
PREFIX_FRAMING_TOKENS = 16

ROTATION_REASONS = frozenset(
    {
        "initial",
        "model_changed",
        "policy_version_changed",
        "builder_version_changed",
        "agent_prefix_changed",
    }
)


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
        object.__setattr__(self, "_blocks", blocks)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """What decides reuse: (model_id, policy_version, builder_version, prefix hash)."""
        return (self.model_id, self.policy_version, self.builder_version, self.prefix_sha256)

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
            )
        except PlanIntegrityError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanIntegrityError(f"malformed plan: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """The gate's answer. A refusal is content the model can read, not an exception."""

    allowed: bool
    tool_name: str
    reason: str = "allowed"
    missing_scopes: tuple[str, ...] = ()

    def refusal(self) -> dict[str, Any]:
        return {
            "error": "tool_call_refused",
            "tool": self.tool_name,
            "reason": self.reason,
            "missing_scopes": list(self.missing_scopes),
            "message": self.message,
        }

    @property
    def message(self) -> str:
        if self.allowed:
            return f"{self.tool_name} may be called."
        if self.reason == "tool_not_in_plan":
            return f"The tool {self.tool_name!r} is not available in this session."
        scopes = ", ".join(self.missing_scopes)
        return (
            f"The tool {self.tool_name!r} was not called: the current user lacks the scope(s) {scopes}. "
            "Do not retry it; continue without it or ask the user."
        )


class ToolGate:
    """Call-time authorization: scopes are checked when a tool is called, never by editing the prefix.

    ``required_scopes`` maps a tool name to the scopes a principal must hold.
    """

    def __init__(self, required_scopes: Mapping[str, Iterable[str]] | None = None) -> None:
        self._required = {name: frozenset(scopes) for name, scopes in (required_scopes or {}).items()}

    def check(self, plan: ContextPlan, principal: Principal, tool_name: str) -> ToolDecision:
        if tool_name not in plan.tool_names:
            return ToolDecision(False, tool_name, "tool_not_in_plan")
        missing = tuple(sorted(self._required.get(tool_name, frozenset()) - principal.scopes))
        if missing:
            return ToolDecision(False, tool_name, "scope_missing", missing)
        return ToolDecision(True, tool_name)


class PlanningError(ContextError):
    """Concurrent planners kept disagreeing about the next epoch."""


class ContextPlanner:
    """Creates, reuses and rotates a session's plan; the event log is the only record."""

    _MAX_ATTEMPTS = 8

    def __init__(
        self,
        store: Any,
        *,
        estimator: Estimator | None = None,
        policy: BudgetPolicy | None = None,
        clock: Clock | None = None,
        builder_version: str = BUILDER_VERSION,
        platform_policy: str = PLATFORM_POLICY,
        cache_size: int = 1024,
    ) -> None:
        self.store = store
        self.estimator: Estimator = estimator if estimator is not None else cast(Estimator, TokenEstimator())
        self.policy = policy or BudgetPolicy()
        self.clock: Clock = clock or SystemClock()
        self.builder_version = builder_version
        self.platform_policy = platform_policy
        self._cache_size = cache_size
        # session_id -> (current plan or None, last sequence scanned)
        self._cache: OrderedDict[str, tuple[ContextPlan | None, int]] = OrderedDict()

    # -- reading -------------------------------------------------------------

    async def current(self, session_id: str) -> ContextPlan | None:
        """The greatest-epoch plan in the log (scanning only events not seen before)."""
        plan, seen = self._cache.get(session_id, (None, 0))
        events = await self.store.events.read(session_id, after=seen, types=PLAN_EVENT_TYPES)
        for event in events:
            candidate = ContextPlan.from_dict(event.payload["plan"])
            if plan is None or candidate.epoch > plan.epoch:
                plan = candidate
            seen = max(seen, event.sequence)
        self._remember(session_id, plan, seen)
        return plan

    def cached(self, session_id: str) -> ContextPlan | None:
        """The plan last seen for ``session_id`` by ``plan()``/``current()`` in this process, if any."""
        entry = self._cache.get(session_id)
        return entry[0] if entry is not None else None

    def _remember(self, session_id: str, plan: ContextPlan | None, seen: int) -> None:
        self._cache[session_id] = (plan, seen)
        self._cache.move_to_end(session_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # -- writing -------------------------------------------------------------

    def draft(
        self,
        session_id: str,
        epoch: int,
        agent: AgentSpec,
        model: ResolvedModel,
        tools: Sequence[ToolSpec],
        *,
        policy_version: str,
        memory_snapshot: str = "",
        skill_catalog: Sequence[SkillEntry] = (),
        reason: str = "initial",
    ) -> ContextPlan:
        """A validated plan (pure: measures, checks caps, allocates; writes nothing)."""
        specs = tuple(tools)
        catalog = tuple(skill_catalog)
        model_id = model.model_id
        est = self.estimator
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise PlanIntegrityError(f"plan {session_id!r}: duplicate tool names {names}")
        blocks = prefix_blocks(self.platform_policy, agent.instructions, specs, catalog, memory_snapshot)
        check_prefix_class(self.policy, "platform_policy", est.estimate_text(self.platform_policy, model_id))
        check_prefix_class(self.policy, "agent_instructions", est.estimate_text(agent.instructions, model_id))
        check_prefix_class(self.policy, "tool_definitions", est.estimate_tools(specs, model_id), len(specs))
        check_prefix_class(
            self.policy,
            "skill_catalog",
            est.estimate([b for b in blocks[3]["skills"]], model_id),
            len(catalog),
        )
        memory_lines = [line for line in memory_snapshot.splitlines() if line.strip()]
        check_prefix_class(
            self.policy, "memory_snapshot", est.estimate_text(memory_snapshot, model_id), len(memory_lines)
        )
        prefix_tokens = est.estimate(blocks, model_id) + PREFIX_FRAMING_TOKENS
        budget = allocate(model, prefix_tokens, self.policy)
        return ContextPlan(
            session_id=session_id,
            epoch=epoch,
            prefix_sha256=payload_hash(blocks),
            prefix_tokens=prefix_tokens,
            model_id=model_id,
            model=model,
            tool_names=tuple(names),
            tool_specs=specs,
            tool_schema_sha256=tool_schema_hash(specs),
            platform_policy=self.platform_policy,
            agent_id=agent.agent_id,
            agent_version=agent.version,
            agent_instructions=agent.instructions,
            memory_snapshot=memory_snapshot,
            skill_catalog=catalog,
            cache_breakpoints=CACHE_BREAKPOINTS,
            policy_version=policy_version,
            builder_version=self.builder_version,
            budget=budget,
            created_at=self.clock.now(),
            reason=reason,
        )

    async def plan(
        self,
        session_id: str,
        agent: AgentSpec,
        principal: Principal,
        model: ResolvedModel,
        tools: Sequence[ToolSpec],
        *,
        policy_version: str,
        memory_snapshot: str = "",
        skill_catalog: Sequence[SkillEntry] = (),
    ) -> ContextPlan:
        """Return the current plan if its identity matches; otherwise write the next epoch.

        Called after routing, immediately before the first model request of a run.
        """
        for _ in range(self._MAX_ATTEMPTS):
            current = await self.current(session_id)
            epoch = 1 if current is None else current.epoch + 1
            wanted = self.draft(
                session_id,
                epoch,
                agent,
                model,
                tools,
                policy_version=policy_version,
                memory_snapshot=memory_snapshot,
                skill_catalog=skill_catalog,
            )
            if current is not None and current.identity == wanted.identity:
                return current
            reason = "initial" if current is None else _rotation_reason(current, wanted)
            stored = await self._append(_with_reason(wanted, reason), principal)
            if stored is not None:
                return stored
        raise PlanningError(f"session {session_id!r}: no stable plan after {self._MAX_ATTEMPTS} attempts")

    async def rotate(
        self, session_id: str, reason: str, *, principal: Principal | None = None
    ) -> ContextPlan:
        """Start a new epoch with the current plan's content and ``reason``."""
        if not isinstance(reason, str) or not reason:
            raise ModelValidationError("ContextPlanner", "reason", "a rotation needs a non-empty reason")
        for _ in range(self._MAX_ATTEMPTS):
            current = await self.current(session_id)
            if current is None:
                raise PlanIntegrityError(f"session {session_id!r} has no plan to rotate")
            data = current.to_dict()
            data.update(epoch=current.epoch + 1, reason=reason, created_at=self.clock.now().isoformat())
            stored = await self._append(ContextPlan.from_dict(data), principal)
            if stored is not None:
                return stored
        raise PlanningError(f"session {session_id!r}: rotation kept racing")

    async def _append(self, plan: ContextPlan, principal: Principal | None) -> ContextPlan | None:
        """Append the plan event; ``None`` when another worker won that epoch with a different plan."""
        event_type = PLAN_CREATED if plan.epoch == 1 else EPOCH_ROTATED
        new = NewEvent(
            session_id=plan.session_id,
            type=event_type,
            payload={"plan": plan.to_dict(), "reason": plan.reason},
            derivation_key=f"context.plan:{plan.session_id}:{plan.epoch}",
            actor=principal.principal_id if principal is not None else "runtime",
            visibility=Visibility.session(),
        )
        try:
            event = await self.store.events.append(new)
        except IdempotencyConflict:
            self._forget(plan.session_id)
            # Another worker wrote this epoch first. Re-read; if its plan is the
            # one we wanted, it is ours too; otherwise plan again on top of it.
            winner = await self.current(plan.session_id)
            if winner is not None and winner.epoch == plan.epoch and winner.identity == plan.identity:
                return winner
            return None
        stored = ContextPlan.from_dict(event.payload["plan"])
        _, seen = self._cache.get(plan.session_id, (None, 0))
        # Keep the scan position: events between it and ours are re-read next time.
        self._remember(plan.session_id, stored, seen)
        return stored

    def _forget(self, session_id: str) -> None:
        self._cache.pop(session_id, None)


def _rotation_reason(current: ContextPlan, wanted: ContextPlan) -> str:
    if current.model_id != wanted.model_id:
        return "model_changed"
    if current.policy_version != wanted.policy_version:
        return "policy_version_changed"
    if current.builder_version != wanted.builder_version:
        return "builder_version_changed"
    return "agent_prefix_changed"


def _with_reason(plan: ContextPlan, reason: str) -> ContextPlan:
    if plan.reason == reason:
        return plan
    data = plan.to_dict()
    data["reason"] = reason
    return ContextPlan.from_dict(data)


__all__ = [
    "BUILDER_VERSION",
    "CACHE_BREAKPOINTS",
    "EPOCH_ROTATED",
    "PLAN_CREATED",
    "ContextPlan",
    "ContextPlanner",
    "PlanningError",
    "SkillEntry",
    "ToolDecision",
    "ToolGate",
    "prefix_blocks",
    "tool_schema_hash",
]
