"""Golden logs (issue 10): stores written by an earlier build read, plan and rebuild the same.

The fixtures in ``tests/golden/`` were written once, by the code of the
commit that added them (``tests/golden/generate.py``), and are never
regenerated. Each test opens a fresh copy of a fixture with today's code, on
both backends, on SQLite and on PostgreSQL (restored from a plain SQL dump),
and checks:

* everything reads, and reads as it did: every event (type, payload digest,
  key, actor, visibility, time), the history projection, the latest
  checkpoint of every run (full and delta rows), the carried working state
  for three principals, every phase instance's state;
* the plan is the same epoch with the same prefix hash;
* every recorded request rebuilds to byte-identical provider payloads (from
  its recorded inputs, with the estimator restored from its snapshot), and
  every phase projection compiles to identical bytes and manifests.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ctxengine as ce

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
import goldenkit


async def test_everything_reads_as_recorded(golden: tuple[str, Any]) -> None:
    kind, store = golden
    want = goldenkit.expected(kind)
    got = await goldenkit.read_back(store, want["runs"])
    for sid in goldenkit.SESSIONS:
        assert got["sessions"][sid] == want["sessions"][sid], sid
    for instance in goldenkit.PHASE_INSTANCES:
        assert got["phases"][instance] == want["phases"][instance], instance


async def test_plans_keep_their_epoch_and_prefix(golden: tuple[str, Any]) -> None:
    kind, store = golden
    want = goldenkit.expected(kind)["sessions"]
    assert {sid: want[sid]["plan"]["epoch"] for sid in goldenkit.SESSIONS} == {
        "golden-demo": 1,
        "golden-openai": 1,
        "golden-extra": 3,
    }
    for sid in goldenkit.SESSIONS:
        plan = await ce.ContextPlanner(store).current(sid)
        assert plan is not None
        assert (plan.epoch, plan.prefix_sha256) == (
            want[sid]["plan"]["epoch"],
            want[sid]["plan"]["prefix_sha256"],
        )


async def test_every_request_rebuilds_byte_identical(golden: tuple[str, Any]) -> None:
    _, store = golden
    records = goldenkit.load_json("requests.json.xz")
    assert len(records) == 204
    plans: dict[str, ce.ContextPlan] = {}
    for record in records:
        sid = record["session_id"]
        if sid not in plans:
            plan = await ce.ContextPlanner(store).current(sid)
            assert plan is not None
            plans[sid] = plan
        plan = plans[sid]
        assert (plan.epoch, plan.prefix_sha256) == (record["plan_epoch"], record["plan_prefix_sha256"])
        rebuilt = goldenkit.rebuild_request(record, plan, store)
        where = f"{sid} run {record['run']['run_id']} step {record['run']['step']}"
        assert rebuilt["metadata"] == record["metadata"], where
        assert rebuilt["wire"] == record["wire"], where
        assert rebuilt["request_sha256"] == record["request_sha256"], where
