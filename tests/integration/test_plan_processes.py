"""Plans across processes (issue 3, acceptance 3 and 4).

Separate interpreters share only the store: a fresh process reconstructs the
written plan from the log, and four processes planning one new session at
once write exactly one ``context.plan.created`` event and agree on the plan.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ctxengine
from storekit import StoreCase

PLANNER = """
import asyncio, json, os, sys, time
import ctxengine as ce
from ctxengine.stores import open_store

url, session, go, mode = sys.argv[1:5]

async def main() -> None:
    store = await open_store(url)
    while not os.path.exists(go):
        time.sleep(0.005)
    planner = ce.ContextPlanner(store, estimator=ce.TokenEstimator())  # real clock: created_at differs
    if mode == "plan":
        model = ce.ResolvedModel("openai", "gpt-x", 128000, 16384, 8192)
        agent = ce.AgentSpec("agent-1", "v1", "You help with reports.")
        principal = ce.Principal("alice", "acme", frozenset({"files.read"}))
        tools = (ce.ToolSpec("read_file", "Read a file.", {"type": "object"}),)
        plan = await planner.plan(session, agent, principal, model, tools, policy_version="pv1")
    else:
        plan = await planner.current(session)
    print(json.dumps(plan.to_dict(), sort_keys=True), flush=True)
    await store.close()

asyncio.run(main())
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(next(iter(ctxengine.__path__))).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def _spawn(case: StoreCase, session: str, go: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", PLANNER, case.url, session, str(go), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def _collect(procs: list[subprocess.Popen[str]]) -> list[dict[str, object]]:
    plans = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        plans.append(json.loads(out))
    return plans


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_four_processes_planning_one_new_session_write_one_plan(
    store_case_factory: Callable[[str], StoreCase], tmp_path: Path, kind: str
) -> None:
    case = store_case_factory(kind)
    store = await case.open()
    go = tmp_path / "go"
    procs = [_spawn(case, "shared", go, "plan") for _ in range(4)]
    time.sleep(0.5)
    go.touch()
    plans = _collect(procs)
    assert all(plan == plans[0] for plan in plans)
    events = await store.events.read("shared")
    assert [e.type for e in events] == ["context.plan.created"]
    assert events[0].payload["plan"] == plans[0]

    # A fresh process reconstructs current() from the log alone.
    (tmp_path / "go2").touch()
    (rebuilt,) = _collect([_spawn(case, "shared", tmp_path / "go2", "current")])
    assert rebuilt == plans[0]
    await case.close_all()
    await store.close()
