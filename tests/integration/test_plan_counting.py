"""Plans pin their counting method (ADR 0012): a stored plan without one keeps counting
with the byte heuristic and keeps its bytes; a different method is a new epoch; usage
reports reconcile through the plan's key and are recorded for ``inspect``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import ctxengine as ce
from ctxengine.assembly.builder import ContextBuilder
from ctxengine.model import Checkpoint
from ctxengine.plan import EPOCH_ROTATED, PLAN_CREATED, ContextPlan, ContextPlanner
from ctxengine.runtime.usage import USAGE_REPORTED, report_usage
from ctxengine.stores.events import NewEvent, Visibility
from ctxengine.stores.formats import WritePolicy

OPENAI = ce.ResolvedModel("openai", "gpt-4o-mini", 128_000, 16_384, 8_192)
ANTHROPIC = ce.ResolvedModel("anthropic", "claude-y", 200_000, 16_384, 8_192)
AGENT = ce.AgentSpec("agent-1", "v1", "You help with reports.")
ALICE = ce.Principal("alice", "acme", frozenset({"files.read"}))
TOOLS = (ce.ToolSpec("read_file", "Read a file.", {"type": "object"}),)
CLOCK = ce.FixedClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))


def planner(store: Any, estimator: Any = None) -> ContextPlanner:
    return ContextPlanner(store, estimator=estimator or ce.TokenEstimator(), clock=CLOCK)


async def store_old_plan(store: Any, model: ce.ResolvedModel) -> ContextPlan:
    """A plan as a build before ADR 0012 wrote it: no ``counting`` key."""
    drafted = planner(None).draft("s1", 1, AGENT, model, TOOLS, policy_version="pv1")
    data = drafted.to_dict()
    del data["counting"]
    old = ContextPlan.from_dict(data)
    await store.events.append(
        NewEvent(
            session_id="s1",
            type=PLAN_CREATED,
            payload={"plan": data, "reason": "initial"},
            derivation_key="context.plan:s1:1",
            visibility=Visibility.session(),
        )
    )
    return old


async def plan_reasons(store: Any) -> list[str]:
    events = await store.events.read("s1", types={PLAN_CREATED, EPOCH_ROTATED})
    return [str(e.payload["reason"]) for e in events]


def test_new_plans_record_their_method_and_old_ones_keep_their_bytes() -> None:
    exact = planner(None).draft("s1", 1, AGENT, OPENAI, TOOLS, policy_version="pv1")
    assert exact.counting == "o200k_base" and exact.counting_key == "openai:gpt-4o-mini#o200k_base"
    assert exact.to_dict()["counting"] == "o200k_base"
    heuristic = planner(None).draft("s1", 1, AGENT, ANTHROPIC, TOOLS, policy_version="pv1")
    assert heuristic.counting == "heuristic"
    data = exact.to_dict()
    del data["counting"]
    old = ContextPlan.from_dict(data)
    assert old.counting is None and old.counting_method == "heuristic"
    assert old.to_dict() == data  # a stored plan without the key writes no key
    assert old.counting_key == "openai:gpt-4o-mini#heuristic"
    assert old.identity != exact.identity and old.identity[:4] == exact.identity[:4]


async def test_an_old_openai_plan_rotates_once_for_its_method(store: Any) -> None:
    await store_old_plan(store, OPENAI)
    plan = await planner(store).plan("s1", AGENT, ALICE, OPENAI, TOOLS, policy_version="pv1")
    assert (plan.epoch, plan.reason, plan.counting) == (2, "counting_method_changed", "o200k_base")
    again = await planner(store).plan("s1", AGENT, ALICE, OPENAI, TOOLS, policy_version="pv1")
    assert again == plan
    assert await plan_reasons(store) == ["initial", "counting_method_changed"]


async def test_an_old_heuristic_plan_is_the_same_plan(store: Any) -> None:
    old = await store_old_plan(store, ANTHROPIC)
    plan = await planner(store).plan("s1", AGENT, ALICE, ANTHROPIC, TOOLS, policy_version="pv1")
    assert plan == old and plan.counting is None
    assert await plan_reasons(store) == ["initial"]


async def test_a_changed_table_is_a_new_epoch(store: Any) -> None:
    await planner(store).plan("s1", AGENT, ALICE, OPENAI, TOOLS, policy_version="pv1")
    by_bytes = ce.TokenEstimator(encodings={"openai:gpt-4o-mini": "heuristic"})
    plan = await planner(store, by_bytes).plan("s1", AGENT, ALICE, OPENAI, TOOLS, policy_version="pv1")
    assert (plan.epoch, plan.reason, plan.counting) == (2, "counting_method_changed", "heuristic")


def build(plan: ContextPlan, estimator: Any) -> ce.Assembly:
    items = [ce.UserMessage("Summarize the quarterly numbers, please. " * 20, seq=1)]
    builder = ContextBuilder(planner(None, estimator), clock=CLOCK)
    run = ce.RunContext("r1", "s1", 1)
    return builder.assemble(run, Checkpoint("r1", conversation=tuple(items)), AGENT, ALICE, plan=plan)


def test_an_old_plan_counts_with_the_heuristic_and_names_no_method(backend: str) -> None:
    drafted = planner(None).draft("s1", 1, AGENT, OPENAI, TOOLS, policy_version="pv1")
    data = drafted.to_dict()
    del data["counting"]
    old = ContextPlan.from_dict(data)
    old_request = build(old, ce.TokenEstimator())
    # the numbers an estimator that counts the model with the heuristic gives
    by_bytes = build(old, ce.TokenEstimator(encodings={"openai:gpt-4o-mini": "heuristic"}))
    assert old_request.request.metadata == by_bytes.request.metadata
    assert "counting" not in old_request.request.metadata
    assert "counting" not in old_request.pressure.to_dict()
    new = build(drafted, ce.TokenEstimator())
    assert new.request.metadata["counting"] == "o200k_base" == new.pressure.to_dict()["counting"]
    assert new.request.metadata["body_tokens"] < old_request.request.metadata["body_tokens"]


async def test_usage_reconciles_through_the_plan_and_is_recorded(store: Any, backend: str) -> None:
    estimator = ce.TokenEstimator()
    plan = await planner(store, estimator).plan("s1", AGENT, ALICE, ANTHROPIC, TOOLS, policy_version="pv1")
    request = build(plan, estimator).request
    run = ce.RunContext("r1", "s1", 1)
    estimated = int(request.metadata["total_tokens"])
    await report_usage(store, estimator, run, request, estimated // 2)
    await report_usage(store, estimator, run, request, estimated // 2)  # a retried step: once
    events = await store.events.read("s1", types={USAGE_REPORTED})
    assert [e.payload for e in events] == [
        {
            "run_id": "r1",
            "step": 0,
            "epoch": 1,
            "model_id": "anthropic:claude-y",
            "counting": "heuristic",
            "estimated": estimated,
            "actual": estimated // 2,
        }
    ]
    assert estimator.error_ratio(plan.counting_key) == (2 * (estimated // 2)) / (2 * estimated)


async def test_a_store_pinned_to_format_1_reconciles_and_records_nothing(backend: str) -> None:
    store = await ce.open_store("memory://", write_policy=WritePolicy(max_version=1))
    estimator = ce.TokenEstimator()
    plan = planner(None, estimator).draft("s1", 1, AGENT, OPENAI, TOOLS, policy_version="pv1")
    request = build(plan, estimator).request
    await report_usage(store, estimator, ce.RunContext("r1", "s1", 1), request, 10)
    assert await store.events.read("s1") == []
    assert estimator.snapshot()["corrections"] == {
        "openai:gpt-4o-mini#o200k_base": [request.metadata["total_tokens"], 10]
    }
