"""``ctxengine bench --cache`` (issue 39): the workloads' accounting holds together, the
baseline is skipped when LangChain is absent, and the command writes its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxengine.cli import bench as bench_module
from ctxengine.cli import main
from ctxengine.cli.bench_cache import BASELINE, CacheSettings, cache_markdown, run_cache

QUICK = CacheSettings.for_run(True)


@pytest.fixture(scope="module")
def results() -> Any:
    return run_cache(QUICK)


def test_every_request_point_is_built_or_an_overflow(results: Any) -> None:
    data = results.to_dict()
    long, session = data["workloads"]["long run"], data["workloads"]["session"]
    # One point before each step and one after the last; a request before every answer and
    # one after every tool result.
    assert long["request_points"] == QUICK.long_steps + 1
    assert session["request_points"] == QUICK.turns + QUICK.turns // QUICK.tool_every
    for w in (long, session):
        assert w["built"] + w["context_overflow"] == w["request_points"]
        assert sum(w["overflow_classes"].values()) == w["context_overflow"]
        assert w["invalid_wire_pairs"] == 0
        for name in ("ctxengine/openai_chat", "ctxengine/anthropic"):
            assert w["sides"][name]["requests"] == w["built"]
    assert session["context_overflow"] == 0


def test_each_figure_is_under_its_ceiling(results: Any) -> None:
    for w in results.workloads:
        for side in w.sides.values():
            assert 0 <= side.openai <= side.ceiling <= side.tokens
            assert 0 <= side.vllm <= side.ceiling and 0 <= side.anthropic_read <= side.ceiling
            assert side.anthropic_read + side.anthropic_write <= side.tokens
            d = side.to_dict(results.prices)
            for rule, fraction in d["cached_fraction"].items():
                assert fraction <= d["cached_fraction"]["ceiling"], rule
            assert d["effective_cost"]["uncached"] == side.tokens


def test_the_baseline_trims_to_the_history_budget_and_sees_every_point(results: Any) -> None:
    pytest.importorskip("langchain_core")
    for w in results.workloads:
        baseline = w.sides[BASELINE]
        assert baseline.requests == w.points
        assert w.history_budget > 0
        # tools + system + at most the history budget, per request
        assert baseline.tokens <= baseline.requests * (w.history_budget + 1_000)


def test_without_langchain_the_baseline_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_module, "langchain_version", lambda: None)
    small = CacheSettings(long_steps=3, big_steps=(), turns=3, big_bytes=1)
    results = run_cache(small)
    assert results.langchain is None
    assert all(BASELINE not in w.sides for w in results.workloads)
    assert "no baseline" in "\n".join(cache_markdown(results))


def test_the_command_writes_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxengine.cli import bench_cache

    small = CacheSettings(long_steps=2, big_steps=(), turns=3, big_bytes=1)
    monkeypatch.setattr(
        bench_cache.CacheSettings, "for_run", classmethod(lambda cls, quick, peers=True: small)
    )
    assert main(["bench", "--cache", "--quick", "--out", str(tmp_path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "cache.json").read_text())
    # The long run again on a 128k window: the rendering overhead (issue 39, acceptance 4).
    assert set(printed["workloads"]) == {"long run", "session", "long run 128k"}
    assert printed["acceptance"] and all("met" in row for row in printed["acceptance"])
    assert "| ctxengine/openai_chat |" in (tmp_path / "cache.md").read_text()
