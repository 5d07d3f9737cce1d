"""``ctxengine demo --summarizer scripted`` (issue 43): the fifty-turn session compacted by a
model-backed compactor on the scripted summarizer; every invariant holds, every compaction
adopts a recorded model summary, and the calls' tokens are in the session's books."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxengine.cli import main
from ctxengine.cli.demo import DemoConfig, run_demo
from ctxengine.cli.demo_checks import check
from ctxengine.errors import ModelValidationError


async def test_the_scripted_summarizer_holds_every_invariant(tmp_path: Path, backend: str) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    record = await run_demo(DemoConfig(store_url=url, session_id="d1", summarizer="scripted"))
    checks = check(record)
    assert [c.name for c in checks if c.failed] == []
    assert "every compaction summarized by the scripted model, recorded (format 7)" in {
        c.name for c in checks
    }
    assert record.logged_compactions >= 2 and record.model_summaries == record.logged_compactions
    assert record.summary_fallbacks == 0 and record.compaction_tokens > 0


def test_the_flag_and_the_report(tmp_path: Path, capsys: Any) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    code = main(["demo", "--summarizer", "scripted", "--store", url, "--session", "d1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"]
    assert report["summarizer"] == "scripted" and report["model_summaries"] == report["compactions"] > 0
    assert main(["inspect", "--store", url, "d1", "--json"]) == 0
    inspected = json.loads(capsys.readouterr().out)
    assert inspected["cache"]["compaction_input_tokens"] == report["compaction_input_tokens"] > 0


async def test_an_unknown_summarizer_is_a_usage_error() -> None:
    with pytest.raises(ModelValidationError, match="summarizer"):
        await run_demo(DemoConfig(summarizer="gpt"))
