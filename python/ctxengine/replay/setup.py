"""One configuration made ready to replay sessions: its estimator, planner, builder and
compactor, its plan for an agent, and what every request of it shares (issue 42).

The engine's own objects do the parts whose rules it owns: the planner measures the prefix
and allocates the budget, a probe build gives the per-turn blocks' counts, the turn view
clips and clears (``assembly.clearing.view_turn``) and the ``StructuredCompactor``
compacts. The replay adds only arithmetic over per-item counts (``replay.fast``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from ..assembly.builder import ContextBuilder
from ..assembly.clearing import TurnRules
from ..assembly.render import digest_of
from ..assembly.request import RenderedItem
from ..core.estimator import Estimator, TokenEstimator
from ..model import AgentSpec, Checkpoint, Principal, RunContext, ToolSpec, UserMessage
from ..model.clock import FixedClock
from ..plan import ContextPlan, ContextPlanner
from ..runtime.compaction import StructuredCompactor
from ..stores.memory import MemoryStore
from .config import DEFAULT_INSTRUCTIONS, ReplayConfig

#: The clock every replay reads (a replay has no wall clock; ADR 0002's body blocks are dated).
REPLAY_START = datetime(2026, 11, 30, 9, tzinfo=UTC)
REPLAY_PRINCIPAL = Principal("replay", "replay", frozenset())
POLICY_VERSION = "replay/1"
#: Region classes of the per-turn blocks (between the history and the current turn).
BLOCK_CLASSES = frozenset(
    {
        "skill_bodies",
        "working_state",
        "knowledge",
        "recall",
        "notes",
        "memory_corrections",
        "runtime_metadata",
    }
)
TURN_CLASSES = frozenset({"current_user", "current_turn"})


def unit_digest(rendered: Any) -> bytes:
    cj = getattr(rendered, "_cj", None)
    return cast(bytes, cj[1]) if cj is not None else digest_of(rendered)


@dataclass(slots=True)
class Configured:
    """A configuration with its engine objects and its plan for one agent."""

    config: ReplayConfig
    estimator: Estimator
    planner: ContextPlanner
    builder: ContextBuilder
    compactor: StructuredCompactor
    agent: AgentSpec
    principal: Principal
    tools: tuple[ToolSpec, ...]
    plan: ContextPlan
    key: str
    rules: TurnRules | None
    #: Raw counts of the per-turn blocks (working state, runtime metadata), and their renders.
    blocks: tuple[RenderedItem, ...]
    block_raws: tuple[int, ...]
    prefix: tuple[RenderedItem, ...]
    working_state_raw: int = 0

    @property
    def budget(self) -> Any:
        return self.plan.budget


def make_estimator(config: ReplayConfig) -> Estimator:
    encoding = config.encoding
    if encoding is None:
        return cast(Estimator, TokenEstimator())
    factory: Any = TokenEstimator  # the metaclass takes the active backend's arguments
    return cast(Estimator, factory(encodings={config.model.model_id: encoding}))


async def configure(
    config: ReplayConfig,
    *,
    instructions: str | None = None,
    tools: tuple[ToolSpec, ...] = (),
    agent: AgentSpec | None = None,
    principal: Principal = REPLAY_PRINCIPAL,
    estimator: Estimator | None = None,
) -> Configured:
    """``config`` planned for an agent: ``agent`` as given, else one whose instructions are
    the configuration's, else ``instructions`` (a transcript's system text), else the default."""
    est = estimator if estimator is not None else make_estimator(config)
    clock = FixedClock(REPLAY_START)
    store = MemoryStore()
    planner = ContextPlanner(store, estimator=est, policy=config.policy, clock=clock)
    builder = ContextBuilder(
        planner, estimator=est, clock=clock, max_compaction_depth=config.compaction.max_depth
    )
    compactor = StructuredCompactor(
        est, max_depth=config.compaction.max_depth, max_listed_spans=config.compaction.max_listed_spans
    )
    if agent is None:
        text = config.instructions or instructions or DEFAULT_INSTRUCTIONS
        agent = AgentSpec("replay-agent", "v1", text)
    plan = await planner.plan(
        "replay-probe", agent, principal, config.model, tools, policy_version=POLICY_VERSION
    )
    # A probe build: the per-turn blocks of a request whose turn is one user message.
    run = RunContext("replay-probe-run", "replay-probe", 1)
    probe = Checkpoint("replay-probe-run", conversation=(UserMessage("probe", seq=1),))
    assembly = builder.assemble(run, probe, agent, principal, plan=plan)
    blocks = tuple(i for i in assembly.request.body if i.region_class in BLOCK_CLASSES)
    key = plan.counting_key
    raws = tuple(est.raw_estimates(list(blocks), key)) if blocks else ()
    ws = sum(n for b, n in zip(blocks, raws, strict=True) if b.region_class == "working_state")
    return Configured(
        config,
        est,
        planner,
        builder,
        compactor,
        agent,
        principal,
        tuple(tools),
        plan,
        key,
        builder.turn_rules(plan),
        blocks,
        raws,
        assembly.request.prefix,
        ws,
    )


__all__ = [
    "BLOCK_CLASSES",
    "POLICY_VERSION",
    "REPLAY_PRINCIPAL",
    "REPLAY_START",
    "TURN_CLASSES",
    "Configured",
    "configure",
    "make_estimator",
    "unit_digest",
]
