"""``Replayer``: every recorded request of the selected sessions, rebuilt under named
configurations and the baselines, with tokens by region, cut, compactions, clearing, fit,
prompt-cache figures under each provider rule and effective input cost (issue 42).

Each session is read once and counted once per counting key; every configuration then
replays it from those counts (``replay.fast``), or through the real loop
(``method="exact"``, ``replay.exact``). The cache figures are ``core.prompt_cache``'s rules
over the requests' units (``replay.cache``: the fast path's rendered items, each counted as
the builder counts it; the exact path's OpenAI Chat and Anthropic Messages bodies and the
baselines' messages, as ``ctxengine bench --cache`` counts them), priced with a
``PriceTable``. ``replay.report`` turns the outcomes into the report's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.prompt_cache import PriceTable, PromptCacheSimulator
from ..errors import ArgumentError, ContextOverflow, PolicyError
from ..model import AgentSpec, Principal, ToolSpec
from ..providers.cache_units import UnitCounter
from .baselines import FULL_HISTORY, TRIM_MESSAGES, baseline_requests, langchain_installed
from .config import DEFAULT_INSTRUCTIONS, ReplayConfig, check_names
from .fast import Request, SessionReplay, count_session
from .setup import REPLAY_PRINCIPAL, Configured, configure, make_estimator
from .sources import ReplaySession

METHODS = ("fast", "exact")


@dataclass(slots=True)
class ReplayOptions:
    """What to replay sessions under: configurations, baselines, method, prices, agent."""

    configs: Sequence[ReplayConfig]
    baselines: bool = True
    method: str = "fast"
    prices: PriceTable = field(default_factory=PriceTable)
    agent: AgentSpec | None = None
    tools: tuple[ToolSpec, ...] = ()
    #: Who the runs are for (the runtime metadata block names the principal and its scopes).
    principal: Principal = REPLAY_PRINCIPAL

    def __post_init__(self) -> None:
        if not self.configs:
            raise ArgumentError("replay", "configs", "expected at least one configuration")
        check_names(self.configs)
        if self.method not in METHODS:
            raise ArgumentError("replay", "method", f"expected one of {METHODS}, got {self.method!r:.40}")


@dataclass(slots=True)
class Outcome:
    """One session's requests under one configuration or baseline, each with its cache
    figures (``Request.cache``; the exact path's Anthropic ones in ``anthropic``)."""

    name: str
    session: ReplaySession
    method: str
    requests: list[Request]
    anthropic: list[tuple[int, int, int]] | None = None


class Replayer:
    """Replays sessions one by one under ``options``."""

    def __init__(self, options: ReplayOptions) -> None:
        self.o = options
        self._configured: dict[tuple[str, str], Configured] = {}
        self._estimators: dict[str | None, Any] = {}
        self.counter = UnitCounter()
        self.peers = langchain_installed()

    def names(self) -> list[str]:
        """The configurations' names, then the baselines'."""
        names = [c.name for c in self.o.configs]
        if self.o.baselines:
            names.append(FULL_HISTORY)
            if self.peers:
                names.append(TRIM_MESSAGES)
        return names

    async def configured(self, config: ReplayConfig, system: str | None = None) -> Configured:
        """``config`` planned for the agent of a session whose transcript opened with ``system``."""
        key = (config.name, system or "")
        hit = self._configured.get(key)
        if hit is None:
            # One estimator per counting setting: its memo (primed with the stored counts)
            # serves every configuration that counts alike.
            est = self._estimators.get(config.encoding)
            if est is None:
                est = self._estimators[config.encoding] = make_estimator(config)
            try:
                hit = await configure(
                    config,
                    instructions=system,
                    tools=self.o.tools,
                    agent=self.o.agent,
                    principal=self.o.principal,
                    estimator=est,
                )
            except ContextOverflow as exc:
                raise PolicyError(f"configs.{config.name}", f"cannot be planned: {exc}") from None
            self._configured[key] = hit
        return hit

    async def session(
        self, session: ReplaySession, stored: Sequence[int | None] | None = None
    ) -> list[Outcome]:
        """``session`` under every configuration, then every baseline."""
        from .exact import replay_exact

        out: list[Outcome] = []
        counts_by_key: dict[tuple[int, str], Any] = {}
        first: Configured | None = None
        for config in self.o.configs:
            c = await self.configured(config, session.system)
            first = first or c
            if self.o.method == "exact":
                requests = await replay_exact(c, session, self.counter)
                out.append(_simulated(config.name, session, "exact", requests))
                continue
            known = (id(c.estimator), c.key)
            counts = counts_by_key.get(known)
            if counts is None:
                counts = counts_by_key[known] = count_session(session, c, stored if c is first else None)
            out.append(Outcome(config.name, session, "fast", SessionReplay(c, counts).requests()))
        if self.o.baselines and first is not None:
            instructions = (
                first.agent.instructions
                if self.o.agent
                else session.system or first.config.instructions or DEFAULT_INSTRUCTIONS
            )
            budget = first.plan.budget.history_tokens
            for name in self.names()[len(self.o.configs) :]:
                requests = baseline_requests(name, session, instructions, self.o.tools, budget, self.counter)
                out.append(_simulated(name, session, "baseline", requests))
        return out


def _simulated(name: str, session: ReplaySession, method: str, requests: list[Request]) -> Outcome:
    """The simulator over requests that carry their units."""
    sim, anthropic = PromptCacheSimulator(), PromptCacheSimulator()
    figures: list[tuple[int, int, int]] | None = None
    for r in requests:
        r.cache = sim.add(*r.units)
        if r.anthropic_units is not None:
            a = anthropic.add(*r.anthropic_units)
            figures = figures if figures is not None else []
            figures.append((a.total, a.anthropic_read, a.anthropic_write))
    return Outcome(name, session, method, requests, figures)


__all__ = ["METHODS", "Outcome", "ReplayOptions", "Replayer"]
