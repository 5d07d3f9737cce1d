"""Issue 43, acceptance 2: a session compacted with a scripted summarizer, rebuilt in a fresh
process with no summarizer (a router that fails if called), gives byte-identical requests,
on SQLite and PostgreSQL: the run picked up from its checkpoint, and its version 1 rebuilt
from the log and compacted again, which adopts the recorded summary instead of a call."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from processkit import run_worker
from storekit import StoreCase

WORKER = Path(__file__).with_name("compaction_worker.py")


def worker(url: str, *args: str) -> dict[str, Any]:
    return run_worker(WORKER, url, *args)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_compacted_session_rebuilds_in_a_fresh_process_without_a_model(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    url = store_case_factory(kind).url
    first = worker(url, "first")
    assert first["calls"] >= 1
    body = json.loads(first["body"])
    summary = next(m["content"] for m in body["messages"] if "Summary of earlier" in (m["content"] or ""))
    assert 'source="model_summary"' in summary and "the user asked for weather" in summary

    second = worker(url, "rebuild", first["run_id"])
    assert second["resumed"] == first["body"]
    assert second["replayed"] == first["body"]
    assert second["compactions"] == 1  # the rebuild wrote nothing
