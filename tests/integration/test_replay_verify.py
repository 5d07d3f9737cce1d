"""The determinism check on real stores (issue 42, acceptance 1; ADR 0024).

* The fifty-turn demo's session, and one recorded through the session API, read back
  by a store opened anew, verifies: every request's prefix and body hash reproduced, on
  both backends, on SQLite and on PostgreSQL; a policy change names the first differing
  region.
* The golden sessions, written before format 6, have no records: every request the log
  shows is reported as not reproducible, with the reason, and the check never raises.
* The golden fifty-turn session's recorded requests (``tests/golden/requests.json.xz``,
  with their inputs) rebuild through ``ctxengine.replay.rebuild``, the check's one
  rebuild path, to the recorded provider payloads.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.cli.demo import DemoConfig, run_demo
from ctxengine.core.budget import BudgetPolicy
from ctxengine.replay import RequestInputs, rebuild, verify_session
from ctxengine.replay.verify import NO_RECORD
from enginekit import SMALL, Driver, engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
import goldenkit

STORES = ("sqlite", "postgres")


@pytest.mark.parametrize("kind", STORES)
async def test_a_recorded_session_verifies_on_a_reopened_store(
    kind: str, backend: str, store_case_factory: Any
) -> None:
    case = store_case_factory(kind)
    store = await case.open()
    driver = Driver("openai_chat", output_bytes=8000)
    async with engine(store, model=SMALL) as agent:
        await driver.turns(agent.session("s"), 1, 10)
    reopened = await case.open()  # nothing of the writer's process is reused
    try:
        types = [e.type for e in await reopened.events.read("s")]
        assert "context.compacted" in types
        check = await verify_session(reopened, "s")
        assert check.ok, [r for r in check.requests if not r.ok][:3]
        assert check.reproduced == len(driver.bodies) == types.count("context.request.recorded")
        changed = await verify_session(reopened, "s", policy=BudgetPolicy(item_max_ratio=0.001))
        first = next(r for r in changed.requests if not r.ok)
        assert first.first_differing_region == "current_turn"
    finally:
        await case.close_all()


@pytest.mark.parametrize("kind", STORES)
async def test_the_fifty_turn_demo_verifies(kind: str, backend: str, store_case_factory: Any) -> None:
    # Compactions, the clock crossing midnight, working-state updates, questions, a refusal.
    case = store_case_factory(kind)
    await run_demo(DemoConfig(store_url=case.url, session_id="demo"))
    store = await case.open()
    try:
        check = await verify_session(store, "demo")
        assert check.ok and check.reproduced == len(check.requests) == 140
    finally:
        await case.close_all()


async def test_sessions_from_before_format_6_say_what_cannot_be_reproduced(golden: tuple[str, Any]) -> None:
    _, store = golden
    records = goldenkit.load_json("requests.json.xz")
    for sid in goldenkit.SESSIONS:
        check = await verify_session(store, sid)
        recorded = [r for r in records if r["session_id"] == sid]
        assert len(check.requests) == len(recorded) > 0, sid
        assert not check.ok and check.reproduced == 0
        assert all(r.reason == NO_RECORD and not r.ok for r in check.requests)
        assert [r.index for r in check.requests] == list(range(len(recorded)))
    demo = await verify_session(store, "golden-demo")
    want = [(r["run"]["run_id"], r["run"]["step"]) for r in records if r["session_id"] == "golden-demo"]
    assert [(r.run_id, r.step) for r in demo.requests] == want


async def test_the_golden_session_replays_to_its_recorded_payloads(golden: tuple[str, Any]) -> None:
    _, store = golden
    plan = await ce.ContextPlanner(store).current("golden-demo")
    assert plan is not None
    records = [r for r in goldenkit.load_json("requests.json.xz") if r["session_id"] == "golden-demo"]
    assert len(records) == 140
    for record in records:
        assert (plan.epoch, plan.prefix_sha256) == (record["plan_epoch"], record["plan_prefix_sha256"])
        inputs = RequestInputs(
            run=ce.RunContext.from_dict(record["run"]),
            checkpoint=ce.Checkpoint.from_dict(record["checkpoint"]),
            principal=ce.Principal.from_dict(record["principal"]),
            plan=plan,
            clock=datetime.fromisoformat(record["clock"]),
            estimator=ce.TokenEstimator.restore(record["estimator"]),
            policy=BudgetPolicy(),  # what the golden builds used (the planner's default)
            surface=record["surface"],
        )
        request = rebuild(store, inputs).request
        model = ce.ResolvedModel.from_dict(record["model"]).model
        where = f"{record['run']['run_id']} step {record['run']['step']}"
        assert dict(request.metadata) == record["metadata"], where
        wire = {name: render(request, model=model) for name, render in goldenkit.WIRE.items()}
        assert wire == record["wire"], where
        assert goldenkit.sha(request.canonical_bytes()) == record["request_sha256"], where
