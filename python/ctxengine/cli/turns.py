"""A scripted worker taking turns of sessions, the way a high-throughput runtime does (issue 13).

Every turn is a new run on whatever worker takes it: plan, then append the user
message, claim the run and seed it from the log (``ContextLoop.start_run``, one
transaction), build the first request (compacting when needed), and record the
reply with ``record_step``; every third turn the
model first calls a tool, so the run records the call and its result, builds
again, and then records the answer. The model is scripted and instant: what is
measured is the engine and the store.

``TurnTiming`` separates the first request (user message appended through the
first ``build_with_pressure``: what a user waits for before the model starts)
from the whole turn's engine time.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import cast

from ..assembly.builder import ContextBuilder
from ..core.estimator import Estimator, TokenEstimator
from ..model import (
    AgentSpec,
    AssistantMessage,
    ConversationItem,
    Principal,
    ResolvedModel,
    RunContext,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from ..model.clock import Clock, FixedClock
from ..plan import ContextPlanner
from ..runtime.compaction import StructuredCompactor
from ..runtime.loop import ContextLoop
from ..runtime.seeding import HISTORY, history_counts
from ..stores.events import NewEvent, Store, Visibility

MODEL = ResolvedModel("bench", "model-200k", 200_000, 16_384, 8_192)
AGENT = AgentSpec("bench-agent", "v1", "You are a benchmark agent. Answer briefly and cite your tools.")
PRINCIPAL = Principal("alice", "acme", frozenset({"search"}))
TOOLS = (ToolSpec("search", "Search.", {"type": "object", "properties": {"q": {"type": "string"}}}),)
POLICY_VERSION = "bench-policy/1"
START = datetime(2026, 11, 30, 9, tzinfo=UTC)

_WORDS = (
    "context budget prefix cache tool result history window token plan epoch summary worker session "
    "request provider model compaction envelope trust chronology estimate reserve margin cut pair"
).split()


def text(rng: random.Random, low: int, high: int) -> str:
    """Words up to a length drawn from ``[low, high]`` bytes."""
    target = rng.randint(low, high)
    out: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:target]


@dataclass(frozen=True, slots=True)
class TurnTiming:
    session_id: str
    turn: int
    #: Seconds from appending the user message to the first request built.
    first_request_s: float
    #: Seconds of engine and store work for the whole turn (no model time: it is scripted).
    turn_s: float
    steps: int
    compactions: int
    history_items: int
    #: Events the store acknowledged this turn: ``(sequence, derivation key)``.
    acked: tuple[tuple[int, str], ...] = ()
    #: Wall seconds per phase (append, plan, claim, seed, build, record).
    phases: tuple[tuple[str, float], ...] = ()
    #: CPU seconds this process spent on the turn (the engine's own work; the turn's wall
    #: time adds the store's: a server's statements, the disk's commits).
    cpu_s: float = 0.0


class ScriptedWorker:
    """One worker: a planner, builder and loop shared by every session it takes turns of."""

    def __init__(
        self,
        store: Store,
        *,
        model: ResolvedModel = MODEL,
        estimator: Estimator | None = None,
        clock: Clock | None = None,
        owner: str = "worker",
        tool_every: int = 3,
    ) -> None:
        self.store = store
        self.model = model
        self.estimator = estimator if estimator is not None else cast(Estimator, TokenEstimator())
        self.clock = clock if clock is not None else FixedClock(START)
        self.owner = owner
        self.tool_every = tool_every
        self.planner = ContextPlanner(store, estimator=self.estimator, clock=self.clock)
        self.builder = ContextBuilder(self.planner, estimator=self.estimator, clock=self.clock)
        self.loop = ContextLoop(
            store,
            planner=self.planner,
            builder=self.builder,
            compactor=StructuredCompactor(self.estimator),
            estimator=self.estimator,
        )

    async def turn(self, session_id: str, turn: int, *, principal: Principal = PRINCIPAL) -> TurnTiming:
        """Take turn ``turn`` of ``session_id`` (idempotent per turn: a repeat appends nothing)."""
        rng = random.Random(f"{session_id}:{turn}")
        phases: dict[str, float] = {}
        clock = time.perf_counter
        cpu = time.process_time()
        started = mark = clock()

        def lap(name: str) -> None:
            nonlocal mark
            now = clock()
            phases[name] = phases.get(name, 0.0) + now - mark
            mark = now

        user_key = f"user:{session_id}:{turn}"
        await self.planner.plan(
            session_id, AGENT, principal, self.model, TOOLS, policy_version=POLICY_VERSION
        )
        lap("plan")
        message = UserMessage(f"[turn {turn}] " + text(rng, 200, 400), principal_id=principal.principal_id)
        run_id = f"{session_id}-run-{turn}"
        run, lease, checkpoint = await self.loop.start_run(
            session_id, run_id, message, principal, owner=self.owner, derivation_key=user_key
        )
        acked = [(run.seed_sequence, user_key)]
        history = len(checkpoint.conversation) - 1
        depth = checkpoint.summary_depth
        lap("start")
        _, checkpoint = await self.loop.build_with_pressure(run, checkpoint, AGENT, principal, lease=lease)
        lap("build")
        first = time.perf_counter() - started
        compactions = checkpoint.summary_depth - depth
        steps = 1
        if self.tool_every and turn % self.tool_every == 0:
            call_id = f"c{turn}"
            call = ToolCall(call_id, "search", {"q": text(rng, 40, 120)})
            result = ToolResult(call_id, text(rng, 300, 500))
            checkpoint = await self.loop.record_step(
                run, checkpoint, [call, result], lease=lease, trigger="tool_completed"
            )
            acked += _acked(run, checkpoint.conversation[-2:])
            lap("record")
            run = replace(run, step=1)
            depth = checkpoint.summary_depth
            built = await self.loop.build_with_pressure(run, checkpoint, AGENT, principal, lease=lease)
            checkpoint = built[1]
            compactions += checkpoint.summary_depth - depth
            steps += 1
            lap("build")
        final = await self.loop.record_step(
            run, checkpoint, [AssistantMessage(text(rng, 200, 450))], lease=lease, trigger="final_completion"
        )
        acked += _acked(run, final.conversation[-1:])
        lap("record")
        return TurnTiming(
            session_id,
            turn,
            first,
            time.perf_counter() - started,
            steps,
            compactions,
            history,
            tuple(acked),
            tuple(phases.items()),
            time.process_time() - cpu,
        )


def _acked(run: RunContext, items: Sequence[ConversationItem]) -> list[tuple[int, str]]:
    """The step's items as the store acknowledged them: sequence and derivation key."""
    return [
        (item.seq, f"conversation.item:{run.run_id}:{run.step}:{i}")
        for i, item in enumerate(items)
        if item.seq is not None
    ]


async def bulk_history(
    store: Store,
    session_id: str,
    items: Sequence[ConversationItem],
    *,
    estimator: Estimator | None = None,
    model_id: str = MODEL.model_id,
) -> int:
    """Append ``items`` (their ``seq`` ignored) in batches, with their token counts under the
    estimator's history counter for ``model_id`` (a counting key: ``MODEL``'s by default), as
    earlier runs would have left them; returns the last sequence. For building long benchmark
    sessions quickly."""
    from ..runtime.session import ITEM_APPENDED, item_payload

    est = estimator if estimator is not None else cast(Estimator, TokenEstimator())
    counter = est.counter_id(model_id, HISTORY)
    last = 0
    for start in range(0, len(items), 2_000):
        batch = items[start : start + 2_000]
        events = [
            NewEvent(
                session_id,
                ITEM_APPENDED,
                item_payload(item),
                f"bulk:{session_id}:{start + i}",
                visibility=Visibility.session(),
            )
            for i, item in enumerate(batch)
        ]
        async with store.transaction():
            stored, _ = await store.events.append_all(events)
            logged = [replace(item, seq=event.sequence) for item, event in zip(batch, stored, strict=True)]
            await store.events.put_counts(session_id, counter, history_counts(est, model_id, logged))
        last = stored[-1].sequence
    return last


__all__ = [
    "AGENT",
    "MODEL",
    "POLICY_VERSION",
    "PRINCIPAL",
    "TOOLS",
    "ScriptedWorker",
    "TurnTiming",
    "bulk_history",
    "text",
]
