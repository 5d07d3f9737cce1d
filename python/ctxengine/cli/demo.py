"""The fifty-turn demo session (SPEC section 9), driven through the real ``ContextLoop``.

Each turn is one run, as an agent runtime would drive it:

1. the runtime applies what changed outside the conversation (a revoked
   scope, a memory written or corrected);
2. the user message is appended as an event and seeds the run
   (``pick_up``: claim and version 1 in one transaction);
3. ``planner.plan`` runs right before the first model request: the plan of
   the epoch comes back unchanged (no event) while its identity holds;
4. every step: ``build_with_pressure`` (compacting when the body does not
   fit), render to three provider payloads and check their tool pairs,
   rebuild to check the bytes are a pure function of the inputs, hand the
   request to the fake model, apply its reply (tool results, working-state
   updates through the control tool, the final answer), and reconcile the
   estimator with the fake provider's usage.

Everything observed lands in a ``DemoRecord``; ``demo_checks`` decides
whether the engine's invariants held.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit, urlunsplit

from ..assembly.builder import ContextBuilder
from ..assembly.request import ModelRequest, RenderedItem
from ..core import backends
from ..core.estimator import Estimator, TokenEstimator
from ..errors import ContextError, OrphanedToolPair
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
    TrustLevel,
    UserMessage,
)
from ..model.clock import FixedClock
from ..plan import ContextPlan, ContextPlanner, ToolGate
from ..providers import check_wire_pairs, to_anthropic_messages, to_openai_chat, to_openai_responses
from ..runtime.compaction import StructuredCompactor
from ..runtime.compaction_record import Compactor
from ..runtime.loop import CONTEXT_COMPACTED, ContextLoop, StateUpdate
from ..runtime.model_compactor import ModelCompactor
from ..runtime.session import append_item
from ..runtime.usage import compaction_usage
from ..stores import open_store
from ..stores.events import Lease, Store
from .demo_config import (
    DEFAULT_TURNS,
    DEFAULT_WINDOW,
    DemoConfig,
    check_config,
    demo_model,
    demo_run_id,
    minimum_window,
)
from .fakemodel import (
    CONTROL_TOOL,
    MEMORY_SNAPSHOT,
    REQUIRED_SCOPES,
    TOOLS,
    Answer,
    CallTools,
    ScriptedSummarizer,
    TurnScript,
    actual_usage,
    run_tool,
    script_turn,
)

POLICY_VERSION = "demo-policy/1"
AGENT = AgentSpec(
    "procurement-analyst",
    "2026.03",
    "You are Acme's procurement analyst. Compare vendors carefully, cite the pages you read, "
    "keep the working state current, and never send email without being asked.",
)
#: Starts late in the evening so the fifty turns cross midnight.
START = datetime(2026, 3, 14, 22, 5, tzinfo=UTC)
TURN_GAP = timedelta(minutes=5)
STEP_GAP = timedelta(seconds=20)
WIRE_FORMATS = {
    "openai_chat": to_openai_chat,
    "openai_responses": to_openai_responses,
    "anthropic_messages": to_anthropic_messages,
}


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What one model request looked like."""

    turn: int
    step: int
    epoch: int
    prefix_sha256: str
    plan_prefix_sha256: str
    body_sha256: str
    total_tokens: int
    capacity_tokens: int
    max_output_tokens: int
    #: The date the runtime metadata in the body shows, and the clock's date at that request.
    date: str
    clock_date: str
    summary_depth: int
    orphaned_pairs: int
    wire_failures: tuple[str, ...]
    rebuilt_identical: bool
    has_current_user: bool
    has_correction: bool
    tool_names: tuple[str, ...]


@dataclass(slots=True)
class TurnRecord:
    """One turn (one run): its requests' peak budget use and what happened."""

    turn: int
    run_id: str
    time: str
    steps: int = 0
    max_total_tokens: int = 0
    capacity_tokens: int = 0
    # Over the turn's requests: the engine's estimates and the provider's counts.
    estimated_tokens: int = 0
    actual_tokens: int = 0
    compactions: int = 0
    depth: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class DemoRecord:
    """Everything the demo observed; ``demo_checks.check`` judges it."""

    config: DemoConfig
    session_id: str
    store: str
    backend: str
    model: ResolvedModel
    requests: list[RequestRecord] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    allowed_emails: int = 0
    revoked_at: int | None = None
    corrected_at: int | None = None
    memory_snapshots: set[str] = field(default_factory=set)
    epochs: int = 0
    epoch_reasons: list[str] = field(default_factory=list)
    logged_compactions: int = 0
    logged_max_depth: int = 0
    #: Compactions whose model summary was adopted / that fell back (``--summarizer scripted``).
    model_summaries: int = 0
    summary_fallbacks: int = 0
    #: Input tokens the compaction calls spent (in the session's books).
    compaction_tokens: int = 0
    correction_factor: float = 1.0
    error: str | None = None
    elapsed_s: float = 0.0


def count_orphans(body: tuple[RenderedItem, ...] | list[RenderedItem]) -> int:
    """Tool calls without a later result plus results without an earlier call, in one request body."""
    open_calls: set[str] = set()
    orphans = 0
    for item in body:
        if item.is_tool_call and item.call_id is not None:
            open_calls.add(item.call_id)
        elif item.is_tool_result:
            if item.call_id in open_calls:
                open_calls.discard(item.call_id)
            else:
                orphans += 1
    return orphans + len(open_calls)


def redact(url: str) -> str:
    """A store URL with any password masked (a PostgreSQL DSN may carry one)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port is not None else ""
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=f"{user}{host}{port}"))


class DemoSession:
    """The runtime side of the demo: one session, one worker, the scripted model."""

    def __init__(self, store: Store, record: DemoRecord, clock: FixedClock, estimator: Estimator) -> None:
        self.store = store
        self.record = record
        self.clock = clock
        self.estimator = estimator
        self.model = record.model
        self.planner = ContextPlanner(store, estimator=estimator, clock=clock)
        self.builder = ContextBuilder(self.planner, estimator=estimator, clock=clock)
        self.loop = ContextLoop(
            store,
            planner=self.planner,
            builder=self.builder,
            compactor=self._compactor(record.config.summarizer, estimator),
            estimator=estimator,
        )
        self.gate = ToolGate(REQUIRED_SCOPES)
        self.principal = Principal("dana", "acme", frozenset({"web.search", "files.read", "mail.send"}))
        self.recall: tuple[str, ...] = ()
        self.corrections: tuple[str, ...] = ()

    @staticmethod
    def _compactor(summarizer: str, estimator: Estimator) -> Compactor:
        if summarizer == "scripted":
            return ModelCompactor(estimator, ScriptedSummarizer())
        return StructuredCompactor(estimator)

    @property
    def session_id(self) -> str:
        return self.record.session_id

    async def run_turn(self, script: TurnScript) -> TurnRecord:
        record = self.record
        turn = script.turn
        if turn > 1:
            self.clock.advance(TURN_GAP)
        run_id = demo_run_id(self.session_id, turn)
        tr = TurnRecord(turn, run_id, self.clock.now().strftime("%Y-%m-%d %H:%M"))
        # 1. What changed outside the conversation.
        if script.revoke_scope is not None:
            self.principal = replace(self.principal, scopes=self.principal.scopes - {script.revoke_scope})
            record.revoked_at = turn
            tr.notes.append(f"scope {script.revoke_scope} revoked")
        if script.remember is not None:
            self.recall = (*self.recall, script.remember)
            tr.notes.append("memory written (recall)")
        if script.correct is not None:
            self.corrections = (*self.corrections, script.correct)
            record.corrected_at = turn
            tr.notes.append("memory corrected")
        if record.turns and record.turns[-1].time[:10] != tr.time[:10]:
            tr.notes.append("clock crossed midnight")
        # 2. The user message seeds the run.
        seed = await append_item(
            self.store,
            self.session_id,
            UserMessage(script.user, principal_id=self.principal.principal_id),
            principal=self.principal,
        )
        assert seed.seq is not None
        run = RunContext(run_id, self.session_id, seed.seq)
        run, lease, checkpoint = await self.loop.pick_up(run, self.principal, owner="demo-worker")
        checkpoint = replace(checkpoint, recall=self.recall, corrections=self.corrections)
        # 3. Plan right before the first request (after routing: the model is fixed here).
        plan = await self.planner.plan(
            self.session_id,
            AGENT,
            self.principal,
            self.model,
            TOOLS,
            policy_version=POLICY_VERSION,
            memory_snapshot=MEMORY_SNAPSHOT,
        )
        record.memory_snapshots.add(plan.memory_snapshot)
        # 4. The steps.
        for step, reply in enumerate(script.replies):
            if step:
                self.clock.advance(STEP_GAP)
            step_run = replace(run, step=step)
            depth_before = checkpoint.summary_depth
            request, checkpoint = await self.loop.build_with_pressure(
                step_run, checkpoint, AGENT, self.principal, lease=lease
            )
            tr.compactions += checkpoint.summary_depth - depth_before
            self._observe(tr, step_run, plan, checkpoint, request)
            total = int(request.metadata["total_tokens"])
            # The provider counts the text, not our estimate of it: its usage is a
            # ratio of the uncorrected count (the factor in force divided out).
            uncorrected = total / self.estimator.correction(plan.counting_key)
            actual = actual_usage(int(uncorrected), turn, step)
            await self.loop.report_usage(step_run, request, actual)
            tr.estimated_tokens += total
            tr.actual_tokens += actual
            if isinstance(reply, Answer):
                checkpoint = await self._answer(step_run, checkpoint, reply, lease)
            else:
                checkpoint = await self._call_tools(step_run, checkpoint, reply, plan, lease, tr)
        tr.depth = checkpoint.summary_depth
        if tr.compactions > 1:
            tr.notes.append(f"compacted {tr.compactions}x in one run: its own pages crowd history out")
        return tr

    def _observe(
        self, tr: TurnRecord, run: RunContext, plan: ContextPlan, cp: Checkpoint, request: ModelRequest
    ) -> None:
        meta = request.metadata
        failures: list[str] = []
        for name, render in WIRE_FORMATS.items():
            try:
                check_wire_pairs(render(request, model=self.model.model), name)
            except OrphanedToolPair as exc:
                failures.append(f"{name}: {exc}")
        rebuilt = self.builder.build(run, cp, AGENT, self.principal, plan=plan)
        date = next((_metadata_date(item) for item in request.body if _is_metadata(item)), "?")
        total = int(meta["total_tokens"])
        capacity = int(meta["capacity_tokens"])
        self.record.requests.append(
            RequestRecord(
                turn=tr.turn,
                step=run.step,
                epoch=int(meta["epoch"]),
                prefix_sha256=str(meta["prefix_sha256"]),
                plan_prefix_sha256=str(meta["plan_prefix_sha256"]),
                body_sha256=str(meta["body_sha256"]),
                total_tokens=total,
                capacity_tokens=capacity,
                max_output_tokens=request.max_output_tokens,
                date=date,
                clock_date=self.clock.now().date().isoformat(),
                summary_depth=cp.summary_depth,
                orphaned_pairs=count_orphans(request.body),
                wire_failures=tuple(failures),
                rebuilt_identical=rebuilt == request,
                has_current_user=any(item.region_class == "current_user" for item in request.body),
                has_correction=all(
                    any(line in (item.text or "") for item in request.body) for line in self.corrections
                ),
                tool_names=tuple(tool.name for tool in request.tools),
            )
        )
        tr.steps += 1
        tr.max_total_tokens = max(tr.max_total_tokens, total)
        tr.capacity_tokens = capacity

    async def _answer(self, run: RunContext, cp: Checkpoint, reply: Answer, lease: Lease) -> Checkpoint:
        # The reply and the final checkpoint commit together; the run's earlier versions are pruned.
        return await self.loop.record_step(
            run, cp, [AssistantMessage(reply.text)], lease=lease, trigger="final_completion"
        )

    async def _call_tools(
        self,
        run: RunContext,
        cp: Checkpoint,
        reply: CallTools,
        plan: ContextPlan,
        lease: Lease,
        tr: TurnRecord,
    ) -> Checkpoint:
        calls: list[ConversationItem] = []
        results: list[ConversationItem] = []
        updates: list[StateUpdate] = []
        state = cp.working_state
        for i, use in enumerate(reply.calls):
            call_id = f"t{tr.turn:03d}-s{run.step}-c{i}"
            calls.append(ToolCall(call_id, use.name, use.arguments))
            if use.name == CONTROL_TOOL:
                try:
                    # Checked here so the model reads the outcome; recorded with the step.
                    untrusted = TrustLevel.EXTERNAL_UNTRUSTED
                    state = self.loop.working_state.transition(
                        state, use.arguments, source_trust=untrusted, model_id=plan.counting_key
                    )
                    updates.append(StateUpdate(use.arguments))
                    outcome = {"ok": True, "open_tasks": sum(t.status != "completed" for t in state.tasks)}
                    results.append(ToolResult(call_id, json.dumps(outcome, sort_keys=True)))
                except ContextError as exc:  # a rejected update is content the model can read
                    error = {"ok": False, "error": type(exc).__name__, "message": str(exc)}
                    results.append(ToolResult(call_id, json.dumps(error, sort_keys=True), is_error=True))
                continue
            decision = self.gate.check(plan, self.principal, use.name)
            if not decision.allowed:
                self.record.refusals.append(f"turn {tr.turn}: {use.name} refused ({decision.reason})")
                tr.notes.append(f"{use.name} refused by ToolGate")
                results.append(
                    ToolResult(call_id, json.dumps(decision.refusal(), sort_keys=True), is_error=True)
                )
                continue
            if use.name == "send_email":
                self.record.allowed_emails += 1
                tr.notes.append("send_email allowed")
            results.append(run_tool(call_id, use, tr.turn))
        # Parallel calls first, then their results: the order providers expect. The items,
        # the working-state transitions and the checkpoint commit in one transaction.
        return await self.loop.record_step(
            run,
            cp,
            [*calls, *results],
            lease=lease,
            trigger="tool_completed",
            state_updates=updates,
            principal=self.principal,
        )

    async def finish(self) -> None:
        """Read back what the log says: epochs and their reasons, compactions and their depth."""
        record = self.record
        plans = await self.store.events.read(
            self.session_id, types=("context.plan.created", "context.epoch.rotated")
        )
        record.epochs = len(plans)
        record.epoch_reasons = [str(event.payload.get("reason")) for event in plans]
        compacted = await self.store.events.read(self.session_id, types=(CONTEXT_COMPACTED,))
        record.logged_compactions = len(compacted)
        record.logged_max_depth = max((int(e.payload["depth"]) for e in compacted), default=0)
        outcomes = [e.payload.get("summarizer", {}).get("outcome") for e in compacted]
        record.model_summaries = outcomes.count("adopted")
        record.summary_fallbacks = outcomes.count("fallback")
        record.compaction_tokens = sum(
            call.input_tokens for call in map(compaction_usage, compacted) if call is not None
        )
        record.correction_factor = self.estimator.correction(self.model.model_id)


def _is_metadata(item: RenderedItem) -> bool:
    return item.region_class == "runtime_metadata" and "date: " in (item.text or "")


def _metadata_date(item: RenderedItem) -> str:
    """The ``date:`` line of the runtime metadata block (``YYYY-MM-DD``)."""
    return (item.text or "").split("date: ", 1)[1][:10]


def default_store_url() -> str:
    directory = Path(tempfile.mkdtemp(prefix="ctxengine-demo-"))
    return f"sqlite:///{directory / 'demo.db'}"


async def run_demo(config: DemoConfig, *, on_turn: Callable[[TurnRecord], None] | None = None) -> DemoRecord:
    """Run the scripted session and return what was observed. A config that cannot run is a
    ``ModelValidationError`` before anything runs (``check_config``); after that no
    ``ContextError`` is raised: a failed step ends the session and is recorded as ``error``."""
    check_config(config)
    if config.backend is not None:
        backends.use_backend(config.backend)
    url = config.store_url or default_store_url()
    session_id = config.session_id or f"demo-{uuid.uuid4().hex[:8]}"
    clock = FixedClock(START)
    record = DemoRecord(
        config, session_id, redact(url), backends.backend(), demo_model(config.context_window)
    )
    estimator = cast(Estimator, TokenEstimator())
    started = time.perf_counter()
    store = await open_store(url, clock=clock)
    try:
        session = DemoSession(store, record, clock, estimator)
        for turn in range(1, config.turns + 1):
            try:
                tr = await session.run_turn(script_turn(turn))
            except ContextError as exc:
                record.error = f"turn {turn}: {type(exc).__name__}: {exc}"
                break
            record.turns.append(tr)
            if on_turn is not None:
                on_turn(tr)
        await session.finish()
    finally:
        await store.close()
    record.elapsed_s = time.perf_counter() - started
    return record


__all__ = [
    "AGENT",
    "DEFAULT_TURNS",
    "DEFAULT_WINDOW",
    "DemoConfig",
    "DemoRecord",
    "DemoSession",
    "RequestRecord",
    "TurnRecord",
    "count_orphans",
    "check_config",
    "demo_model",
    "demo_run_id",
    "minimum_window",
    "redact",
    "run_demo",
]
