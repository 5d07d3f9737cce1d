"""``ctxengine bench``: SPEC section 11 on this machine, both backends and installed peers.

The measurements use the same setups as ``benches/`` (synthetic sessions of
repeating user / tool call / tool result / assistant items, 200-500 bytes
each): the 1 MB payload hash, the 10,000-item cut warm and cold, assembly of
a fifty-turn and a 10,000-item session, many interleaved sessions; and, when
``langchain-core`` is installed, ``trim_messages`` on the same sessions
converted to LangChain messages. Growth curves repeat the cut and assembly
over history lengths (1k ... 100k items). Timings are medians of repeated
runs, with fewer repeats as sizes grow, so a full run takes a few minutes.

Cold means a fresh estimator and items never seen (no canonical bytes, no
memo); warm means the same items and estimator as the previous call, which
is what a worker building the next step of a run sees.
"""

from __future__ import annotations

import hashlib
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from ..assembly.builder import ContextBuilder
from ..core import backends
from ..core.estimator import Estimator, TokenEstimator
from ..errors import BackendError
from ..model import (
    AgentSpec,
    AssistantMessage,
    Checkpoint,
    ConversationItem,
    Principal,
    ResolvedModel,
    RunContext,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserMessage,
    WorkingState,
)
from ..model.clock import FixedClock
from ..plan import ContextPlan, ContextPlanner
from .synthetic import chat_payload, synthetic_session

DEFAULT_SIZES = (1_000, 3_000, 10_000, 30_000, 100_000)
MODEL = ResolvedModel("bench", "model-200k", 200_000, 16_384, 8_192)
#: The section 11 cut: a budget retaining about half of 10,000 items (as benches/bench_core.py).
CUT_ITEMS = 10_000
CUT_HISTORY_TOKENS = 600_000
FIFTY_TURN_ITEMS = 200
AGENT = AgentSpec("bench-agent", "v1", "You are a benchmark agent.")
PRINCIPAL = Principal("alice", "acme", frozenset({"search"}))
TOOLS = (ToolSpec("search", "Search.", {"type": "object", "properties": {"q": {"type": "string"}}}),)


@dataclass(frozen=True, slots=True)
class Settings:
    sizes: tuple[int, ...] = DEFAULT_SIZES
    quick: bool = False
    peers: bool = True

    @property
    def payload_bytes(self) -> int:
        return 100_000 if self.quick else 1_000_000

    @property
    def cut_items(self) -> int:
        return min(CUT_ITEMS, max(self.sizes)) if self.quick else CUT_ITEMS

    @property
    def sessions(self) -> dict[str, int]:
        # The reference backend gets a tenth of the sessions: the rate is what is compared.
        return {"rust": 20, "python": 10} if self.quick else {"rust": 1_000, "python": 100}

    def repeats(self, n_items: int) -> int:
        if self.quick:
            return 3
        return 15 if n_items <= 1_000 else 9 if n_items <= 10_000 else 5 if n_items <= 30_000 else 3

    @property
    def max_seconds(self) -> float:
        """Stop repeating a measurement after this long (the median of what ran stands)."""
        return 0.5 if self.quick else 4.0


@dataclass(frozen=True, slots=True)
class Timing:
    median_ms: float
    runs: int

    def to_dict(self) -> dict[str, float | int]:
        return {"median_ms": round(self.median_ms, 4), "runs": self.runs}


@dataclass(slots=True)
class BenchResults:
    """Section 11 figures (``spec[measure][impl]``) and growth curves (``growth[curve][size]``)."""

    settings: Settings
    implementations: list[str]
    spec: dict[str, dict[str, Timing]] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)
    memo_entries: dict[str, int] = field(default_factory=dict)
    growth: dict[str, dict[int, Timing]] = field(default_factory=dict)
    machine: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "implementations": self.implementations,
            "quick": self.settings.quick,
            "sizes": list(self.settings.sizes),
            "spec": {m: {i: t.to_dict() for i, t in row.items()} for m, row in self.spec.items()},
            "assembles_per_s": {k: round(v, 1) for k, v in self.rates.items()},
            "memo_entries": self.memo_entries,
            "growth": {c: {str(n): t.to_dict() for n, t in row.items()} for c, row in self.growth.items()},
            "elapsed_s": round(self.elapsed_s, 1),
        }


def time_call(
    fn: Callable[..., object],
    *,
    repeats: int,
    max_seconds: float,
    setup: Callable[[], tuple[Any, ...]] | None = None,
) -> Timing:
    """Median wall time of ``fn(*setup())``; ``setup`` (fresh inputs for cold runs) is not timed."""
    times: list[float] = []
    budget_end = time.perf_counter() + max_seconds
    for _ in range(repeats):
        args = setup() if setup is not None else ()
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
        if time.perf_counter() > budget_end:
            break
    return Timing(statistics.median(times) * 1000.0, len(times))


def available_backends() -> list[str]:
    names = []
    for name in backends.BACKENDS:
        try:
            backends.module(name)
        except BackendError:
            continue
        names.append(name)
    return names


# -- setups (as in benches/) ---------------------------------------------------------------


def assembly_case(n_items: int, tag: str) -> tuple[RunContext, Checkpoint]:
    """A session of ``n_items`` whose last user turn is the current one."""
    items = synthetic_session(n_items, tag=tag)
    seed = items[-4].seq if len(items) >= 4 else items[0].seq
    assert seed is not None
    cp = Checkpoint("r1", conversation=tuple(items), working_state=WorkingState(objective="benchmark"))
    return RunContext("r1", "s1", seed), cp


def builder_and_plan() -> tuple[ContextBuilder, ContextPlan]:
    """A builder on the active backend and a 200k-window plan (no store: drafted in memory)."""
    clock = FixedClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    planner = ContextPlanner(None, estimator=cast(Estimator, TokenEstimator()), clock=clock)
    plan = planner.draft("s1", 1, AGENT, MODEL, TOOLS, policy_version="pv1")
    return ContextBuilder(planner, clock=planner.clock), plan


def window_history_tokens() -> int:
    """The history budget of a 200k window: the growth curves cut to it, like a real request."""
    _, plan = builder_and_plan()
    return plan.budget.history_tokens


# -- LangChain (optional peer) -------------------------------------------------------------


def langchain_version() -> str | None:
    try:
        import langchain_core
    except ImportError:
        return None
    return str(langchain_core.__version__)


def to_langchain(items: Sequence[ConversationItem]) -> list[Any]:
    """The same session as LangChain messages (tool calls as AIMessage.tool_calls)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for item in items:
        if isinstance(item, UserMessage):
            out.append(HumanMessage(str(item.content)))
        elif isinstance(item, ToolCall):
            out.append(
                AIMessage("", tool_calls=[{"name": item.name, "args": item.arguments, "id": item.call_id}])
            )
        elif isinstance(item, ToolResult):
            out.append(ToolMessage(str(item.content), tool_call_id=item.call_id))
        elif isinstance(item, AssistantMessage):
            out.append(AIMessage(str(item.content)))
    return out


def langchain_trim(max_tokens: int) -> Callable[[list[Any]], list[Any]]:
    """``trim_messages`` as a user would call it to keep the newest history in a budget."""
    from langchain_core.messages import trim_messages
    from langchain_core.messages.utils import count_tokens_approximately

    def trim(messages: list[Any]) -> list[Any]:
        trimmed: list[Any] = trim_messages(
            messages,
            max_tokens=max_tokens,
            token_counter=count_tokens_approximately,
            strategy="last",
            start_on="human",
        )
        return trimmed

    return trim


# -- measurements --------------------------------------------------------------------------


class _Runner:
    def __init__(self, settings: Settings, progress: Callable[[str], None] | None) -> None:
        self.s = settings
        self.progress = progress or (lambda _label: None)
        self.impls = available_backends()
        self.peer = langchain_version() if settings.peers else None
        self.results = BenchResults(settings, [*self.impls, *(["langchain"] if self.peer else [])])

    def _spec(self, measure: str, impl: str, timing: Timing) -> None:
        self.results.spec.setdefault(measure, {})[impl] = timing

    def _growth(self, curve: str, size: int, timing: Timing) -> None:
        self.results.growth.setdefault(curve, {})[size] = timing

    def run(self) -> BenchResults:
        started = time.perf_counter()
        previous = backends.backend()
        try:
            self._hash()
            for name in self.impls:
                backends.use_backend(name)
                self._spec_backend(name)
                self._growth_backend(name)
            if self.peer:
                self._peer()
                self._interop()
            self._counting()
        finally:
            backends.use_backend(previous)
        r = self.results
        r.machine = {
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "machine": platform.machine(),
            "cpus": str(_cpus()),
            "langchain_core": self.peer or "not installed",
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        }
        r.elapsed_s = time.perf_counter() - started
        return r

    def _hash(self) -> None:
        self.progress("payload_hash")
        payload = chat_payload(self.s.payload_bytes)
        reps = 3 if self.s.quick else 11
        for name in self.impls:
            core = backends.module(name)
            self._spec(
                "payload_hash",
                name,
                time_call(
                    lambda core=core: core.payload_hash(payload), repeats=reps, max_seconds=self.s.max_seconds
                ),
            )
        data = backends.module("python").canonical_json(payload)
        self._spec(
            "payload_hash",
            "hashlib",
            time_call(
                lambda: hashlib.sha256(data).hexdigest(), repeats=reps * 3, max_seconds=self.s.max_seconds
            ),
        )

    def _spec_backend(self, name: str) -> None:
        core = backends.module(name)
        model_id = MODEL.model_id
        n = self.s.cut_items
        self.progress(f"{name}: select_history {n:,}")
        items = synthetic_session(n, tag=f"warm-{name}")
        estimator = core.TokenEstimator()
        core.select_history(items, 0, CUT_HISTORY_TOKENS, estimator, model_id)
        self._spec(
            "cut_warm",
            name,
            time_call(
                lambda: core.select_history(items, 0, CUT_HISTORY_TOKENS, estimator, model_id),
                repeats=self.s.repeats(n) * 3,
                max_seconds=self.s.max_seconds,
            ),
        )
        self._spec("cut_cold", name, self._cold_cut(core, n, CUT_HISTORY_TOKENS, f"spec-{name}"))
        self.progress(f"{name}: assemble")
        builder, plan = builder_and_plan()
        for measure, size in (("assemble_50_turns", FIFTY_TURN_ITEMS), ("assemble_10k", self.s.cut_items)):
            run, cp = assembly_case(size, tag=f"{measure}-{name}")
            builder.assemble(run, cp, AGENT, PRINCIPAL, plan=plan)
            self._spec(
                measure,
                name,
                time_call(
                    lambda run=run, cp=cp: builder.assemble(run, cp, AGENT, PRINCIPAL, plan=plan),
                    repeats=self.s.repeats(size) * 3,
                    max_seconds=self.s.max_seconds,
                ),
            )
        self.progress(f"{name}: many sessions")
        self._many_sessions(name)

    def _cold_cut(self, core: Any, n: int, budget: int, tag: str) -> Timing:
        counter = iter(range(1_000_000))
        model_id = MODEL.model_id

        def fresh() -> tuple[Any, ...]:
            return (synthetic_session(n, tag=f"cold-{tag}-{next(counter)}"), core.TokenEstimator())

        return time_call(
            lambda items, est: core.select_history(items, 0, budget, est, model_id),
            repeats=self.s.repeats(n),
            max_seconds=self.s.max_seconds,
            setup=fresh,
        )

    def _many_sessions(self, name: str) -> None:
        builder, plan = builder_and_plan()
        count = self.s.sessions[name]
        cases = [assembly_case(FIFTY_TURN_ITEMS, tag=f"many-{name}-{i}") for i in range(count)]

        def round_robin() -> None:
            for run, cp in cases:
                builder.assemble(run, cp, AGENT, PRINCIPAL, plan=plan)

        round_robin()  # first touch fills every item's caches once
        rounds = 3
        start = time.perf_counter()
        for _ in range(rounds):
            round_robin()
        self.results.rates[name] = rounds * count / (time.perf_counter() - start)
        stats = builder.estimator.memo_stats()
        self.results.memo_entries[name] = int(stats["size"])
        self.results.memo_entries[f"{name}_capacity"] = int(stats["capacity"])

    def _growth_backend(self, name: str) -> None:
        core = backends.module(name)
        budget = window_history_tokens()
        model_id = MODEL.model_id
        for size in self.s.sizes:
            self.progress(f"{name}: growth {size:,}")
            reps = self.s.repeats(size)
            # A fresh estimator and builder per size: one memo shared across sizes would
            # overflow its cap at the large end, and "warm" would quietly mean cold.
            estimator = core.TokenEstimator()
            builder, plan = builder_and_plan()
            items = synthetic_session(size, tag=f"growth-{name}-{size}")
            core.select_history(items, 0, budget, estimator, model_id)
            self._growth(
                f"{name} cut warm",
                size,
                time_call(
                    lambda items=items, est=estimator: core.select_history(items, 0, budget, est, model_id),
                    repeats=reps * 3,
                    max_seconds=self.s.max_seconds,
                ),
            )
            self._growth(
                f"{name} cut cold", size, self._cold_cut(core, size, budget, f"growth-{name}-{size}")
            )
            run, cp = assembly_case(size, tag=f"growth-asm-{name}-{size}")
            builder.assemble(run, cp, AGENT, PRINCIPAL, plan=plan)
            self._growth(
                f"{name} assemble",
                size,
                time_call(
                    lambda run=run, cp=cp, b=builder, p=plan: b.assemble(run, cp, AGENT, PRINCIPAL, plan=p),
                    repeats=reps,
                    max_seconds=self.s.max_seconds,
                ),
            )

    def _peer(self) -> None:
        budget = window_history_tokens()
        for measure, size, tokens in (
            ("trim_10k", self.s.cut_items, CUT_HISTORY_TOKENS),
            ("trim_50_turns", FIFTY_TURN_ITEMS, budget),
        ):
            self.progress(f"langchain: trim_messages {size:,}")
            messages = to_langchain(synthetic_session(size, tag=f"lc-{measure}"))
            trim = langchain_trim(tokens)
            self._spec(
                measure,
                "langchain",
                time_call(
                    lambda m=messages, trim=trim: trim(m),
                    repeats=self.s.repeats(size),
                    max_seconds=self.s.max_seconds,
                ),
            )
        window_trim = langchain_trim(budget)
        for size in self.s.sizes:
            self.progress(f"langchain: growth {size:,}")
            messages = to_langchain(synthetic_session(size, tag=f"lc-growth-{size}"))
            self._growth(
                "langchain trim_messages",
                size,
                time_call(
                    lambda m=messages: window_trim(m),
                    repeats=self.s.repeats(size),
                    max_seconds=self.s.max_seconds,
                ),
            )

    def _interop(self) -> None:
        """Issue 15: the trim_messages drop-in and the chat-dict cut (see ``bench_interop``)."""
        from ctxengine.cli.bench_interop import TRIM_SIZES, run_interop

        sizes = TRIM_SIZES[:1] if self.s.quick else TRIM_SIZES
        found = run_interop(self.s.repeats, time_call, self.s.max_seconds, sizes, self.progress)
        for measure, row in found.items():
            for impl, timing in row.items():
                self._spec(measure, impl, timing)

    def _counting(self) -> None:
        """Issue 14: tokenizer throughput and the cut on an OpenAI model (see ``bench_counting``)."""
        from ctxengine.cli.bench_counting import run_counting

        found = run_counting(self.s.repeats, time_call, self.s.max_seconds, self.s.quick, self.progress)
        for measure, row in found.items():
            for impl, timing in row.items():
                self._spec(measure, impl, timing)


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_bench(settings: Settings, *, progress: Callable[[str], None] | None = None) -> BenchResults:
    """Run every measurement; the active backend is restored afterwards."""
    return _Runner(settings, progress).run()


__all__ = [
    "DEFAULT_SIZES",
    "BenchResults",
    "Settings",
    "Timing",
    "assembly_case",
    "available_backends",
    "builder_and_plan",
    "langchain_trim",
    "langchain_version",
    "run_bench",
    "time_call",
    "to_langchain",
]
