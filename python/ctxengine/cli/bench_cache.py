"""``ctxengine bench --cache``: what a provider's prompt cache would serve of ctxengine's
requests, against LangChain ``trim_messages`` on the same transcripts (issue 39, ADR 0020).

Two workloads run through the loop on a 32k ``openai:gpt-4o-mini`` window (exact o200k
counting), with the scripted text of ``cli.turns``:

- **long run**: one user message, then tool steps (outputs of 1-6k tokens, two of 5 MB), a
  working-state update every 10 steps; a request before every step and after the last.
- **session**: turns of a scripted session, a tool round trip every third turn (the
  ``ScriptedWorker`` turn: a request before the answer, and one after the tool result).

Every request ``build_with_pressure`` builds is rendered with ``to_openai_chat`` and
``to_anthropic_messages`` and fed, as units, to a ``PromptCacheSimulator`` per wire; one
that raises ``ContextOverflow`` is counted, and the driver records the step and goes on
(a real run would have stopped there). At every request point the baseline takes the
transcript so far as plain chat messages (the agent's instructions as the system message,
no envelopes) and trims it with ``trim_messages(max_tokens=<the plan's history budget>,
strategy="last", start_on="human")``, counting each message's JSON with o200k as the units
are counted; its Anthropic figure puts one breakpoint on the last unit (Anthropic's
automatic caching). The same transcript untrimmed is the bare conversation.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..assembly.clearing import FOLDED_TEXT, POINTER_TEXT
from ..assembly.request import ModelRequest
from ..core.prompt_cache import PriceTable, PromptCacheSimulator, RequestCache
from ..errors import ContextOverflow, OrphanedToolPair
from ..model import (
    AssistantMessage,
    Checkpoint,
    ResolvedModel,
    RunContext,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ..providers import check_wire_pairs, to_anthropic_messages, to_openai_chat
from ..providers.cache_units import UnitCounter, WireUnits
from ..replay.baselines import Transcript, chat_tools, trimmed
from ..stores import open_store
from ..stores.events import Lease
from .bench_cache_report import BASELINE, acceptance, cache_markdown
from .turns import AGENT, POLICY_VERSION, PRINCIPAL, TOOLS, ScriptedWorker, text

MODEL_32K = ResolvedModel("openai", "gpt-4o-mini", 32_000, 4_096, 4_096)
#: The window of the rendering-overhead measurement (issue 39, acceptance 4).
MODEL_128K = ResolvedModel("openai", "gpt-4o-mini", 128_000, 4_096, 4_096)
#: Bytes per token of the scripted words (``turns.text``) in o200k: 6.97 over 200 kB.
BYTES_PER_TOKEN = 7.0


@dataclass(frozen=True, slots=True)
class CacheSettings:
    long_steps: int = 200
    big_steps: tuple[int, ...] = (60, 140)
    big_bytes: int = 5_000_000
    state_every: int = 10
    turns: int = 300
    tool_every: int = 3
    model: ResolvedModel = MODEL_32K
    peers: bool = True
    #: The long run again on this window, for the rendering overhead (``None``: not run).
    overhead_model: ResolvedModel | None = MODEL_128K

    @classmethod
    def for_run(cls, quick: bool, *, peers: bool = True) -> CacheSettings:
        """The full workloads, or one small round of each (``--quick``, the smoke bench)."""
        if quick:
            return cls(long_steps=12, big_steps=(6,), big_bytes=200_000, turns=12, peers=peers)
        return cls(peers=peers)


@dataclass(slots=True)
class Side:
    """One way of sending the session's requests: totals under every rule."""

    name: str
    #: The rules that apply to this side's wire (``openai``, ``anthropic``, ``vllm``).
    rules: tuple[str, ...] = ("openai", "anthropic", "vllm")
    sim: PromptCacheSimulator = field(default_factory=PromptCacheSimulator)
    requests: int = 0
    tokens: int = 0
    shared: int = 0
    ceiling: int = 0
    previous: int = 0
    openai: int = 0
    anthropic_read: int = 0
    anthropic_write: int = 0
    vllm: int = 0

    def add(self, units: WireUnits) -> RequestCache:
        got = self.sim.add(units.tokens, units.digests, units.breakpoints)
        self.requests += 1
        self.tokens += got.total
        self.shared += got.shared
        self.ceiling += got.ceiling
        self.previous += got.previous
        self.openai += got.openai
        self.anthropic_read += got.anthropic_read
        self.anthropic_write += got.anthropic_write
        self.vllm += got.vllm
        return got

    def to_dict(self, prices: PriceTable) -> dict[str, Any]:
        def share(n: int) -> float:
            return round(n / self.tokens, 4) if self.tokens else 0.0

        cached = {"openai": self.openai, "anthropic": self.anthropic_read, "vllm": self.vllm}
        costs = {
            "openai": prices.cost(self.tokens, self.openai),
            "anthropic": prices.cost(self.tokens, self.anthropic_read, self.anthropic_write),
        }
        fractions = {rule: share(cached[rule]) for rule in self.rules}
        return {
            "requests": self.requests,
            "input_tokens": self.tokens,
            "tokens_per_request": round(self.tokens / self.requests, 1) if self.requests else 0.0,
            "cached_fraction": {**fractions, "ceiling": share(self.ceiling)},
            # The ceiling as the issue first put it: units of the request just before only.
            "in_previous_request": share(self.previous),
            "anthropic_cache_write": self.anthropic_write if "anthropic" in self.rules else None,
            "effective_cost": {
                **{rule: round(costs[rule], 1) for rule in self.rules if rule in costs},
                "uncached": round(prices.cost(self.tokens), 1),
            },
        }


@dataclass(slots=True)
class Workload:
    """One workload's requests on every side."""

    name: str
    points: int = 0
    built: int = 0
    overflows: Counter[str] = field(default_factory=Counter)
    invalid_pairs: int = 0
    bare_tokens: int = 0
    bare_at_built: int = 0
    baseline_without_user: int = 0
    history_budget: int = 0
    seconds: float = 0.0
    sides: dict[str, Side] = field(default_factory=dict)
    #: Requests in which nothing of the conversation was dropped, cleared or clipped: their
    #: tokens (OpenAI chat) and the bare conversation's at the same points (tools included).
    whole_requests: int = 0
    whole_tokens: int = 0
    whole_bare_tokens: int = 0

    def to_dict(self, prices: PriceTable) -> dict[str, Any]:
        ours = self.sides.get("ctxengine/openai_chat")
        return {
            "requests_with_nothing_dropped": self.whole_requests,
            "ctxengine_vs_bare_nothing_dropped": round(self.whole_tokens / self.whole_bare_tokens, 4)
            if self.whole_bare_tokens
            else None,
            "request_points": self.points,
            "built": self.built,
            "context_overflow": sum(self.overflows.values()),
            "overflow_classes": dict(sorted(self.overflows.items())),
            "invalid_wire_pairs": self.invalid_pairs,
            "history_budget": self.history_budget,
            "bare_tokens_per_point": round(self.bare_tokens / self.points, 1) if self.points else 0.0,
            "ctxengine_vs_bare_per_built_request": round(ours.tokens / self.bare_at_built, 3)
            if ours and self.bare_at_built
            else None,
            "baseline_requests_without_the_user_message": self.baseline_without_user,
            "seconds": round(self.seconds, 1),
            "sides": {name: side.to_dict(prices) for name, side in self.sides.items()},
        }


class Recorder:
    """Builds each request point, renders it on both wires and the baseline, and keeps the totals."""

    def __init__(self, worker: ScriptedWorker, workload: Workload, *, peers: bool) -> None:
        self.worker = worker
        self.w = workload
        self.counter = UnitCounter()
        self.transcript = Transcript(self.counter)
        self.system = self.counter.unit({"role": "system", "content": AGENT.instructions})
        # The tool list as to_openai_chat renders it: the baseline sends the same tools.
        self.tools = self.counter.unit({"tools": chat_tools(TOOLS)})
        workload.sides["ctxengine/openai_chat"] = Side("ctxengine/openai_chat", ("openai", "vllm"))
        workload.sides["ctxengine/anthropic"] = Side("ctxengine/anthropic", ("anthropic",))
        self.peers = peers
        if peers:
            workload.sides[BASELINE] = Side(BASELINE)

    async def point(
        self, run: RunContext, checkpoint: Checkpoint, lease: Lease
    ) -> tuple[ModelRequest | None, Checkpoint]:
        w = self.w
        w.points += 1
        bare = self.system[0] + sum(n for n, _ in self.transcript.units)
        w.bare_tokens += bare
        self._baseline()
        try:
            request, checkpoint = await self.worker.loop.build_with_pressure(
                run, checkpoint, AGENT, PRINCIPAL, lease=lease
            )
        except ContextOverflow as exc:
            w.overflows[exc.budget_class] += 1
            return None, checkpoint
        w.built += 1
        w.bare_at_built += bare
        model = self.worker.model.model
        whole = _nothing_dropped(request, self.transcript)
        for side, body, wire in (
            ("ctxengine/openai_chat", to_openai_chat(request, model=model), "openai_chat"),
            ("ctxengine/anthropic", to_anthropic_messages(request, model=model), "anthropic_messages"),
        ):
            try:
                check_wire_pairs(body, wire)
            except OrphanedToolPair:
                w.invalid_pairs += 1
            units = self.counter.openai_chat(body) if wire == "openai_chat" else self.counter.anthropic(body)
            w.sides[side].add(units)
            if whole and wire == "openai_chat":
                w.whole_requests += 1
                w.whole_tokens += units.total
                w.whole_bare_tokens += bare + self.tools[0]
        return request, checkpoint

    def _baseline(self) -> None:
        if not self.peers:
            return
        t = self.transcript
        indices = trimmed(t, self.w.history_budget)
        if t.user_index is not None and t.user_index not in indices:
            self.w.baseline_without_user += 1
        units = [self.tools, self.system, *(t.units[i] for i in indices)]
        tokens = tuple(n for n, _ in units)
        # Anthropic's automatic caching: one breakpoint on the last block.
        self.w.sides[BASELINE].add(WireUnits(tokens, tuple(d for _, d in units), (len(units) - 1,)))


def _nothing_dropped(request: ModelRequest, transcript: Transcript) -> bool:
    """Whether ``request`` shows every message of the transcript whole: as many tool results,
    none a pointer, a fold note or clipped (the overhead measurement compares these only)."""
    results = [item.text or "" for item in request.body if item.role == "tool"]
    if len(results) != sum(1 for m in transcript.messages if m["role"] == "tool"):
        return False
    marks = (POINTER_TEXT, FOLDED_TEXT)  # a history pointer starts as a turn pointer does
    return not any(
        text.startswith(marks) or 'truncated="head+tail"' in text
        for text in (item.text or "" for item in request.body)
    )


def output_bytes(rng: random.Random) -> int:
    """A tool output of 1-6k tokens."""
    return int(rng.randint(1_000, 6_000) * BYTES_PER_TOKEN)


async def long_run(settings: CacheSettings, root: Path, *, peers: bool, name: str = "long run") -> Workload:
    """One user message, then ``long_steps`` tool steps in the same run."""
    w = Workload(name)
    store = await open_store(f"sqlite:///{root / (name.replace(' ', '-') + '.db')}")
    started = time.perf_counter()
    try:
        worker = ScriptedWorker(store, model=settings.model, owner="bench-cache")
        rec = Recorder(worker, w, peers=peers)
        sid = "long"
        plan = await worker.planner.plan(
            sid, AGENT, PRINCIPAL, settings.model, TOOLS, policy_version=POLICY_VERSION
        )
        w.history_budget = plan.budget.history_tokens
        rng = random.Random("long-run")
        message = UserMessage("Fix the failing test in the parser module. " + text(rng, 200, 400))
        run, lease, checkpoint = await worker.loop.start_run(
            sid, "long-run", message, PRINCIPAL, owner="bench-cache"
        )
        rec.transcript.add([message])
        for step in range(settings.long_steps):
            run = replace(run, step=step)
            _, checkpoint = await rec.point(run, checkpoint, lease)
            size = settings.big_bytes if step in settings.big_steps else output_bytes(rng)
            call = ToolCall(f"call_{step}", "search", {"q": text(rng, 20, 60)})
            result = ToolResult(f"call_{step}", text(rng, size, size))
            checkpoint = await worker.loop.record_step(
                run, checkpoint, [call, result], lease=lease, trigger="tool_completed"
            )
            rec.transcript.add([call, result])
            if settings.state_every and step % settings.state_every == settings.state_every - 1:
                update = {
                    "add_facts": [f"step {step}: " + text(rng, 40, 80)],
                    "next_action": f"step {step + 1}",
                }
                checkpoint = await worker.loop.update_working_state(
                    run, checkpoint, update, source="internal_tool", lease=lease, principal=PRINCIPAL
                )
        run = replace(run, step=settings.long_steps)
        _, checkpoint = await rec.point(run, checkpoint, lease)
    finally:
        await store.close()
    w.seconds = time.perf_counter() - started
    return w


async def session(settings: CacheSettings, root: Path, *, peers: bool) -> Workload:
    """``turns`` turns, a tool round trip every ``tool_every``-th (as ``ScriptedWorker.turn``)."""
    w = Workload("session")
    store = await open_store(f"sqlite:///{root / 'session.db'}")
    started = time.perf_counter()
    try:
        worker = ScriptedWorker(store, model=settings.model, owner="bench-cache")
        rec = Recorder(worker, w, peers=peers)
        sid = "session"
        for turn in range(1, settings.turns + 1):
            rng = random.Random(f"{sid}:{turn}")
            plan = await worker.planner.plan(
                sid, AGENT, PRINCIPAL, settings.model, TOOLS, policy_version=POLICY_VERSION
            )
            w.history_budget = plan.budget.history_tokens
            message = UserMessage(
                f"[turn {turn}] " + text(rng, 200, 400), principal_id=PRINCIPAL.principal_id
            )
            run, lease, checkpoint = await worker.loop.start_run(
                sid, f"{sid}-run-{turn}", message, PRINCIPAL, owner="bench-cache"
            )
            rec.transcript.add([message])
            _, checkpoint = await rec.point(run, checkpoint, lease)
            if settings.tool_every and turn % settings.tool_every == 0:
                call = ToolCall(f"c{turn}", "search", {"q": text(rng, 40, 120)})
                result = ToolResult(f"c{turn}", text(rng, 300, 500))
                checkpoint = await worker.loop.record_step(
                    run, checkpoint, [call, result], lease=lease, trigger="tool_completed"
                )
                rec.transcript.add([call, result])
                run = replace(run, step=1)
                _, checkpoint = await rec.point(run, checkpoint, lease)
            answer = AssistantMessage(text(rng, 200, 450))
            await worker.loop.record_step(run, checkpoint, [answer], lease=lease, trigger="final_completion")
            rec.transcript.add([answer])
    finally:
        await store.close()
    w.seconds = time.perf_counter() - started
    return w


@dataclass(slots=True)
class CacheResults:
    settings: CacheSettings
    prices: PriceTable
    workloads: list[Workload]
    langchain: str | None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "model": self.settings.model.model_id,
            "window": self.settings.model.context_window,
            "prices": {
                "input": self.prices.input,
                "cached_read": self.prices.cached_read,
                "cache_write": self.prices.cache_write,
            },
            "langchain": self.langchain,
            "workloads": {w.name: w.to_dict(self.prices) for w in self.workloads},
        }
        data["acceptance"] = acceptance(data)
        return data


def run_cache(settings: CacheSettings, prices: PriceTable | None = None) -> CacheResults:
    from .bench import langchain_version

    peer = langchain_version() if settings.peers else None

    async def both() -> list[Workload]:
        with tempfile.TemporaryDirectory(prefix="ctxengine-cache-") as tmp:
            root = Path(tmp)
            done = [
                await long_run(settings, root, peers=peer is not None),
                await session(settings, root, peers=peer is not None),
            ]
            if settings.overhead_model is not None:
                # The rendering overhead: the long run on a window where its first steps
                # drop nothing (only those requests are compared with the bare conversation).
                wide = replace(
                    settings, model=settings.overhead_model, long_steps=min(settings.long_steps, 40)
                )
                window = settings.overhead_model.context_window // 1000
                done.append(await long_run(wide, root, peers=peer is not None, name=f"long run {window}k"))
            return done

    return CacheResults(settings, prices or PriceTable(), asyncio.run(both()), peer)


__all__ = ["BASELINE", "CacheResults", "CacheSettings", "Side", "Workload", "cache_markdown", "run_cache"]
