"""Issue 14 acceptance 2: what exact counting costs a worker on a 10,000-item session.

* ``cold_heuristic``: today's cold build (fresh items, fresh estimator, a heuristic
  model): the baseline;
* ``cold_exact_uncounted``: the same on an OpenAI model with nothing counted yet:
  every rendered item is tokenized (what counting once at append time avoids);
* ``cold_exact_counted``: fresh items (a worker that has not seen the session) whose
  counts the estimator already holds (the memo warmed on the same content, as a worker
  primed with the stored counts would be): the target is within 2x of the baseline;
* ``warm_exact`` / ``warm_heuristic``: the same items built again (memo and caches hit).

`benches/report.py` prints the ratios.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.assembly.builder import ContextBuilder
from ctxengine.cli.bench import assembly_case
from ctxengine.cli.synthetic import synthetic_session
from ctxengine.core import backends
from ctxengine.plan import ContextPlan, ContextPlanner

AGENT = ce.AgentSpec("bench-agent", "v1", "You are a benchmark agent.")
ALICE = ce.Principal("alice", "acme", frozenset({"search"}))
TOOLS = (ce.ToolSpec("search", "Search.", {"type": "object", "properties": {"q": {"type": "string"}}}),)
CLOCK = ce.FixedClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
N_ITEMS = 10_000
MODELS = {"heuristic": ("bench", "model"), "exact": ("openai", "gpt-4o")}


def setup(kind: str, estimator: Any = None) -> tuple[ContextBuilder, ContextPlan]:
    planner = ContextPlanner(None, estimator=estimator or ce.TokenEstimator(), clock=CLOCK)
    provider, name = MODELS[kind]
    model = ce.ResolvedModel(provider, name, 200_000, 16_384, 8_192)
    plan = planner.draft("s1", 1, AGENT, model, TOOLS, policy_version="pv1")
    return ContextBuilder(planner, clock=CLOCK), plan


def _cold(benchmark: Any, kind: str, counted: bool) -> None:
    rounds = 0
    warmed = None
    if counted:
        # The counts of this content, held by the estimator before the fresh build.
        builder, plan = setup(kind)
        run, cp = assembly_case(N_ITEMS, "counted")
        builder.assemble(run, cp, AGENT, ALICE, plan=plan)
        warmed = builder.estimator

    def fresh() -> tuple[tuple[Any, ...], dict[str, Any]]:
        nonlocal rounds
        rounds += 1
        builder, plan = setup(kind, warmed)
        run, cp = assembly_case(N_ITEMS, "counted" if counted else f"cold-{kind}-{rounds}")
        return (run, cp, AGENT, ALICE), {"plan": plan, "builder": builder}

    def build(run: Any, cp: Any, agent: Any, principal: Any, *, plan: Any, builder: Any) -> Any:
        return builder.assemble(run, cp, agent, principal, plan=plan)

    result = benchmark.pedantic(build, setup=fresh, rounds=3, iterations=1)
    assert result.pressure.history_cut > 0


def bench_assemble_10k_cold_heuristic(benchmark: Any, backend_name: str) -> None:
    _cold(benchmark, "heuristic", counted=False)


def bench_assemble_10k_cold_exact_uncounted(benchmark: Any, backend_name: str) -> None:
    _cold(benchmark, "exact", counted=False)


def bench_assemble_10k_cold_exact_counted(benchmark: Any, backend_name: str) -> None:
    _cold(benchmark, "exact", counted=True)


@pytest.mark.parametrize("kind", list(MODELS))
def bench_assemble_10k_warm(benchmark: Any, backend_name: str, kind: str) -> None:
    builder, plan = setup(kind)
    run, cp = assembly_case(N_ITEMS, "warm")
    builder.assemble(run, cp, AGENT, ALICE, plan=plan)
    result = benchmark(builder.assemble, run, cp, AGENT, ALICE, plan=plan)
    assert result.pressure.history_cut > 0


# -- the cut alone (SPEC section 11's "memo cold" row) ---------------------------------

CUT_BUDGET = 600_000
CUT_MODELS = {"heuristic": "bench:model", "exact": "openai:gpt-4o"}


def _cut_cold(benchmark: Any, backend_name: str, kind: str, counted: bool) -> None:
    core = backends.module(backend_name)
    model = CUT_MODELS[kind]
    rounds = 0
    warmed = None
    if counted:
        warmed = core.TokenEstimator()
        warmed.raw_estimates(synthetic_session(N_ITEMS, tag="cut-counted"), model)

    def fresh() -> tuple[tuple[Any, ...], dict[str, Any]]:
        nonlocal rounds
        rounds += 1
        items = synthetic_session(N_ITEMS, tag="cut-counted" if counted else f"cut-{kind}-{rounds}")
        return (items, 0, CUT_BUDGET, warmed or core.TokenEstimator(), model), {}

    cut = benchmark.pedantic(core.select_history, setup=fresh, rounds=5, iterations=1)
    assert 0 <= cut < N_ITEMS


@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_select_history_10k_cold_heuristic(benchmark: Any, name: str) -> None:
    _cut_cold(benchmark, name, "heuristic", counted=False)


@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_select_history_10k_cold_exact_uncounted(benchmark: Any, name: str) -> None:
    _cut_cold(benchmark, name, "exact", counted=False)


@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_select_history_10k_cold_exact_counted(benchmark: Any, name: str) -> None:
    _cut_cold(benchmark, name, "exact", counted=True)
