"""The first exact count's table build runs off the event loop (issue 40): in a fresh process,
``ContextPlanner.plan`` builds the o200k tables once, on a worker thread, before it counts;
later plans and other encodings' heuristic models start no thread. The block the loop still
sees is measured by ``benches/bench_loop_lag_tables.py`` (a timing, not an assert here)."""

from __future__ import annotations

import json

import pytest

from hidden_imports import run_without

PROBE = """
import asyncio, json, threading
import ctxengine as ce
from ctxengine.core import backends, estimator

module = backends.active()
calls = []
real = module.load_encoding

def recorded(name):
    calls.append((name, threading.current_thread() is threading.main_thread()))
    return real(name)

module.load_encoding = recorded

async def main():
    store = await ce.open_store("memory://")
    planner = ce.ContextPlanner(store, estimator=ce.TokenEstimator())
    agent = ce.AgentSpec("a", "v1", "You answer questions.")
    who = ce.Principal("u", "t", frozenset())
    for session, model_id in (("s1", "gpt-4o"), ("s2", "gpt-4o"), ("s3", "some-local-model")):
        model = ce.ResolvedModel("openai", model_id, 128_000, 16_384, 8_192)
        await planner.plan(session, agent, who, model, (), policy_version="v1")
    first = list(calls)
    # A worker that only reads the plan (ContextLoop picking a run up) builds them too.
    estimator._LOADED.clear()
    reader = ce.ContextPlanner(store, estimator=ce.TokenEstimator())
    plan = await reader.current("s1")
    print(json.dumps({"calls": first, "reader": calls[len(first):], "counting": plan.counting}))

asyncio.run(main())
"""


@pytest.mark.parametrize("name", ["rust", "python"])
def test_the_first_plan_builds_the_tables_once_on_a_worker_thread(name: str) -> None:
    done = run_without((), PROBE, env={"CTXENGINE_BACKEND": name})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["counting"] == "o200k_base"
    assert result["calls"] == [["o200k_base", False]]
    assert result["reader"] == [["o200k_base", False]]


def test_load_encoding_is_the_same_contract_on_both_backends(backend: str) -> None:
    from ctxengine.core import backends
    from ctxengine.errors import ArgumentError, EstimatorError

    module = backends.active()
    assert module.load_encoding("cl100k_base") is None
    with pytest.raises(EstimatorError, match="unknown encoding"):
        module.load_encoding("p50k_base")
    with pytest.raises(ArgumentError, match="load_encoding"):
        module.load_encoding(7)
