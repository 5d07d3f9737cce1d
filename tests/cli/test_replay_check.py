"""``ctxengine replay --check`` (issue 42, acceptance 1, from the command line): the fifty-turn
demo's requests all reproduce (exit 0); a golden store written before format 6 lists its
requests as not reproducible, without failing; a request that rebuilds to other hashes
names its first differing region and exits 1."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from ctxengine.cli import main
from ctxengine.cli.demo import DemoConfig, run_demo
from ctxengine.replay import RequestCheck, SessionCheck
from ctxengine.stores import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
import goldenkit


def test_the_demo_session_reproduces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    asyncio.run(run_demo(DemoConfig(store_url=url, session_id="demo")))
    capsys.readouterr()
    assert main(["replay", "--store", url, "--session", "demo", "--check"]) == 0
    assert "demo: 140 of 140 requests reproduced, 0 without what a rebuild needs" in capsys.readouterr().out
    assert main(["replay", "--store", url, "--session", "demo", "--check", "--json"]) == 0
    [session] = json.loads(capsys.readouterr().out)["sessions"]
    assert session["ok"] and len(session["requests"]) == 140


def test_a_store_from_before_format_6_is_listed_not_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = goldenkit.sqlite_copy(tmp_path)
    assert main(["replay", "--store", url, "--session", "golden-demo", "--check"]) == 0
    out = capsys.readouterr().out
    assert "golden-demo: 0 of 140 requests reproduced, 140 without what a rebuild needs" in out
    assert "request 0 (event" in out


def test_a_differing_request_names_its_region_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxengine.replay as replay

    async def differing(store: object, session_id: str) -> SessionCheck:
        bad = RequestCheck(3, 40, "run-2", 1, False, "history", "prefix equal, body differs")
        return SessionCheck(session_id, (RequestCheck(0, 5, "run-1", 0, True), bad))

    monkeypatch.setattr(replay, "verify_session", differing)
    url = f"sqlite:///{tmp_path}/empty.db"

    async def create() -> None:
        await (await open_store(url)).close()

    asyncio.run(create())
    assert main(["replay", "--store", url, "--session", "s", "--check"]) == 1
    out = capsys.readouterr().out
    assert "s: 1 of 2 requests reproduced" in out
    assert "request 3 (event 40, run run-2 step 1): first differing region history" in out
