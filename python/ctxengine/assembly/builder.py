"""Assembly (SPEC section 5, seed ADR-0043 decision 5).

``ContextBuilder.assemble`` turns a plan and a run's checkpoint into the
exact request a provider receives: Region A from the plan, Region B in the
fixed order of ``regions.REGION_TABLE``, measured in one batched estimator
call, with the yield ladder applied no further than needed:

1. knowledge passages drop, whole, lowest score first;
2. recall lines drop, last first;
3. history tool results truncate to typed pointers, oldest first;
4. history is cut (``select_history``) and compaction is requested.

Never yielded: the current user message, working state, memory
corrections, the current turn's tool pairs and runtime metadata.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..core import backends
from ..core.canonical import payload_hash
from ..core.estimator import Estimator
from ..core.history import validate_tool_pairs
from ..errors import ContextError, ContextOverflow
from ..model import (
    AgentSpec,
    Checkpoint,
    Principal,
    ReasoningItem,
    RunContext,
    UserMessage,
)
from ..model.checkpoint import MAX_COMPACTION_DEPTH, check_compaction_depth
from ..model.clock import Clock, SystemClock
from ..plan import ContextPlan, ContextPlanner
from .regions import order_of
from .render import (
    render_item,
    render_knowledge,
    render_lines,
    render_metadata,
    render_prefix,
    render_skill,
    render_summary,
    render_working_state,
    tool_result_pointer,
)
from .request import ModelRequest, RenderedItem
from .turn import merge_reasoning, split_turn

RECALL_TITLE = "Recalled memory:"
CORRECTIONS_TITLE = "Memory corrections (these override the memory snapshot):"

PRESSURE_REASONS = (
    "fits",
    "history_requires_compaction",
    "working_state_exceeds_cap",
    "fixed_body_exceeds_context_window",
    "body_exceeds_context_window",
    "skill_bodies_exceed_cap",
)


@dataclass(frozen=True, slots=True)
class Pressure:
    """How a request fits its window, and what had to yield."""

    fits: bool
    compactable: bool
    reason: str
    total_tokens: int
    prefix_tokens: int
    body_tokens: int
    reserve_tokens: int
    capacity_tokens: int
    history_cut: int
    history_budget_tokens: int
    yield_steps: tuple[str, ...] = ()
    # How the tokens were counted (ADR 0012); None for a plan that records no method.
    counting: str | None = None

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {} if self.counting is None else {"counting": self.counting}
        return {
            "fits": self.fits,
            "compactable": self.compactable,
            "reason": self.reason,
            "total_tokens": self.total_tokens,
            "prefix_tokens": self.prefix_tokens,
            "body_tokens": self.body_tokens,
            "reserve_tokens": self.reserve_tokens,
            "capacity_tokens": self.capacity_tokens,
            "history_cut": self.history_cut,
            "history_budget_tokens": self.history_budget_tokens,
            "yield_steps": list(self.yield_steps),
            **extra,
        }


@dataclass(frozen=True, slots=True)
class Assembly:
    request: ModelRequest
    pressure: Pressure


class ContextBuilder:
    """Assembles requests; pure given its inputs (the clock is read once per assembly)."""

    def __init__(
        self,
        planner: ContextPlanner,
        *,
        estimator: Estimator | None = None,
        clock: Clock | None = None,
        surface: str = "api",
        prefix_cache_size: int = 256,
        block_cache_size: int = 4096,
        max_compaction_depth: int = MAX_COMPACTION_DEPTH,
    ) -> None:
        self.planner = planner
        # Whether compacting again can help depends on the compactor's depth limit.
        self.max_compaction_depth = check_compaction_depth(
            "ContextBuilder", "max_compaction_depth", max_compaction_depth
        )
        self.estimator: Estimator = estimator if estimator is not None else planner.estimator
        self.clock: Clock = clock or planner.clock or SystemClock()
        self.surface = surface
        self._prefixes: OrderedDict[tuple[str, str], tuple[tuple[RenderedItem, ...], str]] = OrderedDict()
        self._prefix_cache_size = prefix_cache_size
        self._blocks: OrderedDict[tuple[Any, ...], RenderedItem] = OrderedDict()
        self._groups: OrderedDict[tuple[Any, ...], tuple[RenderedItem, ...]] = OrderedDict()
        self._block_cache_size = block_cache_size

    # -- public ------------------------------------------------------------------

    def measure(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        agent: AgentSpec,
        principal: Principal,
        *,
        plan: ContextPlan | None = None,
    ) -> Pressure:
        return self.assemble(run, checkpoint, agent, principal, plan=plan).pressure

    def build(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        agent: AgentSpec,
        principal: Principal,
        *,
        plan: ContextPlan | None = None,
    ) -> ModelRequest:
        """The request, or ``ContextOverflow`` when it does not fit without compaction."""
        assembly = self.assemble(run, checkpoint, agent, principal, plan=plan)
        p = assembly.pressure
        if not p.fits:
            used = plan if plan is not None else self.planner.cached(run.session_id)
            usable = used.budget.usable_body_tokens if used is not None else p.capacity_tokens
            if p.reason == "history_requires_compaction":
                raise ContextOverflow(
                    p.reason,
                    p.body_tokens,
                    usable,
                    message=(
                        f"{p.reason}: the {p.history_cut} oldest history items do not fit the history "
                        f"budget of {p.history_budget_tokens} tokens; compact before building"
                    ),
                )
            # Every other reason is a body measured against the usable body.
            raise ContextOverflow(p.reason, p.body_tokens, usable, f"compactable={p.compactable}")
        return assembly.request

    def assemble(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        agent: AgentSpec,
        principal: Principal,
        *,
        plan: ContextPlan | None = None,
    ) -> Assembly:
        plan = plan if plan is not None else self.planner.cached(run.session_id)
        if plan is None:
            raise ContextError(
                f"no plan loaded for session {run.session_id!r}: "
                "await planner.plan(...) or planner.current(...) first"
            )
        if plan.session_id != run.session_id:
            raise ContextError(f"plan is for session {plan.session_id!r}, run is in {run.session_id!r}")
        if agent.agent_id != plan.agent_id:
            raise ContextError(f"agent {agent.agent_id!r} does not match the plan's agent {plan.agent_id!r}")
        prefix, prefix_sha = self._prefix(plan)
        return self._fit(run, checkpoint, plan, principal, prefix, prefix_sha)

    # -- stages ------------------------------------------------------------------

    def _prefix(self, plan: ContextPlan) -> tuple[tuple[RenderedItem, ...], str]:
        key = (plan.session_id, plan.prefix_sha256)
        hit = self._prefixes.get(key)
        if hit is None:
            items = render_prefix(plan)
            digest = payload_hash({"prefix": list(items), "tools": [t.to_dict() for t in plan.tool_specs]})
            hit = (items, digest)
            self._prefixes[key] = hit
            while len(self._prefixes) > self._prefix_cache_size:
                self._prefixes.popitem(last=False)
        else:
            self._prefixes.move_to_end(key)
        return hit

    def _fit(
        self,
        run: RunContext,
        cp: Checkpoint,
        plan: ContextPlan,
        principal: Principal,
        prefix: tuple[RenderedItem, ...],
        prefix_sha: str,
    ) -> Assembly:
        conversation = cp.conversation
        boundary = split_turn(conversation, run.seed_sequence)
        turn = conversation[boundary:]
        if cp.reasoning:
            turn = tuple(merge_reasoning(turn, cp.reasoning))
            validate_tool_pairs([item for item in turn if not isinstance(item, ReasoningItem)])
        else:
            validate_tool_pairs(turn)
        summary: tuple[RenderedItem, ...] = ()
        if cp.compacted_summary is not None or cp.summary_elided:
            summary = self._cached_group(
                ("summary", cp.compacted_summary, cp.summary_elided),
                lambda: render_summary(cp.compacted_summary or "", cp.summary_elided),
            )
        state = cp.working_state
        passages = sorted(cp.knowledge, key=lambda p: (-p.score, p.passage_id)) if cp.knowledge else ()
        now = self.clock.now()
        meta_key = ("metadata", now.replace(second=0, microsecond=0), principal, self.surface)
        budget = plan.budget
        policy = self.planner.policy
        # The allocator splits the usable body into working state, tool results
        # and history; conversation history carries its tool results, so its
        # cap is the two classes together (the tool-result cap binds separately).
        limits = (
            budget.usable_body_tokens,
            budget.history_tokens + budget.tool_result_tokens,
            budget.tool_result_tokens,
            budget.working_state_tokens,
            policy.skill_bodies_items,
            budget.skill_body_tokens,
            policy.knowledge_items,
            budget.knowledge_tokens,
            budget.retrieved_context_tokens,
            cp.replaced_through_sequence,
            int(cp.summary_depth < self.max_compaction_depth),
        )
        body, body_raw, reason, compactable, cut, history_budget, steps, body_sha = (
            backends.active().fit_body(
                conversation[:boundary],
                turn,
                bool(turn) and isinstance(turn[0], UserMessage),
                summary,
                [self._cached(("skill", skill), partial(render_skill, skill)) for skill in cp.loaded_skills],
                [self._cached(("working_state", state), partial(render_working_state, state))],
                [
                    (p.passage_id, self._cached(("knowledge", p), partial(render_knowledge, p)))
                    for p in passages
                ],
                cp.recall,
                [self._cached(("recall", cp.recall), partial(_render_recall, cp.recall))]
                if cp.recall
                else [],
                [self._cached(("corrections", cp.corrections), partial(_render_corrections, cp.corrections))]
                if cp.corrections
                else [],
                [self._cached(meta_key, partial(render_metadata, now, principal, self.surface))],
                limits,
                render_item,
                _render_recall,
                tool_result_pointer,
                self.estimator,
                plan.counting_key,
            )
        )
        body_tokens = self.estimator.corrected(body_raw, plan.counting_key)
        prefix_tokens = plan.prefix_tokens
        reserve = budget.reserve_output_tokens
        capacity = budget.total_tokens - reserve
        total = prefix_tokens + body_tokens
        if reason == "fits" and total > capacity:  # defensive: margin arithmetic guarantees this
            reason = "body_exceeds_context_window"
        max_out = reserve if run.max_output_tokens is None else min(reserve, run.max_output_tokens)
        metadata = {
            "prefix_sha256": prefix_sha,
            "body_sha256": body_sha,
            "plan_prefix_sha256": plan.prefix_sha256,
            "epoch": plan.epoch,
            "session_id": run.session_id,
            "run_id": run.run_id,
            "step": run.step,
            "model_id": plan.model_id,
            "total_tokens": total,
            "prefix_tokens": prefix_tokens,
            "body_tokens": body_tokens,
            "capacity_tokens": capacity,
            "reserve_tokens": reserve,
        }
        if plan.counting is not None:
            # Only plans that record a method name it: older requests keep their bytes.
            metadata["counting"] = plan.counting
        request = ModelRequest(
            prefix, tuple(body), plan.tool_specs, max_out, plan.cache_breakpoints, metadata
        )
        pressure = Pressure(
            reason == "fits",
            compactable,
            reason,
            total,
            prefix_tokens,
            body_tokens,
            reserve,
            capacity,
            cut,
            history_budget,
            tuple(steps),
            plan.counting,
        )
        return Assembly(request, pressure)

    def _cached(self, key: tuple[Any, ...], make: Callable[[], RenderedItem]) -> RenderedItem:
        """Renders of per-build blocks (working state, metadata, summary...) by their inputs."""
        hit = self._blocks.get(key)
        if hit is None:
            hit = self._blocks[key] = make()
            if len(self._blocks) > self._block_cache_size:
                self._blocks.popitem(last=False)
        return hit

    def _cached_group(
        self, key: tuple[Any, ...], make: Callable[[], list[RenderedItem]]
    ) -> tuple[RenderedItem, ...]:
        hit = self._groups.get(key)
        if hit is None:
            hit = self._groups[key] = tuple(make())
            if len(self._groups) > self._block_cache_size:
                self._groups.popitem(last=False)
        return hit


def _render_recall(lines: Sequence[str]) -> RenderedItem:
    return render_lines("recall", RECALL_TITLE, lines)


def _render_corrections(lines: Sequence[str]) -> RenderedItem:
    return render_lines("memory_corrections", CORRECTIONS_TITLE, lines)


# The body is laid out group by group in this order; it must be the table's.
BODY_ORDER = (
    "compacted_summary",
    "history",
    "skill_bodies",
    "working_state",
    "knowledge",
    "recall",
    "memory_corrections",
    "runtime_metadata",
    "current_user",
    "current_turn",
)
assert [order_of(c) for c in BODY_ORDER] == sorted(order_of(c) for c in BODY_ORDER)


__all__ = ["PRESSURE_REASONS", "Assembly", "ContextBuilder", "Pressure"]
