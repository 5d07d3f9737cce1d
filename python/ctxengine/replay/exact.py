"""The replay of one session through the real loop (issue 42's exact path).

Each run of the session is started with its user message (``ContextLoop.start_run``) in a
store of its own (in memory), each model request is built with ``build_with_pressure``
(compacting as the loop does) before the response it preceded, and the response and the
tool results are recorded with ``record_step``. Each request is rendered with
``to_openai_chat`` and ``to_anthropic_messages`` and turned into cache units as ``ctxengine
bench --cache`` does, so the cache figures are the bench's on the same transcript. It costs
what the loop costs (about 2 ms a request here): the reference the fast path is held to,
and the method for a few sessions whose Anthropic figures must be exact.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..assembly.request import ModelRequest
from ..errors import CompactionDepthExceeded, ContextOverflow
from ..model import Checkpoint, ConversationItem, RunContext, ToolResult, UserMessage
from ..plan import ContextPlanner
from ..providers import to_anthropic_messages, to_openai_chat
from ..providers.cache_units import UnitCounter
from ..runtime.loop import ContextLoop
from ..stores.memory import MemoryStore
from .fast import DEPTH, Request
from .setup import BLOCK_CLASSES, POLICY_VERSION, TURN_CLASSES, Configured
from .sources import ReplaySession, request_points


def _fresh(item: ConversationItem) -> ConversationItem:
    return replace(item, seq=None)


class ExactReplay:
    """One session through a ``ContextLoop`` of the configuration's planner policy, builder
    settings, compactor and estimator."""

    def __init__(self, c: Configured, session: ReplaySession, counter: UnitCounter | None = None) -> None:
        self.c = c
        self.session = session
        self.counter = counter if counter is not None else UnitCounter()
        store = MemoryStore()
        cfg = c.config
        self.planner = ContextPlanner(store, estimator=c.estimator, policy=cfg.policy, clock=c.planner.clock)
        from ..assembly.builder import ContextBuilder

        self.builder = ContextBuilder(
            self.planner,
            estimator=c.estimator,
            clock=c.planner.clock,
            max_compaction_depth=cfg.compaction.max_depth,
        )
        self.loop = ContextLoop(
            store, planner=self.planner, builder=self.builder, compactor=c.compactor, estimator=c.estimator
        )
        #: The rebuilt requests (``None`` where the build overflowed), for a caller to inspect.
        self.built: list[ModelRequest | None] = []

    def _figures(
        self,
        index: int,
        point: int,
        run: int,
        step: int,
        request: ModelRequest,
        pressure: Any,
        compactions: int,
    ) -> Request:
        c = self.c
        by: dict[str, int] = {"summary": 0, "history": 0, "blocks": 0, "turn": 0}
        history_items = 0
        raws = c.estimator.raw_estimates(list(request.body), c.key) if request.body else []
        for item, raw in zip(request.body, raws, strict=True):
            rc = item.region_class
            if rc == "compacted_summary":
                by["summary"] += raw
            elif rc == "history":
                by["history"] += raw
                history_items += 1
            elif rc in BLOCK_CLASSES:
                by["blocks"] += raw
            elif rc in TURN_CLASSES:
                by["turn"] += raw
        steps = dict(s.rsplit(":", 1) for s in pressure.yield_steps if ":" in s)
        model = c.config.model.model
        chat = self.counter.openai_chat(to_openai_chat(request, model=model))
        anthropic = self.counter.anthropic(to_anthropic_messages(request, model=model))
        r = Request(
            index,
            point,
            run,
            step,
            request.metadata["prefix_tokens"],
            by["summary"],
            by["history"],
            by["blocks"],
            by["turn"],
            pressure.capacity_tokens,
            pressure.fits,
            pressure.reason,
            history_items,
            pressure.history_cut,
            0,
            int(steps.get("tool_results_over_cap", 0)) + int(steps.get("tool_results_truncated", 0)),
            compactions,
            int(steps.get("turn_items_clipped", 0)),
            int(steps.get("turn_tool_results_cleared", 0)),
            int(steps.get("turn_tool_steps_folded", 0)),
            (chat.tokens, chat.digests, chat.breakpoints),
        )
        r.anthropic_units = (anthropic.tokens, anthropic.digests, anthropic.breakpoints)
        return r

    async def requests(self) -> list[Request]:
        c, loop, items = self.c, self.loop, self.session.items
        sid = self.session.session_id
        points = set(request_points(items))
        users = [i for i, item in enumerate(items) if isinstance(item, UserMessage)]
        out: list[Request] = []
        for n, u in enumerate(users):
            end = users[n + 1] if n + 1 < len(users) else len(items)
            await self.planner.plan(
                sid, c.agent, c.principal, c.config.model, c.tools, policy_version=POLICY_VERSION
            )
            user = items[u]
            assert isinstance(user, UserMessage)
            message = replace(user, seq=None)
            run, lease, cp = await loop.start_run(
                sid, f"{sid}-replay-{n}", message, c.principal, owner="replay"
            )
            last = u + 1
            step = 0
            for p in range(u + 1, end + 1):
                if p < end and p not in points:
                    continue
                if p > last:
                    trigger = "tool_completed" if isinstance(items[p - 1], ToolResult) else "model_response"
                    if p == end:
                        trigger = "final_completion"
                    cp = await loop.record_step(
                        run, cp, [_fresh(i) for i in items[last:p]], lease=lease, trigger=trigger
                    )
                    last = p
                if p == end:
                    break
                run = replace(run, step=step)
                out.append(await self._build(len(out), p, n, step, run, cp, lease))
                cp = self._cp
                step += 1
        return out

    async def _build(
        self, index: int, point: int, n: int, step: int, run: RunContext, cp: Checkpoint, lease: Any
    ) -> Request:
        c = self.c
        depth = cp.summary_depth
        plan = self.planner.cached(run.session_id)
        try:
            request, cp2 = await self.loop.build_with_pressure(run, cp, c.agent, c.principal, lease=lease)
        except (ContextOverflow, CompactionDepthExceeded) as exc:
            assembly = self.builder.assemble(run, cp, c.agent, c.principal, plan=plan)
            self._cp = cp
            self.built.append(None)
            r = self._figures(index, point, n, step, assembly.request, assembly.pressure, 0)
            if isinstance(exc, CompactionDepthExceeded):  # as the fast path names it
                r.fits, r.reason = False, DEPTH
            return r
        self._cp = cp2
        self.built.append(request)
        pressure = self.builder.assemble(run, cp2, c.agent, c.principal, plan=plan).pressure
        return self._figures(index, point, n, step, request, pressure, cp2.summary_depth - depth)


async def replay_exact(
    c: Configured, session: ReplaySession, counter: UnitCounter | None = None
) -> list[Request]:
    """Every request of ``session`` rebuilt by the real loop under ``c``."""
    return await ExactReplay(c, session, counter).requests()


__all__ = ["ExactReplay", "replay_exact"]
