"""Assembly (SPEC section 5, seed ADR-0043 decision 5).

``ContextBuilder.assemble`` turns a plan and a run's checkpoint into the
exact request a provider receives: Region A from the plan, Region B in the
fixed order of ``regions.REGION_TABLE``, measured in one batched estimator
call, with the yield ladder applied no further than needed:

1. the yielding classes, in body order (``regions.BODY_CLASSES``): knowledge
   passages drop, whole, lowest score first; the lines of each lines class
   (recall, ...) drop, last first;
2. history tool results truncate to typed pointers, oldest first;
3. history is cut (``select_history``) and compaction is requested.

Never yielded: the current user message, working state, memory
corrections, the current turn's tool pairs and runtime metadata (the
classes whose kind does not yield).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..core import telemetry
from ..core.body import BodyBlock, BodyFit, BodyInputs, BodyLimits, RenderLine, fit_body
from ..core.budget import BudgetPolicy, ContextBudget
from ..core.canonical import payload_hash
from ..core.estimator import Estimator
from ..core.history import validate_tool_pairs
from ..core.slices import Steps
from ..errors import ContextError, ContextOverflow
from ..model import (
    AgentSpec,
    Checkpoint,
    ConversationItem,
    ElidedSpan,
    Principal,
    ReasoningItem,
    RunContext,
    ToolResult,
)
from ..model.checkpoint import MAX_COMPACTION_DEPTH, check_compaction_depth
from ..model.clock import Clock, SystemClock
from ..plan import STABLE_BODY_VERSIONS, ContextPlan, ContextPlanner
from .blocks import CORRECTIONS_TITLE, RECALL_TITLE, BodyContext, render_prefix, summary_blocks
from .breakpoints import body_breakpoints
from .clearing import TurnRules, TurnView, turn_rules
from .line_blocks import Rows, body_rows, line_blocks
from .overflow import overflow_detail
from .regions import BODY_CLASSES
from .render import digest_of
from .render_cache import RENDERS, RenderCache, SessionRenders
from .report import report_build
from .request import ModelRequest, RenderedItem
from .turn import merge_reasoning, split_turn

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
    #: The clock reading the body was built with (its runtime metadata; a request record's).
    now: datetime | None = None


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
        render_cache: RenderCache | None = None,
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
        # Renders live in the renderer's own bounded cache (shared by default).
        self.renders = render_cache if render_cache is not None else RENDERS
        self._last_limits: tuple[ContextBudget, int, bool, BodyLimits] | None = None
        self._rows: Rows | None = None
        self._rows_tail_last = False
        self._rules: tuple[ContextPlan, BudgetPolicy, TurnRules | None] | None = None

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
            budget = used.budget if used is not None else None
            usable = budget.usable_body_tokens if budget is not None else p.capacity_tokens
            rules = self._turn_rules(used) if used is not None else None
            detail = overflow_detail(p, budget, item_cap=rules.item_cap if rules is not None else None)
            raise ContextOverflow(p.reason, p.body_tokens, usable, detail)
        return assembly.request

    def assemble(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        agent: AgentSpec,
        principal: Principal,
        *,
        plan: ContextPlan | None = None,
        line: SessionRenders | None = None,
    ) -> Assembly:
        """The request and how it fits. ``line``: the renders of the session's history in
        order, owned by the caller (the loop's session window, ADR 0016); without one, the
        builder keeps one per session itself (a builder used on its own)."""
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
        with telemetry.span(
            "ctxengine.build", session_id=run.session_id, run_id=run.run_id, step=run.step, epoch=plan.epoch
        ) as span:
            prefix, prefix_sha = self._prefix(plan)
            assembly = self._fit(run, checkpoint, plan, principal, prefix, prefix_sha, line)
            report_build(span, run, plan, assembly, self.estimator)
        return assembly

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
        line: SessionRenders | None,
    ) -> Assembly:
        conversation = cp.conversation
        boundary = split_turn(conversation, run.seed_sequence)
        turn = conversation[boundary:]
        if cp.reasoning:
            turn = tuple(merge_reasoning(turn, cp.reasoning))
            validate_tool_pairs([item for item in turn if not isinstance(item, ReasoningItem)])
        else:
            validate_tool_pairs(turn)
        budget = plan.budget
        now = self.clock.now()
        stable = plan.builder_version in STABLE_BODY_VERSIONS
        ctx = BodyContext(cp, tuple(turn), now, principal, self.surface, stable=stable)
        history = conversation[:boundary]
        tables = line if line is not None else self._tables(run.session_id, history)
        blocks, view = self._blocks(ctx, budget, tables, self._turn_rules(plan), stable)
        # The allocator splits the usable body into working state, tool results
        # and history; conversation history carries its tool results, so its
        # cap is the two classes together (the tool-result cap binds separately).
        limits = self._limits(
            budget, cp.replaced_through_sequence, cp.summary_depth < self.max_compaction_depth
        )
        counting_key = plan.counting_key
        fit = self._fit_body(tables, history, blocks, limits, counting_key)
        body, body_raw, reason = fit["body"], fit["body_raw"], fit["reason"]
        steps = fit["yield_steps"]
        if view is not None and (view.clipped or view.cleared or view.folded):
            # Done before the fit (ADR 0021): named first.
            steps = [
                *([f"turn_items_clipped:{view.clipped}"] if view.clipped else ()),
                *([f"turn_tool_results_cleared:{view.cleared}"] if view.cleared else ()),
                *([f"turn_tool_steps_folded:{view.folded}"] if view.folded else ()),
                *steps,
            ]
        body_tokens = self.estimator.corrected(body_raw, counting_key)
        prefix_tokens = plan.prefix_tokens
        reserve = budget.reserve_output_tokens
        capacity = budget.total_tokens - reserve
        total = prefix_tokens + body_tokens
        if reason == "fits" and total > capacity:  # defensive: margin arithmetic guarantees this
            reason = "body_exceeds_context_window"
        max_out = reserve if run.max_output_tokens is None else min(reserve, run.max_output_tokens)
        metadata = {
            "prefix_sha256": prefix_sha,
            "body_sha256": fit["body_sha256"],
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
        if stable:
            # Where a provider's cache breakpoints go in the body (ADR 0027; version 3 only).
            metadata["body_cache_breakpoints"] = list(body_breakpoints(body))
        request = ModelRequest(
            prefix, tuple(body), plan.tool_specs, max_out, plan.cache_breakpoints, metadata
        )
        pressure = Pressure(
            reason == "fits",
            fit["compactable"],
            reason,
            total,
            prefix_tokens,
            body_tokens,
            reserve,
            capacity,
            fit["cut"],
            fit["history_budget"],
            tuple(steps),
            plan.counting,
        )
        return Assembly(request, pressure, now)

    def summary_blocks(self, summary: str | None, elided: Sequence[ElidedSpan]) -> tuple[RenderedItem, ...]:
        """The rendered compacted-summary blocks, from this builder's render cache (shared
        with seeding, which primes the estimator with a carry's stored counts of them)."""
        return summary_blocks(self.renders, summary, elided)

    def prerender(
        self, tables: SessionRenders, history: Sequence[ConversationItem], items: Sequence[ConversationItem]
    ) -> list[RenderedItem]:
        """Render ``history`` into ``tables`` (a session window's line, which its builds will
        read), and return the renders of ``items`` (some of them; seeding primes their stored
        counts by render digest)."""
        self.renders.history(tables, history)
        return self.renders.renders_of(tables, items)

    def prerender_steps(
        self, tables: SessionRenders, history: Sequence[ConversationItem], items: Sequence[ConversationItem]
    ) -> Steps[list[RenderedItem]]:
        """``prerender`` as steps (``core.slices``): a long history renders in slices."""
        yield from self.renders.history_steps(tables, history)
        yield
        return self.renders.renders_of(tables, items)

    def _limits(self, budget: ContextBudget, floor: int, compactable: bool) -> BodyLimits:
        last = self._last_limits
        if last is not None and last[0] is budget and last[1] == floor and last[2] is compactable:
            return last[3]
        limits = BodyLimits(
            usable=budget.usable_body_tokens,
            history_cap=budget.history_tokens + budget.tool_result_tokens,
            tool_cap=budget.tool_result_tokens,
            summary_floor=floor,
            summary_compactable=compactable,
        )
        self._last_limits = (budget, floor, compactable, limits)
        return limits

    def _tables(self, session_id: str, history: Sequence[ConversationItem]) -> SessionRenders:
        """The render tables of this history's line: a session's runs (or one
        run after a compaction) start with the same item, so a build reads
        small tables of its own."""
        first = (history[0]._cj or (None, digest_of(history[0])))[1] if history else b""
        return self.renders.session((session_id, first))

    def turn_rules(self, plan: ContextPlan) -> TurnRules | None:
        """How this builder shows ``plan``'s current turns (``None``: whole, as before ADR 0021)."""
        return self._turn_rules(plan)

    def _turn_rules(self, plan: ContextPlan) -> TurnRules | None:
        """The rules of the plan's current turns (``None`` before builder version 2), kept
        while the plan and the policy are the same objects."""
        policy = self.planner.policy
        last = self._rules
        if last is not None and last[0] is plan and last[1] is policy:
            return last[2]
        rules = turn_rules(plan, policy)
        self._rules = (plan, policy, rules)
        return rules

    def _blocks(
        self,
        ctx: BodyContext,
        budget: ContextBudget,
        tables: SessionRenders,
        rules: TurnRules | None,
        tail_last: bool,
    ) -> tuple[tuple[BodyBlock, ...], TurnView | None]:
        """Every class of the body in order, rendered, with its caps (``line_blocks``); the
        tail classes last for a plan of builder version 3 (ADR 0027)."""
        policy = self.planner.policy
        rows = self._rows
        if (
            rows is None
            or rows[0] is not policy
            or rows[1] is not budget
            or self._rows_tail_last != tail_last
        ):
            rows = self._rows = body_rows(policy, budget, tail_last)
            self._rows_tail_last = tail_last
        return line_blocks(ctx, rows, tables, rules, self.renders, self.estimator)

    def _fit_body(
        self,
        tables: SessionRenders,
        history: Sequence[ConversationItem],
        blocks: tuple[BodyBlock, ...],
        limits: BodyLimits,
        model_id: str,
    ) -> BodyFit:
        """The fit over the renders the cache holds: the new history items are
        rendered first; what else the tables lack (evicted) comes back as
        ``missing``, is rendered, and the fit runs again."""
        items = tuple(history)
        renders, pointers = tables.renders, tables.pointers
        if items:
            # New items are at the end: none when the last one is rendered.
            last = items[-1]
            digest = (last._cj or (None, digest_of(last)))[1]
            if digest not in renders or (isinstance(last, ToolResult) and digest not in pointers):
                self.renders.history(tables, items)
        line: RenderLine | None = tables.line_of(items)
        for attempt in range(3):
            inputs = BodyInputs(items, renders, pointers, blocks, line)
            fit = fit_body(inputs=inputs, limits=limits, estimator=self.estimator, model_id=model_id)
            if not fit["missing"]:
                break
            tables.forget_line()
            line = None
            if attempt == 0:
                self.renders.history(tables, items, fit["missing"])
                line = tables.line_of(items)  # again, from the tables now complete
            else:  # a history larger than the cache holds: this build's own tables
                renders = {digest_of(item): self.renders.item(item, "history") for item in items}
                pointers = {
                    digest_of(item): self.renders.pointer(item)
                    for item in items
                    if isinstance(item, ToolResult)
                }
        return fit


# The body is laid out class by class in this order (the table's).
BODY_ORDER = tuple(BODY_CLASSES)


__all__ = [
    "BODY_ORDER",
    "CORRECTIONS_TITLE",  # (its old home: kept importable from here)
    "PRESSURE_REASONS",
    "RECALL_TITLE",
    "Assembly",
    "ContextBuilder",
    "Pressure",
]
