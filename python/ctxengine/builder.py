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
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from . import backends
from .canonical import payload_hash
from .clock import Clock, SystemClock
from .errors import ContextError, ContextOverflow
from .estimator import Estimator
from .history import validate_tool_pairs
from .model import (
    AgentSpec,
    Checkpoint,
    ConversationItem,
    KnowledgePassage,
    Principal,
    ReasoningItem,
    RunContext,
    ToolResult,
    UserMessage,
)
from .plan import ContextPlan, ContextPlanner
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

    def to_dict(self) -> dict[str, Any]:
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
        }


@dataclass(frozen=True, slots=True)
class Assembly:
    request: ModelRequest
    pressure: Pressure


@dataclass(slots=True)
class _Body:
    """Region B as it is being measured and yielded (raw token units)."""

    summary: list[RenderedItem] = field(default_factory=list)
    history_items: list[ConversationItem] = field(default_factory=list)
    history: list[RenderedItem] = field(default_factory=list)
    history_raw: list[int] = field(default_factory=list)
    skills: list[RenderedItem] = field(default_factory=list)
    working_state: list[RenderedItem] = field(default_factory=list)
    knowledge: list[tuple[KnowledgePassage, RenderedItem, int]] = field(default_factory=list)
    recall_lines: list[str] = field(default_factory=list)
    recall: list[RenderedItem] = field(default_factory=list)
    recall_raw: int = 0
    corrections: list[RenderedItem] = field(default_factory=list)
    metadata: list[RenderedItem] = field(default_factory=list)
    turn_items: list[ConversationItem] = field(default_factory=list)
    turn: list[RenderedItem] = field(default_factory=list)


def split_turn(conversation: Sequence[ConversationItem], seed_sequence: int) -> int:
    """Index of the first current-turn item: history is everything with ``seq < seed_sequence``.

    Scans back from the end (the turn is short); ``Checkpoint`` guarantees
    that sequences increase, so everything before the boundary is history.
    """
    boundary = 0
    for i in range(len(conversation) - 1, -1, -1):
        seq = conversation[i].seq
        if seq is not None and seq < seed_sequence:
            boundary = i + 1
            break
    for item in conversation[boundary:]:
        if item.seq is not None and item.seq < seed_sequence:
            raise ContextError(
                f"checkpoint conversation is out of order: item seq {item.seq} below the seed "
                f"sequence {seed_sequence} follows the current turn"
            )
    return boundary


def merge_reasoning(
    turn: Sequence[ConversationItem], reasoning: Sequence[ReasoningItem]
) -> list[ConversationItem]:
    """Replay each reasoning item just before the first turn item that came after it."""
    if not reasoning:
        return list(turn)
    pending = sorted(reasoning, key=lambda r: r.seq if r.seq is not None else -1)
    out: list[ConversationItem] = []
    j = 0
    for item in turn:
        while j < len(pending) and item.seq is not None and (pending[j].seq or -1) < item.seq:
            out.append(pending[j])
            j += 1
        out.append(item)
    out.extend(pending[j:])
    return out


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
    ) -> None:
        self.planner = planner
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
            raise ContextOverflow(
                p.reason,
                p.total_tokens if p.reason != "history_requires_compaction" else p.history_budget_tokens,
                p.capacity_tokens,
                f"history cut at {p.history_cut}; compactable={p.compactable}",
            )
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
        body = self._render_body(run, checkpoint, principal)
        return self._fit(run, checkpoint, plan, prefix, prefix_sha, body)

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

    def _cached(self, key: tuple[Any, ...], make: Callable[[], RenderedItem]) -> RenderedItem:
        """Renders of per-build blocks (working state, metadata, summary...) by their inputs."""
        hit = self._blocks.get(key)
        if hit is None:
            hit = self._blocks[key] = make()
            if len(self._blocks) > self._block_cache_size:
                self._blocks.popitem(last=False)
        return hit

    def _render_body(self, run: RunContext, cp: Checkpoint, principal: Principal) -> _Body:
        conversation = cp.conversation
        boundary = split_turn(conversation, run.seed_sequence)
        body = _Body()
        if cp.compacted_summary is not None or cp.summary_elided:
            key = ("summary", cp.compacted_summary, cp.summary_elided)
            body.summary = list(
                self._cached_group(
                    key,
                    lambda: render_summary(
                        cp.compacted_summary or "", cp.summary_elided, cp.summary_source_event_ids
                    ),
                )
            )
        body.history_items = list(conversation[:boundary])
        body.skills = [
            self._cached(("skill", skill), partial(render_skill, skill)) for skill in cp.loaded_skills
        ]
        state = cp.working_state
        body.working_state = [self._cached(("working_state", state), lambda: render_working_state(state))]
        passages = sorted(cp.knowledge, key=lambda p: (-p.score, p.passage_id))
        body.knowledge = [
            (p, self._cached(("knowledge", p), partial(render_knowledge, p)), 0) for p in passages
        ]
        body.recall_lines = list(cp.recall)
        if cp.recall:
            body.recall = [
                self._cached(("recall", cp.recall), lambda: render_lines("recall", RECALL_TITLE, cp.recall))
            ]
        if cp.corrections:
            body.corrections = [
                self._cached(
                    ("corrections", cp.corrections),
                    lambda: render_lines("memory_corrections", CORRECTIONS_TITLE, cp.corrections),
                )
            ]
        now = self.clock.now()
        meta_key = ("metadata", now.replace(second=0, microsecond=0), principal, self.surface)
        body.metadata = [self._cached(meta_key, lambda: render_metadata(now, principal, self.surface))]
        turn = merge_reasoning(conversation[boundary:], cp.reasoning)
        validate_tool_pairs([item for item in turn if not isinstance(item, ReasoningItem)])
        body.turn_items = turn
        return body

    def _cached_group(
        self, key: tuple[Any, ...], make: Callable[[], list[RenderedItem]]
    ) -> tuple[RenderedItem, ...]:
        hit = self._groups.get(key)
        if hit is None:
            hit = self._groups[key] = tuple(make())
            if len(self._groups) > self._block_cache_size:
                self._groups.popitem(last=False)
        return hit

    def _fit(
        self,
        run: RunContext,
        cp: Checkpoint,
        plan: ContextPlan,
        prefix: tuple[RenderedItem, ...],
        prefix_sha: str,
        b: _Body,
    ) -> Assembly:
        est = self.estimator
        core = backends.active()
        model_id = plan.model_id
        budget = plan.budget
        policy = self.planner.policy
        usable = budget.usable_body_tokens
        steps: list[str] = []

        # The long groups (history, the turn) render and measure in one backend
        # call each, from the items' render caches; the short blocks in one more.
        b.history, b.history_raw = core.render_measure(b.history_items, "history", render_item, est, model_id)
        turn_items = b.turn_items
        first_user = bool(turn_items) and isinstance(turn_items[0], UserMessage)
        head, head_raw = core.render_measure(
            turn_items[:1] if first_user else [], "current_user", render_item, est, model_id
        )
        rest, rest_raw = core.render_measure(
            turn_items[1:] if first_user else turn_items, "current_turn", render_item, est, model_id
        )
        b.turn = head + rest
        turn_raw = sum(head_raw) + sum(rest_raw)
        small: list[list[RenderedItem]] = [
            b.summary,
            b.skills,
            b.working_state,
            [r for _, r, _ in b.knowledge],
            b.recall,
            b.corrections,
            b.metadata,
        ]
        flat = [item for group in small for item in group]
        raw = est.raw_estimates(flat, model_id)
        sums: list[int] = []
        per_group: list[list[int]] = []
        pos = 0
        for group in small:
            chunk = raw[pos : pos + len(group)]
            per_group.append(chunk)
            sums.append(sum(chunk))
            pos += len(group)
        summary_raw, skills_raw, ws_raw, _, recall_raw, corr_raw, meta_raw = sums
        b.knowledge = [(p, r, n) for (p, r, _), n in zip(b.knowledge, per_group[3], strict=True)]
        b.recall_raw = recall_raw

        def c(raw_sum: int) -> int:
            return est.corrected(raw_sum, model_id)

        reason = "fits"
        compactable = False
        fixed_raw = skills_raw + ws_raw + corr_raw + meta_raw + turn_raw
        if c(ws_raw) > budget.working_state_tokens:
            reason = "working_state_exceeds_cap"
        elif len(b.skills) > policy.skill_bodies_items or c(skills_raw) > budget.skill_body_tokens:
            reason = "skill_bodies_exceed_cap"
        elif c(fixed_raw) > usable:
            reason = "fixed_body_exceeds_context_window"
        elif c(fixed_raw + summary_raw) > usable:
            reason = "body_exceeds_context_window"
            compactable = cp.summary_depth < 2

        # Class caps first (absolute, independent of pressure).
        while len(b.knowledge) > policy.knowledge_items or (
            b.knowledge and c(sum(n for _, _, n in b.knowledge)) > budget.knowledge_tokens
        ):
            dropped = b.knowledge.pop()
            steps.append(f"knowledge_over_cap:{dropped[0].passage_id}")
        over_cap = 0
        while b.recall_lines and c(b.recall_raw) > budget.retrieved_context_tokens:
            self._drop_recall_line(b, model_id)
            over_cap += 1
        if over_cap:
            steps.append(f"recall_lines_over_cap:{over_cap}")

        # The allocator splits the usable body into working state, tool results
        # and history; conversation history carries its tool results, so its
        # cap is the two classes together (the tool-result cap binds separately).
        history_cap = budget.history_tokens + budget.tool_result_tokens
        # Running sums (raw units) so every rung is O(1) per step, never a re-sum.
        knowledge_raw = sum(n for _, _, n in b.knowledge)
        history_raw = sum(b.history_raw)
        base_raw = fixed_raw + summary_raw

        def over() -> bool:
            return c(base_raw + knowledge_raw + b.recall_raw + history_raw) > usable

        # The ladder, each rung only while the body is still over.
        while b.knowledge and over():
            dropped = b.knowledge.pop()
            knowledge_raw -= dropped[2]
            steps.append(f"knowledge_dropped:{dropped[0].passage_id}")
        recall_dropped = 0
        while b.recall_lines and over():
            self._drop_recall_line(b, model_id)
            recall_dropped += 1
        if recall_dropped:
            steps.append(f"recall_lines_dropped:{recall_dropped}")
        tool_cap = budget.tool_result_tokens
        # Tool results are part of history, so while the whole history is within
        # the tool-result cap and nothing is over, no result needs looking at.
        results: list[int] = []
        result_raw = 0
        if c(history_raw) > tool_cap or over() or c(history_raw) > history_cap:
            results = [i for i, item in enumerate(b.history_items) if isinstance(item, ToolResult)]
            result_raw = sum(b.history_raw[i] for i in results)
        next_result = 0

        def truncate_next() -> bool:
            """Truncate the oldest untruncated history tool result; False when none is left."""
            nonlocal next_result, result_raw, history_raw
            while next_result < len(results):
                i = results[next_result]
                next_result += 1
                item = b.history_items[i]
                assert isinstance(item, ToolResult)
                pointer = tool_result_pointer(item)
                new_raw = est.raw(pointer, model_id)
                if new_raw < b.history_raw[i]:
                    result_raw += new_raw - b.history_raw[i]
                    history_raw += new_raw - b.history_raw[i]
                    b.history[i] = pointer
                    b.history_raw[i] = new_raw
                    return True
            return False

        # The tool-result class cap (absolute, like the other caps)...
        over_cap = 0
        while c(result_raw) > tool_cap and truncate_next():
            over_cap += 1
        if over_cap:
            steps.append(f"tool_results_over_cap:{over_cap}")
        # ...then rung 3 of the ladder, while the body or the history class is over.
        truncated = 0
        while (over() or c(history_raw) > history_cap) and truncate_next():
            truncated += 1
        if truncated:
            steps.append(f"tool_results_truncated:{truncated}")

        other_raw = base_raw + knowledge_raw + b.recall_raw
        history_budget = max(0, min(history_cap, usable - c(other_raw)))
        cut = 0
        if b.history_items:
            cut = core.select_history(
                b.history_items, cp.replaced_through_sequence, history_budget, est, model_id, b.history_raw
            )
        if cut > 0:
            steps.append(f"history_cut:{cut}")
            if reason == "fits":
                reason = "history_requires_compaction"
                compactable = True

        body_items: list[RenderedItem] = [
            *b.summary,
            *b.history[cut:],
            *b.skills,
            *b.working_state,
            *(r for _, r, _ in b.knowledge),
            *b.recall,
            *b.corrections,
            *b.metadata,
            *b.turn,
        ]
        body_raw = other_raw + history_raw - sum(b.history_raw[:cut])
        body_tokens = c(body_raw)
        prefix_tokens = plan.prefix_tokens
        reserve = budget.reserve_output_tokens
        capacity = budget.total_tokens - reserve
        total = prefix_tokens + body_tokens
        if reason == "fits" and total > capacity:  # defensive: margin arithmetic guarantees this
            reason = "body_exceeds_context_window"
        max_out = reserve if run.max_output_tokens is None else min(reserve, run.max_output_tokens)
        metadata = {
            "prefix_sha256": prefix_sha,
            "body_sha256": core.digest_list(body_items),
            "plan_prefix_sha256": plan.prefix_sha256,
            "epoch": plan.epoch,
            "session_id": run.session_id,
            "run_id": run.run_id,
            "step": run.step,
            "model_id": model_id,
            "total_tokens": total,
            "prefix_tokens": prefix_tokens,
            "body_tokens": body_tokens,
            "capacity_tokens": capacity,
            "reserve_tokens": reserve,
        }
        request = ModelRequest(
            prefix=prefix,
            body=tuple(body_items),
            tools=plan.tool_specs,
            max_output_tokens=max_out,
            cache_breakpoints=plan.cache_breakpoints,
            metadata=metadata,
        )
        pressure = Pressure(
            fits=reason == "fits",
            compactable=compactable,
            reason=reason,
            total_tokens=total,
            prefix_tokens=prefix_tokens,
            body_tokens=body_tokens,
            reserve_tokens=reserve,
            capacity_tokens=capacity,
            history_cut=cut,
            history_budget_tokens=history_budget,
            yield_steps=tuple(steps),
        )
        return Assembly(request, pressure)

    def _drop_recall_line(self, b: _Body, model_id: str) -> None:
        b.recall_lines.pop()
        if b.recall_lines:
            b.recall = [render_lines("recall", RECALL_TITLE, b.recall_lines)]
            b.recall_raw = self.estimator.raw(b.recall[0], model_id)
        else:
            b.recall = []
            b.recall_raw = 0


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


__all__ = ["PRESSURE_REASONS", "Assembly", "ContextBuilder", "Pressure", "merge_reasoning", "split_turn"]
