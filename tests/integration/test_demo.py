"""Issue 7, acceptance 1-2: the fifty-turn demo session as a test.

It runs through the real ``ContextLoop`` on both backends and both durable
stores (a SQLite file and PostgreSQL), and every invariant must hold; then
the checker is shown to catch each invariant broken on its own, on a
recorded session and through the engine itself (a builder that drops a tool
result, a builder that lets the date into the prefix).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from ctxengine.assembly.builder import Assembly, ContextBuilder
from ctxengine.assembly.request import RenderedItem
from ctxengine.cli import main
from ctxengine.cli.demo import DemoConfig, DemoRecord, count_orphans, run_demo
from ctxengine.cli.demo_checks import check, report_dict
from ctxengine.core.canonical import payload_hash
from ctxengine.plan import ContextPlan
from storekit import StoreCase

SESSION = "demo-test"
SPEC_KEYS = {
    "turns",
    "epochs",
    "prefix_hashes_per_epoch",
    "compactions",
    "max_depth",
    "max_total_tokens",
    "capacity_tokens",
    "orphaned_pairs",
}
# Request bytes per (turn, step), from whichever combination ran first: every
# backend and store must send exactly the same requests.
_FIRST_RUN: dict[str, list[tuple[int, int, str, int]]] = {}


def failed(record: DemoRecord) -> set[str]:
    return {c.name for c in check(record) if c.failed}


@pytest.fixture(params=["sqlite", "postgres"])
def durable(request: pytest.FixtureRequest, store_case_factory: Callable[[str], StoreCase]) -> StoreCase:
    kind: str = request.param
    return store_case_factory(kind)


async def test_fifty_turns_hold_every_invariant(durable: StoreCase, backend: str) -> None:
    record = await run_demo(DemoConfig(store_url=durable.url, session_id=SESSION))

    checks = check(record)
    assert [c.name for c in checks if c.failed] == [], [c for c in checks if c.failed]
    assert all(c.reached for c in checks)  # fifty turns reach every scripted event
    report = report_dict(record, checks)
    assert SPEC_KEYS <= report.keys()
    assert report["turns"] == 50 and report["backend"] == backend and report["ok"]
    assert report["epochs"] == 1 and report["prefix_hashes_per_epoch"] == {"1": 1}
    assert report["compactions"] >= 2 and 1 <= report["max_depth"] <= 2
    assert report["max_total_tokens"] <= report["capacity_tokens"] < report["context_window"]
    assert report["orphaned_pairs"] == 0 and report["wire_failures"] == 0
    assert len(report["dates"]) == 2  # the clock crossed midnight
    assert len(report["refusals"]) == 1
    figures = [(r.turn, r.step, r.body_sha256, r.total_tokens) for r in record.requests]
    assert _FIRST_RUN.setdefault("figures", figures) == figures


def test_cli_json_report_and_exit_code(
    store_case_factory: Callable[[str], StoreCase], capsys: pytest.CaptureFixture[str]
) -> None:
    url = store_case_factory("sqlite").url
    code = main(["demo", "--store", url, "--session", SESSION, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"]
    assert SPEC_KEYS <= report.keys()
    assert report["turns"] == 50 and report["store"] == url and report["session_id"] == SESSION


# -- mutations: each invariant broken on its own is reported, and only it ------------------------


@pytest.fixture(scope="module")
def recorded() -> DemoRecord:
    """One good fifty-turn session (memory store), recorded once for the mutations below."""
    record = asyncio.run(run_demo(DemoConfig(store_url="memory://", session_id=SESSION)))
    assert failed(record) == set()
    return record


def _request(record: DemoRecord, index: int, **changes: Any) -> None:
    record.requests[index] = replace(record.requests[index], **changes)


def _compacted_once(record: DemoRecord) -> None:
    for t in record.turns:
        t.compactions = 0
    record.turns[-1].compactions = 1
    record.logged_compactions = 1


MUTATIONS: dict[str, tuple[str, Callable[[DemoRecord], None]]] = {
    "step failed": ("session completed", lambda r: setattr(r, "error", "turn 9: ContextOverflow: ...")),
    "prefix changed mid-epoch": (
        "one prefix hash per epoch",
        lambda r: _request(r, 60, prefix_sha256="0" * 64),
    ),
    "epoch rotated": (
        "one epoch (nothing in the script rotates the plan)",
        lambda r: setattr(r, "epochs", 2),
    ),
    "request over its window": (
        "every request inside its window",
        lambda r: _request(r, 70, total_tokens=r.requests[70].capacity_tokens + 1),
    ),
    "orphaned pair in the body": (
        "no orphaned tool pair (body and three wire formats)",
        lambda r: _request(r, 80, orphaned_pairs=1),
    ),
    "wire format rejects a pair": (
        "no orphaned tool pair (body and three wire formats)",
        lambda r: _request(r, 80, wire_failures=("anthropic_messages: tool_use never answered",)),
    ),
    "compaction not logged": (
        "compactions logged as they happened, depth <= 2",
        lambda r: setattr(r, "logged_compactions", r.logged_compactions - 1),
    ),
    "depth past 2": (
        "compactions logged as they happened, depth <= 2",
        lambda r: _request(r, 90, summary_depth=3),
    ),
    "compacted only once": ("history compacted repeatedly", _compacted_once),
    "rebuild differs": (
        "builds are deterministic (a rebuild gives the same request)",
        lambda r: _request(r, 10, rebuilt_identical=False),
    ),
    "user message yielded": (
        "current user message in every request",
        lambda r: _request(r, 20, has_current_user=False),
    ),
    "stale date": (
        "runtime metadata follows the clock (body, not prefix)",
        lambda r: _request(r, 100, date="2026-03-14"),
    ),
    "revoked scope not refused": (
        "revoked scope refused at call time, tools unchanged",
        lambda r: setattr(r, "refusals", []),
    ),
    "tool removed from the prefix": (
        "revoked scope refused at call time, tools unchanged",
        lambda r: _request(r, 110, tool_names=("search",)),
    ),
    "memory snapshot rewritten": (
        "memory snapshot pinned, corrections in every later body",
        lambda r: r.memory_snapshots.add("- Dana's timezone is Europe/Lisbon."),
    ),
    "correction yielded": (
        "memory snapshot pinned, corrections in every later body",
        lambda r: _request(r, 120, has_correction=False),
    ),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_broken_invariant_is_reported_alone(recorded: DemoRecord, mutation: str) -> None:
    expected, mutate = MUTATIONS[mutation]
    broken = copy.deepcopy(recorded)
    mutate(broken)
    assert failed(broken) == {expected}
    report = report_dict(broken, check(broken))
    assert not report["ok"] and report["violations"] == [expected]


def test_count_orphans() -> None:
    call = RenderedItem("current_turn", "assistant", call_id="c1", name="search", arguments={})
    result = RenderedItem("current_turn", "tool", text="ok", call_id="c1")
    stray = RenderedItem("current_turn", "tool", text="?", call_id="c9")
    assert count_orphans([call, result]) == 0
    assert count_orphans([call]) == 1
    assert count_orphans([result, call]) == 2
    assert count_orphans([call, result, stray]) == 1


# -- mutations through the engine: the demo itself catches a broken builder --------------------


def _drop_a_tool_result(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ContextBuilder.assemble

    def assemble(self: ContextBuilder, *args: Any, **kwargs: Any) -> Assembly:
        assembly = real(self, *args, **kwargs)
        body = assembly.request.body
        results = [i for i, item in enumerate(body) if item.is_tool_result]
        if not results:
            return assembly
        kept = body[: results[-1]] + body[results[-1] + 1 :]
        return replace(assembly, request=replace(assembly.request, body=kept))

    monkeypatch.setattr(ContextBuilder, "assemble", assemble)


def test_a_builder_that_drops_a_tool_result_fails_the_demo(
    monkeypatch: pytest.MonkeyPatch,
    store_case_factory: Callable[[str], StoreCase],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _drop_a_tool_result(monkeypatch)
    url = store_case_factory("sqlite").url
    code = main(["demo", "--store", url, "--turns", "4", "--session", SESSION, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and not report["ok"]
    assert report["orphaned_pairs"] > 0 and report["wire_failures"] > 0
    assert report["violations"] == ["no orphaned tool pair (body and three wire formats)"]


def test_a_builder_that_puts_the_date_in_the_prefix_fails_the_demo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = ContextBuilder._prefix

    def dated_prefix(self: ContextBuilder, plan: ContextPlan) -> tuple[tuple[RenderedItem, ...], str]:
        items, digest = real(self, plan)
        return items, payload_hash([digest, self.clock.now().date().isoformat()])

    monkeypatch.setattr(ContextBuilder, "_prefix", dated_prefix)
    # Midnight passes on turn 22.
    record = asyncio.run(run_demo(DemoConfig(store_url="memory://", session_id=SESSION, turns=23)))
    assert failed(record) == {"one prefix hash per epoch"}
    assert report_dict(record, check(record))["prefix_hashes_per_epoch"] == {"1": 2}
