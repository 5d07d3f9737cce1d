"""``ctxengine replay --store``: the same sessions from a SQLite file and a PostgreSQL
server give the same report (the store opened read-only, each session read once with its
stored counts), with the progress line on request (issue 42)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from ctxengine.cli.main import main
from ctxengine.cli.turns import bulk_history
from ctxengine.model import AssistantMessage, ConversationItem, UserMessage
from ctxengine.stores import open_store


def chat(turns: int, sid: str) -> list[ConversationItem]:
    items: list[ConversationItem] = []
    for turn in range(turns):
        items.append(UserMessage(f"{sid} turn {turn}: " + "please look at the parser module again " * 12))
        items.append(AssistantMessage(f"turn {turn}: " + "the parser reads the tokens and checks them " * 12))
    return items


async def _write(url: str, ids: list[str]) -> None:
    store = await open_store(url)
    try:
        for sid in ids:
            await bulk_history(store, sid, chat(20, sid), model_id="openai:gpt-4o-mini#o200k_base")
    finally:
        await store.close()


def _replay(url: str, ids: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    argv = ["replay", "--store", url, "--window", "7000", "--reserve", "1024", "--counting", "exact"]
    argv += [a for sid in ids for a in ("--session", sid)]
    policy = out.parent / "policy.toml"
    policy.write_text("[history]\nfloor_tokens = 2000\n")
    argv += ["--policy", str(policy), "--no-baselines", "--progress", "--out", str(out), "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert f"replay: {len(ids)}/{len(ids)} sessions" in captured.err
    return [json.loads(line) for line in (out / "replay.jsonl").read_text().splitlines()]


def test_sqlite_and_postgres_give_the_same_report(
    tmp_path: Path, postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [f"replay-{uuid.uuid4().hex[:8]}-{n}" for n in range(3)]
    sqlite = f"sqlite:///{tmp_path / 'r.db'}"
    for url in (sqlite, postgres_dsn):
        asyncio.run(_write(url, ids))
    a = _replay(sqlite, ids, tmp_path / "a", capsys)
    b = _replay(postgres_dsn, ids, tmp_path / "b", capsys)
    assert a == b
    (summary,) = [r for r in a if r["kind"] == "summary"]
    assert summary["requests"] == 3 * 20 and summary["compactions"] >= 3
