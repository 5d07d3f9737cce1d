"""The report's rows follow the schema of ``docs/replay.md``; the JSON lines the command
line writes are the rows; the Markdown table and the command line (issue 42)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ctxengine.cli.main import main
from ctxengine.cli.turns import AGENT, PRINCIPAL, TOOLS
from ctxengine.model import ResolvedModel
from ctxengine.replay import ReplayConfig, Replayer, ReplayOptions, ReplaySession, markdown, replay_sessions
from ctxengine.replay.report import Report, request_lines, request_row

from .workloads import chat

TOKENS = {"prefix", "summary", "history", "blocks", "current_turn", "total"}
CACHE = {
    "wire_tokens",
    "shared",
    "ceiling",
    "openai",
    "anthropic_tokens",
    "anthropic_read",
    "anthropic_write",
    "vllm",
}
REQUEST = {
    "kind": str, "config": str, "session": str, "request": int, "item": int, "run": int, "step": int,
    "tokens": dict, "capacity": int, "fits": bool, "reason": str, "history_items": int, "cut": int,
    "dropped_tokens": int, "pointers": int, "compactions": int, "turn": dict, "cache": dict, "cost": dict,
}  # fmt: skip
SUMS = {
    "requests": int, "fits": int, "overflows": dict, "compactions": int, "requests_cut": int,
    "history_pointers": int, "turn": dict, "tokens": dict, "tokens_per_request": float, "cache": dict,
    "cached_fraction": dict, "cost": dict,
}  # fmt: skip
SESSION = {"kind": str, "config": str, "session": str, "source": str, "method": str, "issues": list, **SUMS}
SUMMARY = {"kind": str, "config": str, "sessions": int, "settings": dict, **SUMS}


def session(turns: int = 30) -> ReplaySession:
    items = tuple(replace(item, seq=n + 1) for n, item in enumerate(chat(turns)))
    return ReplaySession("s", items)


def options(method: str = "fast") -> ReplayOptions:
    small = ReplayConfig("small", ResolvedModel("openai", "gpt-4o-mini", 8_000, 4_096, 1_024))
    small = replace(small, policy=replace(small.policy, history_floor_tokens=2000))
    return ReplayOptions(
        [small, ReplayConfig("big")], True, method, agent=AGENT, tools=TOOLS, principal=PRINCIPAL
    )


def check(row: dict[str, Any], schema: dict[str, type]) -> None:
    assert set(row) == set(schema), set(row) ^ set(schema)
    for key, kind in schema.items():
        assert isinstance(row[key], kind), (key, row[key])


@pytest.mark.parametrize("method", ["fast", "exact"])
def test_rows_follow_the_schema(backend: str, method: str) -> None:
    rows = asyncio.run(replay_sessions([session()], options(method)))
    kinds = [r["kind"] for r in rows]
    assert kinds[-1] == "summary" and "session" in kinds
    for row in rows:
        check(row, {"request": REQUEST, "session": SESSION, "summary": SUMMARY}[row["kind"]])
        if row["kind"] == "request":
            assert set(row["tokens"]) == TOKENS and set(row["cache"]) == CACHE
            assert set(row["cost"]) == {"openai", "anthropic", "uncached"}
            assert sum(v for k, v in row["tokens"].items() if k != "total") == row["tokens"]["total"]
            c = row["cache"]
            assert c["openai"] <= c["ceiling"] <= c["wire_tokens"] and c["vllm"] <= c["ceiling"]
            assert row["fits"] == (row["reason"] == "fits")
    summaries = {r["config"]: r for r in rows if r["kind"] == "summary"}
    assert summaries["small"]["compactions"] >= 1 and summaries["big"]["compactions"] == 0
    assert summaries["small"]["requests"] == summaries["full_history"]["requests"] == 40
    assert summaries["small"]["settings"]["window"] == 8_000
    assert summaries["full_history"]["settings"] == {"baseline": "full_history"}


def test_the_json_lines_are_the_rows(backend: str) -> None:
    opts = options()

    async def outcomes() -> list[Any]:
        return await Replayer(opts).session(session(20))

    got = asyncio.run(outcomes())
    for o in got:
        lines = [json.loads(line) for line in request_lines(o, opts.prices)]
        assert lines == [request_row(o, j, opts.prices) for j in range(len(o.requests))]
    report = Report([o.name for o in got], {}, opts.prices)
    assert [json.loads(x) for x in report.add(got, rows=False)] == Report(
        [o.name for o in got], {}, opts.prices
    ).add(got)


def test_markdown_table() -> None:
    rows = asyncio.run(replay_sessions([session(12)], options()))
    table = markdown([r for r in rows if r["kind"] == "summary"])
    lines = table.splitlines()
    assert lines[0].startswith("| configuration |") and len(lines) == 2 + len(options().configs) + 1 + 1
    assert lines[2].startswith("| small | 1 | 16 |")


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(m) for m in [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
        )
    )
    out = tmp_path / "out"
    argv = [
        "replay",
        "--transcript",
        str(path),
        "--window",
        "32000",
        "--no-baselines",
        "--out",
        str(out),
        "--json",
    ]
    assert main(argv) == 0
    summaries = json.loads(capsys.readouterr().out)["summaries"]
    assert [s["config"] for s in summaries] == ["cli"] and summaries[0]["requests"] == 1
    assert (out / "replay.jsonl").exists() and (out / "replay.md").exists()
    bad = tmp_path / "bad.toml"
    bad.write_text("[configs.a]\nwindow = -1\n")
    assert main(["replay", "--transcript", str(path), "--config", str(bad), "--out", str(out)]) == 2
    assert "configs.a.window" in capsys.readouterr().err


def test_a_store_replay_streams_with_workers(tmp_path: Path) -> None:
    from ctxengine.cli.turns import bulk_history
    from ctxengine.replay import replay_store, replay_store_to
    from ctxengine.stores import open_store

    url = f"sqlite:///{tmp_path / 's.db'}"

    async def write() -> None:
        store = await open_store(url)
        for sid in ("a", "b", "c"):
            await bulk_history(store, sid, chat(15, sid), model_id="openai:gpt-4o-mini#o200k_base")
        await store.close()

    asyncio.run(write())
    opts = options()
    rows = asyncio.run(replay_store(url, ["a", "b", "c"], opts))
    for workers in (1, 2):
        path = tmp_path / f"r{workers}.jsonl"
        streamed = replay_store_to(path, url, ["a", "b", "c"], opts, workers=workers, chunk=2)
        assert [json.loads(line) for line in path.read_text().splitlines()] == rows
        assert streamed.sessions == 3 and streamed.summaries == rows[-len(streamed.summaries) :]
