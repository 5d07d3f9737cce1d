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
from typing import Any, NoReturn, cast

from ..core.budget import BudgetPolicy, allocate, check_prefix_class
from ..core.canonical import payload_hash
from ..core.estimator import Estimator, TokenEstimator, load_tables
from ..errors import (
    ArgumentError,
    IdempotencyConflict,
    ModelValidationError,
    PlanIntegrityError,
    PlanningError,
)
from ..model import AgentSpec, Principal, ResolvedModel, ToolSpec
from ..model.clock import Clock, SystemClock
from ..stores.events import NewEvent, Visibility
from .context_plan import HEURISTIC, ContextPlan, stored_plan
from .framing import PLATFORM_POLICY
from .prefix import (
    CACHE_BREAKPOINTS,
    PREFIX_FRAMING_TOKENS,
    SkillEntry,
    prefix_blocks,
    prefix_breakpoints,
    prefix_messages,
    tool_schema_hash,
)

PLAN_CREATED = "context.plan.created"
EPOCH_ROTATED = "context.epoch.rotated"
PLAN_EVENT_TYPES = frozenset({PLAN_CREATED, EPOCH_ROTATED})
#: The builder version of new sessions' plans: version 3 renders bodies a provider's prompt
#: cache can serve (ADR 0027) on top of version 2's clipping and clearing inside a long run
#: (ADR 0021); a plan keeps the version it was made with.
BUILDER_VERSION = "ctxengine-builder/3"
#: The builder before ADR 0021: its stored plans keep rendering byte for byte as they did.
BUILDER_V1 = "ctxengine-builder/1"
#: The builder of ADR 0021 (clipping and clearing), before ADR 0027: its stored plans keep
#: rendering byte for byte as they did.
BUILDER_V2 = "ctxengine-builder/2"
#: The builder versions whose plans render cache-stable bodies (ADR 0027).
STABLE_BODY_VERSIONS = frozenset({"ctxengine-builder/3"})

ROTATION_REASONS = frozenset(
    {
        "initial",
        "model_changed",
        "policy_version_changed",
        "builder_version_changed",
        "counting_method_changed",
        "agent_prefix_changed",
    }
)
# Tokens priming the model's reply, once per request (OpenAI's counting recipe):
# an exact plan counts them with its prefix.
REPLY_PRIMING_TOKENS = 3


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
        builder_version: str | None = None,
        platform_policy: str = PLATFORM_POLICY,
        cache_size: int = 1024,
    ) -> None:
        self.store = store
        self.estimator: Estimator = estimator if estimator is not None else cast(Estimator, TokenEstimator())
        self.policy = policy or BudgetPolicy()
        self.clock: Clock = clock or SystemClock()
        #: The builder version asked for, or ``None``: ``BUILDER_VERSION`` for a new session,
        #: and a session's current plan keeps its own (an upgrade does not rotate its epoch
        #: and so does not throw its provider cache away; ADR 0021).
        self.builder_version = builder_version
        self.platform_policy = platform_policy
        self._cache_size = cache_size
        # session_id -> (current plan or None, last sequence scanned)
        self._cache: OrderedDict[str, tuple[ContextPlan | None, int]] = OrderedDict()

    # -- reading -------------------------------------------------------------

    async def current(self, session_id: str) -> ContextPlan | None:
        """The greatest-epoch plan in the log (scanning only events not seen before). The
        exact-count tables it counts with are built off the event loop (``load_tables``)."""
        plan, seen = self._cache.get(session_id, (None, 0))
        covering = getattr(self.store.events, "read_covering", None)
        through = seen
        if callable(covering):
            # Up to the session's last sequence: the next read starts there, not at the plan.
            events, through = await covering(session_id, seen, PLAN_EVENT_TYPES)
        else:
            events = await self.store.events.read(session_id, after=seen, types=PLAN_EVENT_TYPES)
        for event in events:
            candidate = stored_plan(event)
            if plan is None or candidate.epoch > plan.epoch:
                plan = candidate
            seen = max(seen, event.sequence)
        self._remember(session_id, plan, max(seen, through))
        if plan is not None:  # a worker that picks a run up counts with the plan's tables next
            await load_tables(self.estimator, plan.model_id)
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
        builder_version: str | None = None,
    ) -> ContextPlan:
        """A validated plan (pure: measures, checks caps, allocates; writes nothing).
        ``builder_version``: this planner's when ``None`` (``BUILDER_VERSION`` if it names none)."""
        specs, catalog = _checked_arguments(agent, model, tools, skill_catalog)
        est = self.estimator
        # Every count of the epoch goes through the plan's counting key (ADR 0012).
        counting = est.counting_method(model.model_id)
        model_id = f"{model.model_id}#{counting}"
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
        version = builder_version or self.builder_version or BUILDER_VERSION
        messages = prefix_messages(
            self.platform_policy,
            agent.instructions,
            catalog,
            memory_snapshot,
            omit_empty=version in STABLE_BODY_VERSIONS,
        )
        if counting == HEURISTIC:
            prefix_tokens = est.estimate(blocks, model_id) + PREFIX_FRAMING_TOKENS
        else:
            # Exactly: the prefix as the model sees it (the rendered system messages),
            # the tools, and the reply priming.
            texts = [text for _, text in messages]
            raw = sum(est.raw_estimates(list(texts), model_id)) + sum(est.raw_estimates(specs, model_id))
            prefix_tokens = est.corrected(raw + REPLY_PRIMING_TOKENS, model_id)
        budget = allocate(model, prefix_tokens, self.policy)
        return ContextPlan(
            session_id=session_id,
            epoch=epoch,
            prefix_sha256=payload_hash(blocks),
            prefix_tokens=prefix_tokens,
            model_id=model.model_id,
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
            cache_breakpoints=prefix_breakpoints(len(messages))
            if version in STABLE_BODY_VERSIONS
            else CACHE_BREAKPOINTS,
            policy_version=policy_version,
            builder_version=version,
            budget=budget,
            created_at=self.clock.now(),
            reason=reason,
            counting=counting,
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

        Called after routing, immediately before the first model request of a run. The
        exact-count tables the model needs are built off the event loop first (``load_tables``).
        """
        if isinstance(model, ResolvedModel):  # else draft() names the argument
            await load_tables(self.estimator, model.model_id)
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
                builder_version=_builder_version(self.builder_version, current),
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
        stored = stored_plan(event)
        _, seen = self._cache.get(plan.session_id, (None, 0))
        # Keep the scan position: events between it and ours are re-read next time.
        self._remember(plan.session_id, stored, seen)
        return stored

    def _forget(self, session_id: str) -> None:
        self._cache.pop(session_id, None)


_PLAN = "ContextPlanner.plan"
_AGENT = "AgentSpec(agent_id, version, instructions), or AgentSpec.from_dict(d)"
_TOOL = "ToolSpec(name, description, input_schema), or ToolSpec.from_dict(d)"


def _checked_arguments(
    agent: object, model: object, tools: object, skill_catalog: object
) -> tuple[tuple[ToolSpec, ...], tuple[SkillEntry, ...]]:
    """The tools and the catalog as tuples, or an ``ArgumentError`` naming the argument of the
    wrong type and what it accepts (a dict or a name where a value type belongs)."""
    if not isinstance(agent, AgentSpec):
        _wrong("agent", agent, f"an AgentSpec ({_AGENT})")
    if not isinstance(model, ResolvedModel):
        _wrong(
            "model",
            model,
            "a ResolvedModel (ResolvedModel(provider, model, context_window, max_output_tokens, "
            "default_output_reserve), or ResolvedModel.from_dict(d)), not a model name",
        )
    for argument, value, kind, how in (
        ("tools", tools, ToolSpec, _TOOL),
        ("skill_catalog", skill_catalog, SkillEntry, "SkillEntry values"),
    ):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            _wrong(argument, value, f"a sequence of {kind.__name__} ({how})")
    specs = tuple(cast("Iterable[object]", tools))
    catalog = tuple(cast("Iterable[object]", skill_catalog))
    for i, spec in enumerate(specs):
        if not isinstance(spec, ToolSpec):
            _wrong(f"tools[{i}]", spec, f"a ToolSpec ({_TOOL})")
    for i, entry in enumerate(catalog):
        if not isinstance(entry, SkillEntry):
            _wrong(f"skill_catalog[{i}]", entry, "a SkillEntry")
    return cast("tuple[ToolSpec, ...]", specs), cast("tuple[SkillEntry, ...]", catalog)


def _wrong(argument: str, value: object, accepted: str) -> NoReturn:
    raise ArgumentError(_PLAN, argument, f"expected {accepted}, got {type(value).__name__} {value!r:.60}")


def _builder_version(asked: str | None, current: ContextPlan | None) -> str:
    """The builder version of the plan wanted: the one asked for, else the current plan's (a
    default that changed is no reason to rotate), else ``BUILDER_VERSION``."""
    if asked is not None:
        return asked
    return current.builder_version if current is not None else BUILDER_VERSION


def _rotation_reason(current: ContextPlan, wanted: ContextPlan) -> str:
    if current.model_id != wanted.model_id:
        return "model_changed"
    if current.policy_version != wanted.policy_version:
        return "policy_version_changed"
    if current.builder_version != wanted.builder_version:
        return "builder_version_changed"
    if current.counting_method != wanted.counting_method:
        return "counting_method_changed"
    return "agent_prefix_changed"


def _with_reason(plan: ContextPlan, reason: str) -> ContextPlan:
    if plan.reason == reason:
        return plan
    data = plan.to_dict()
    data["reason"] = reason
    return ContextPlan.from_dict(data)


__all__ = [
    "BUILDER_V1",
    "BUILDER_V2",
    "BUILDER_VERSION",
    "EPOCH_ROTATED",
    "PLAN_CREATED",
    "PLAN_EVENT_TYPES",
    "REPLY_PRIMING_TOKENS",
    "ROTATION_REASONS",
    "STABLE_BODY_VERSIONS",
    "ContextPlanner",
    "PlanningError",
]
