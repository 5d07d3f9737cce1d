"""Issue 7, acceptance 3: ``ctxengine bench`` writes the table and the plot (a tiny smoke run)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ctxengine.cli import main
from ctxengine.cli.bench import Settings, Timing, langchain_version, time_call, to_langchain
from ctxengine.cli.bench_report import slope
from ctxengine.cli.synthetic import synthetic_session

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def test_bench_smoke_writes_table_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench-out"
    assert main(["bench", "--sizes", "100,300", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out

    table = (out / "bench.md").read_text()
    assert printed.startswith(table)  # the Markdown printed is the Markdown written
    assert "### Equal windows" in printed
    equal = json.loads((out / "runtime.json").read_text())["equal_windows"]
    assert (equal["early_turn"], equal["late_turn"]) == (11, 41) and equal["ratio"] > 0
    assert equal["late_events"] > equal["early_events"] > 0
    assert "## SPEC section 11" in table and "## Growth over history length" in table
    assert "## Token counting" in table and "counts already held" in table
    for row in ("`payload_hash`", "`select_history`", "`assemble`, fifty-turn session", "many sessions"):
        assert row in table
    data = json.loads((out / "bench.json").read_text())
    assert data["quick"] and data["sizes"] == [100, 300]
    impls = {"rust", "python"} & set(data["implementations"])
    assert impls, "at least one backend ran"
    for name in impls:
        for curve in ("cut warm", "cut cold", "assemble"):
            points = data["growth"][f"{name} {curve}"]
            assert set(points) == {"100", "300"} and all(p["median_ms"] > 0 for p in points.values())
        assert data["assembles_per_s"][name] > 0
    if langchain_version() is not None:
        assert "langchain" in data["implementations"] and "trim_messages" in table
    if HAS_MATPLOTLIB:
        assert (out / "growth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_without_peers_and_bad_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    assert (
        main(["bench", "--sizes", "64", "--quick", "--no-peers", "--no-runtime", "--out", str(out), "--json"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert "langchain" not in data["implementations"]
    with pytest.raises(SystemExit):
        main(["bench", "--sizes", "ten"])


def test_time_call_and_slope() -> None:
    calls: list[int] = []
    timing = time_call(lambda x: calls.append(x), repeats=5, max_seconds=10, setup=lambda: (7,))
    assert timing.runs == 5 and calls == [7] * 5
    linear = {n: Timing(n * 0.01, 1) for n in (100, 1_000, 10_000)}
    flat = {n: Timing(2.0, 1) for n in (100, 1_000, 10_000)}
    assert slope(linear) == pytest.approx(1.0)
    assert slope(flat) == pytest.approx(0.0)
    assert slope({100: Timing(1.0, 1)}) is None
    assert Settings(quick=True).repeats(100_000) == 3


@pytest.mark.skipif(langchain_version() is None, reason="langchain-core not installed (ctxengine[peers])")
def test_sessions_convert_to_langchain_messages() -> None:
    items = synthetic_session(8, tag="lc")
    messages = to_langchain(items)
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"] * 2
    assert messages[1].tool_calls[0]["id"] == messages[2].tool_call_id
