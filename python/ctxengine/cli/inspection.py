"""``ctxengine inspect``: what a session's event log says about its context.

Read-only (the CLI opens the store with ``read_only=True``: nothing is created,
migrated or converted), and built from the log alone (the record), never from
checkpoints (materializations): the plan of the current epoch, every epoch
with its reason, every compaction, the latest working state and the event
counts by type.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..core.prompt_cache import PriceTable
from ..errors import SessionNotFound, StoreCorruption
from ..model import WorkingState
from ..plan import PLAN_EVENT_TYPES, ContextPlan
from ..plan.context_plan import stored_plan
from ..runtime.loop import CONTEXT_COMPACTED
from ..runtime.usage import USAGE_REPORTED, CompactionUsage, Usage, compaction_usage, stored_usage
from ..runtime.working_state import WORKING_STATE_UPDATED, stored_state
from ..stores.events import Event, Store
from .console import Console, Table, Text
from .terminal import visible

#: Working-state facts shown (the newest); the JSON form has them all.
SHOWN_FACTS = 5
#: Requests shown in the estimate-vs-actual table (the newest); the JSON form has them all.
SHOWN_USAGE = 12


@dataclass(frozen=True, slots=True)
class Compaction:
    sequence: int
    run_id: str
    reason: str
    depth: int
    replaced_through_sequence: int
    replaced_items: int
    tokens_before: int
    tokens_after: int
    #: A model-backed compaction's outcome (``adopted``, ``fallback``); ``None``: extractive.
    summarizer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "summarizer": self.summarizer,
            "sequence": self.sequence,
            "run_id": self.run_id,
            "reason": self.reason,
            "depth": self.depth,
            "replaced_through_sequence": self.replaced_through_sequence,
            "replaced_items": self.replaced_items,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
        }


@dataclass(slots=True)
class SessionSummary:
    session_id: str
    last_sequence: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    plans: list[ContextPlan] = field(default_factory=list)
    compactions: list[Compaction] = field(default_factory=list)
    working_state: WorkingState | None = None
    working_state_sequence: int | None = None
    usage: list[Usage] = field(default_factory=list)
    #: Model-backed compactions' calls, one per usage key (ADR 0026).
    compaction_usage: list[CompactionUsage] = field(default_factory=list)
    prices: PriceTable = field(default_factory=PriceTable)

    def cache(self) -> dict[str, Any]:
        """The session's input tokens, what the provider's cache served and wrote of them, and
        their effective cost under ``prices`` (a request that reported no cache counts is all
        uncached input; the cached fraction is of the requests that reported them)."""
        reported = [u for u in self.usage if u.cached_read is not None]
        read = sum(u.cached_read or 0 for u in reported)
        of = sum(u.actual for u in reported)
        p = self.prices
        # A compaction's call is input too, all of it uncached (ADR 0026).
        compacting = sum(c.input_tokens for c in self.compaction_usage)
        return {
            "prices": {"input": p.input, "cached_read": p.cached_read, "cache_write": p.cache_write},
            "requests": len(self.usage),
            "reported": len(reported),
            "input_tokens": sum(u.actual for u in self.usage) + compacting,
            "compaction_calls": len(self.compaction_usage),
            "compaction_input_tokens": compacting,
            "output_tokens": sum(c.output_tokens for c in self.compaction_usage),
            "cached_read": read,
            "cache_write": sum(u.cache_write or 0 for u in reported),
            "cached_fraction": read / of if of else None,
            "effective_input_cost": sum(
                p.cost(u.actual, u.cached_read or 0, u.cache_write or 0) for u in self.usage
            )
            + p.cost(compacting),
            "uncached_input_cost": p.cost(sum(u.actual for u in self.usage) + compacting),
        }

    @property
    def plan(self) -> ContextPlan | None:
        """The current plan: the greatest epoch."""
        return max(self.plans, key=lambda p: p.epoch, default=None)

    def to_dict(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "session_id": self.session_id,
            "last_sequence": self.last_sequence,
            "events": sum(self.counts.values()),
            "event_counts": dict(sorted(self.counts.items())),
            "runs": self.runs,
            "plan": None
            if plan is None
            else {
                "epoch": plan.epoch,
                "model_id": plan.model_id,
                "prefix_sha256": plan.prefix_sha256,
                "prefix_tokens": plan.prefix_tokens,
                "tools": list(plan.tool_names),
                "policy_version": plan.policy_version,
                "builder_version": plan.builder_version,
                "memory_snapshot": plan.memory_snapshot,
                "history_tokens": plan.budget.history_tokens,
                "counting": plan.counting_method,
            },
            "epochs": [
                {
                    "epoch": p.epoch,
                    "reason": p.reason,
                    "prefix_sha256": p.prefix_sha256,
                    "model_id": p.model_id,
                    "created_at": p.created_at.isoformat(),
                }
                for p in sorted(self.plans, key=lambda p: p.epoch)
            ],
            "compactions": {
                "count": len(self.compactions),
                "max_depth": max((c.depth for c in self.compactions), default=0),
                "items": [c.to_dict() for c in self.compactions],
            },
            "working_state": None if self.working_state is None else self.working_state.to_dict(),
            "usage": [u.to_dict() for u in self.usage],
            "compaction_usage": [c.to_dict() for c in self.compaction_usage],
            "cache": self.cache(),
        }


def _compaction(event: Event) -> Compaction:
    try:
        return _compaction_fields(event)
    except (TypeError, ValueError) as exc:
        raise StoreCorruption(
            event.session_id, event.sequence, f"compaction event does not decode: {exc}"
        ) from None


def _compaction_fields(event: Event) -> Compaction:
    p = event.payload
    return Compaction(
        sequence=event.sequence,
        run_id=str(p.get("run_id", event.run_id)),
        reason=str(p.get("reason", "")),
        depth=int(p.get("depth", 0)),
        replaced_through_sequence=int(p.get("replaced_through_sequence", 0)),
        replaced_items=int(p.get("replaced_items", 0)),
        tokens_before=int(p.get("tokens_before", 0)),
        tokens_after=int(p.get("tokens_after", 0)),
        summarizer=str(p["summarizer"]["outcome"]) if isinstance(p.get("summarizer"), dict) else None,
    )


async def inspect_session(
    store: Store, session_id: str, *, prices: PriceTable | None = None
) -> SessionSummary:
    """Summarize ``session_id``'s log; ``SessionNotFound`` when it has no events. ``prices``
    prices the session's input (default: ``PriceTable()``, input-token equivalents)."""
    events = await store.events.read(session_id)
    if not events:
        raise SessionNotFound(session_id)
    summary = SessionSummary(session_id, last_sequence=events[-1].sequence)
    if prices is not None:
        summary.prices = prices
    runs: set[str] = set()
    keys: set[str] = set()
    for event in events:
        summary.counts[event.type] += 1
        if event.run_id is not None:
            runs.add(event.run_id)
        if event.type in PLAN_EVENT_TYPES:
            summary.plans.append(stored_plan(event))
        elif event.type == CONTEXT_COMPACTED:
            summary.compactions.append(_compaction(event))
            call = compaction_usage(event)
            if call is not None and call.usage_key not in keys:
                keys.add(call.usage_key)
                summary.compaction_usage.append(call)
        elif event.type == WORKING_STATE_UPDATED:
            summary.working_state = stored_state(event)
            summary.working_state_sequence = event.sequence
        elif event.type == USAGE_REPORTED:
            summary.usage.append(stored_usage(event))
    summary.runs = len(runs)
    return summary


def _shown(value: str) -> Text:
    """A table cell of text from the store or the model: escapes visible, never markup."""
    return Text(visible(value))


def _plan_table(summary: SessionSummary) -> Table:
    table = Table(title="Plan (current epoch)", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    plan = summary.plan
    if plan is None:
        table.add_row("plan", "none: no model request was planned in this session")
        return table
    table.add_row("epoch", str(plan.epoch))
    table.add_row("model", _shown(plan.model_id))
    table.add_row("prefix sha256", _shown(plan.prefix_sha256))
    table.add_row("prefix tokens", f"{plan.prefix_tokens:,}")
    table.add_row("tools", _shown(", ".join(plan.tool_names) or "-"))
    table.add_row("policy / builder", _shown(f"{plan.policy_version} / {plan.builder_version}"))
    table.add_row("history budget", f"{plan.budget.history_tokens:,} tokens")
    table.add_row(
        "token counting", _shown(plan.counting_method + ("" if plan.counting else " (not recorded)"))
    )
    table.add_row("memory snapshot", _shown(plan.memory_snapshot or "-"))
    return table


def _epochs_table(summary: SessionSummary) -> Table:
    table = Table(title=f"Epochs ({len(summary.plans)})", title_justify="left")
    for column in ("epoch", "reason", "model", "prefix sha256", "created at"):
        table.add_column(column)
    for p in sorted(summary.plans, key=lambda p: p.epoch):
        table.add_row(
            str(p.epoch),
            _shown(p.reason),
            _shown(p.model_id),
            _shown(p.prefix_sha256[:16] + "…"),
            p.created_at.isoformat(),
        )
    return table


def _compactions_table(summary: SessionSummary) -> Table:
    items = summary.compactions
    depth = max((c.depth for c in items), default=0)
    table = Table(title=f"Compactions ({len(items)}, max depth {depth})", title_justify="left")
    for column in (
        "event",
        "run",
        "depth",
        "replaced through",
        "items",
        "tokens before → after",
        "reason",
        "summary",
    ):
        table.add_column(column, justify="right" if column in ("event", "depth", "items") else "left")
    for c in items:
        table.add_row(
            str(c.sequence),
            _shown(c.run_id),
            str(c.depth),
            f"seq {c.replaced_through_sequence}",
            str(c.replaced_items),
            f"{c.tokens_before:,} → {c.tokens_after:,}",
            _shown(c.reason),
            "extractive" if c.summarizer is None else f"model: {c.summarizer}",
        )
    return table


def _lines(entries: list[str]) -> Text:
    """Model-written entries, one a line: each made visible (its own line breaks escaped)."""
    return Text("\n".join(visible(entry) for entry in entries) or "-")


def _state_table(summary: SessionSummary) -> Table:
    state = summary.working_state
    where = f" (event {summary.working_state_sequence})" if summary.working_state_sequence else ""
    table = Table(title=f"Working state{where}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    if state is None:
        table.add_row("state", "none recorded")
        return table
    # Entries are model-authored text: controls made visible, never read as markup.
    table.add_row("objective", _shown(state.objective or "-"))
    table.add_row("constraints", _lines([c.text for c in state.constraints]))
    table.add_row("tasks", _lines([f"[{t.status}] {t.task_id}: {t.text}" for t in state.tasks]))
    facts = state.established_facts
    shown = _lines([f.text for f in facts[-SHOWN_FACTS:]])
    if len(facts) > SHOWN_FACTS:
        shown.append(f"\n… and {len(facts) - SHOWN_FACTS} earlier")
    table.add_row(f"facts ({len(facts)})", shown)
    table.add_row("open questions", _lines([q.text for q in state.open_questions]))
    table.add_row("next action", _shown(state.next_action or "-"))
    return table


def _usage_table(summary: SessionSummary) -> Table:
    """Estimate against the provider's count, per request (the newest ``SHOWN_USAGE``)."""
    usage = summary.usage
    ratios = sorted(u.ratio for u in usage)
    title = f"Requests: estimate vs actual ({len(usage)} reported"
    if ratios:
        p95 = ratios[max(0, -(-95 * len(ratios) // 100) - 1)]
        title += (
            f"; actual/estimate mean {sum(ratios) / len(ratios):.3f}, p95 {p95:.3f}, max {ratios[-1]:.3f}"
        )
    table = Table(title=title + ")", title_justify="left")
    for column in (
        "event",
        "run",
        "step",
        "epoch",
        "counting",
        "estimated",
        "actual",
        "actual/estimate",
        "cached",
    ):
        table.add_column(column, justify="left" if column in ("run", "counting") else "right")
    for u in usage[-SHOWN_USAGE:]:
        table.add_row(
            str(u.sequence),
            _shown(u.run_id),
            str(u.step),
            str(u.epoch),
            _shown(u.counting),
            f"{u.estimated:,}",
            f"{u.actual:,}",
            f"{u.ratio:.3f}",
            "-" if u.cached_read is None else f"{u.cached_read:,}",
        )
    return table


def _amount(value: float) -> str:
    """A cost: grouped with cents from 1 up (token equivalents, dollars), significant digits below."""
    return f"{value:,.2f}" if value >= 1 else f"{value:.6g}"


def _cache_table(summary: SessionSummary) -> Table:
    """The provider's prompt cache over the session's reported requests, and what it saved."""
    c = summary.cache()
    p = summary.prices
    title = f"Prompt cache (input price {p.input:g}; cached read {p.cached_read:g}x, "
    title += f"cache write {p.cache_write:g}x)"
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    fraction = c["cached_fraction"]
    table.add_row("requests with cache counts", f"{c['reported']} of {c['requests']}")
    table.add_row("input tokens", f"{c['input_tokens']:,}")
    if c["compaction_calls"]:
        table.add_row(
            "of which compaction calls",
            f"{c['compaction_input_tokens']:,} in {c['compaction_calls']} call(s), "
            f"{c['output_tokens']:,} output tokens",
        )
    table.add_row("cached read / cache write", f"{c['cached_read']:,} / {c['cache_write']:,}")
    table.add_row("cached", "-" if fraction is None else f"{100 * fraction:.1f}%")
    table.add_row("effective input cost", _amount(c["effective_input_cost"]))
    table.add_row("cost with nothing cached", _amount(c["uncached_input_cost"]))
    return table


def _counts_table(summary: SessionSummary) -> Table:
    total = sum(summary.counts.values())
    table = Table(title=f"Events ({total}, {summary.runs} runs)", title_justify="left")
    table.add_column("type")
    table.add_column("count", justify="right")
    for event_type, n in sorted(summary.counts.items()):
        table.add_row(_shown(event_type), str(n))
    return table


def print_summary(summary: SessionSummary, console: Console) -> None:
    console.print(
        Text.assemble(
            ("Session ", "bold"),
            (visible(summary.session_id), "bold"),
            f" (last sequence {summary.last_sequence})",
        )
    )
    for table in (
        _plan_table(summary),
        _epochs_table(summary),
        _compactions_table(summary),
        _state_table(summary),
        _usage_table(summary),
        _cache_table(summary),
        _counts_table(summary),
    ):
        console.print(table)


__all__ = ["Compaction", "SessionNotFound", "SessionSummary", "inspect_session", "print_summary"]
