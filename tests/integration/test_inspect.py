"""Issue 7, acceptance 4: ``ctxengine inspect`` on the demo's database shows one epoch and its
compactions, the plan, the working state and the event counts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ctxengine.cli import main
from ctxengine.cli.demo import DemoConfig, DemoRecord, run_demo
from ctxengine.cli.demo_checks import check
from ctxengine.cli.fakemodel import MEMORY_SNAPSHOT, TOOLS

SESSION = "demo-inspect"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, DemoRecord]:
    url = f"sqlite:///{tmp_path_factory.mktemp('inspect') / 'demo.db'}"
    record = asyncio.run(run_demo(DemoConfig(store_url=url, session_id=SESSION)))
    assert not [c for c in check(record) if c.failed]
    return url, record


def test_inspect_json_matches_the_demo(
    demo_db: tuple[str, DemoRecord], capsys: pytest.CaptureFixture[str]
) -> None:
    url, record = demo_db
    assert main(["inspect", "--store", url, SESSION, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)

    assert [(e["epoch"], e["reason"]) for e in data["epochs"]] == [(1, "initial")]
    plan = data["plan"]
    assert plan["epoch"] == 1 and plan["model_id"] == record.model.model_id
    assert plan["prefix_sha256"] == record.requests[0].plan_prefix_sha256
    assert plan["tools"] == [t.name for t in TOOLS] and plan["memory_snapshot"] == MEMORY_SNAPSHOT
    compactions = data["compactions"]
    assert compactions["count"] == record.logged_compactions >= 2
    # Runs seed from the session's compaction carry (ADR 0011), so depth re-bases per run.
    assert compactions["max_depth"] == record.logged_max_depth >= 1
    assert data["event_counts"]["context.carry.recorded"] == compactions["count"]
    replaced = [c["replaced_through_sequence"] for c in compactions["items"]]
    assert all(r > 0 for r in replaced) and replaced == sorted(replaced)
    counts = data["event_counts"]
    assert counts["context.plan.created"] == 1 and "context.epoch.rotated" not in counts
    assert counts["context.compacted"] == compactions["count"]
    assert counts["run.checkpoint.seeded"] == data["runs"] == 50
    assert data["events"] == sum(counts.values()) == data["last_sequence"]
    state = data["working_state"]
    assert state["objective"] == "Recommend one cloud vendor for the Acme data platform"
    assert [c["text"] for c in state["constraints"]] == [
        "Total cost under 40k EUR per year",
        "Data must stay in the EU",
    ]


def test_inspect_prints_the_tables(
    demo_db: tuple[str, DemoRecord], capsys: pytest.CaptureFixture[str]
) -> None:
    url, record = demo_db
    assert main(["inspect", "--store", url, SESSION]) == 0
    out = capsys.readouterr().out
    assert "Epochs (1)" in out and "initial" in out
    assert f"Compactions ({record.logged_compactions}, max depth {record.logged_max_depth})" in out
    assert "Working state" in out
    assert any(f"[{status}]" in out for status in ("open", "in_progress", "completed"))  # escaped, not markup
    assert "context.working_state.updated" in out


def test_inspect_unknown_session_and_bad_store(
    demo_db: tuple[str, DemoRecord], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url, _ = demo_db
    assert main(["inspect", "--store", url, "no-such-session"]) == 2
    assert "SessionNotFound" in capsys.readouterr().err
    assert main(["inspect", "--store", "ftp://nowhere", SESSION]) == 2
    assert "unknown store URL scheme" in capsys.readouterr().err
