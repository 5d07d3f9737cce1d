"""Issue 41, acceptance 2: the Agents SDK (the real package, a scripted ``Model``) runs 50 turns
with tool calls through ``Runner.run(..., session=ContextSession(...), run_config=...)`` on
SQLite and PostgreSQL, turns 1-25 in one process and 26-50 in a fresh one: every model input
is pair-safe and within the budget, and the budget binds (pointers, the cut, the summary)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from processkit import run_worker
from storekit import StoreCase

HERE = Path(__file__).resolve().parent
WORKER = HERE / "agents_worker.py"


def worker(url: str, first: int, last: int) -> dict[str, Any]:
    return run_worker(WORKER, url, str(first), str(last))


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_fifty_turns_of_the_agents_sdk_in_two_processes_stay_pair_safe_and_in_budget(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    url = store_case_factory(kind).url
    first = worker(url, 1, 25)
    second = worker(url, 26, 50)
    for run in (first, second):
        assert run["problems"] == []
        assert max(run["tokens"]) <= run["capacity"], (max(run["tokens"]), run["capacity"])
        assert run["inputs"] == 50  # a tool call and an answer a turn
    # The second process picked the session up from the store alone, and the budget binds:
    # the log holds all 50 turns, the requests a fitted part with a summary of the rest.
    assert second["logged"] > first["logged"] > 100
    assert second["summarized"] > 0
    assert "Question 1:" not in second["first_user"]
