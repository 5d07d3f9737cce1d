"""Issue 41, acceptance 4: a run started in one process, recorded into, and continued in a fresh
process from its run id alone, on SQLite and PostgreSQL, sends the same requests (bytes) as an
uninterrupted run. The first process dies mid-turn (``os._exit``: no close, its lease still
held); the second knows nothing but the run id. Compactions happen before and after."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from processkit import run_worker
from storekit import StoreCase

WORKER = Path(__file__).with_name("session_worker.py")


def worker(url: str, *args: str) -> dict[str, Any]:
    return run_worker(WORKER, url, *args)


@pytest.mark.parametrize("stop", ["built", "answered-one"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_run_continued_in_a_fresh_process_sends_the_same_requests(
    store_case_factory: Callable[[str], StoreCase], kind: str, stop: str
) -> None:
    uninterrupted = worker(store_case_factory(kind).url, "whole")
    whole = uninterrupted["bodies"]
    url = store_case_factory(kind).url
    first = worker(url, "until", stop)
    second = worker(url, "resume", first["run_id"])
    assert second["session_id"] == "s1" and second["run_id"] == first["run_id"]
    sent = first["bodies"] + second["bodies"]
    if stop == "built":  # built before the process died, never answered: built again, the same
        assert second["bodies"][0] == first["bodies"][-1]
        sent = first["bodies"][:-1] + second["bodies"]
    assert len(sent) == len(whole) > 30
    assert sent == whole
    assert 0 < first["compactions"] < second["compactions"] == uninterrupted["compactions"]
