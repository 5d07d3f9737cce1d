"""Foreign transcripts of the three formats replay (issue 42, acceptance 2), including ones
whose tool pairs are broken or whose call ids repeat: what cannot be replayed is reported
as the session's issues (ADR 0019's orphan rule), never a crash; both backends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ctxengine.replay import ReplayConfig, ReplayOptions, load_transcript, replay_transcripts
from ctxengine.replay.sources import request_points

CALL = {"type": "function", "function": {"name": "read", "arguments": "{}"}}

CHAT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the test."},
    {"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": "call_1"}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "def f(): pass"},
    # The id again, after its pair completed: replayed.
    {"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": "call_1"}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "def g(): pass"},
    {"role": "tool", "tool_call_id": "ghost", "content": "an orphan"},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Now run it."},
    # Two parallel calls of one id: the first is superseded while open.
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**CALL, "id": "call_9"}, {**CALL, "id": "call_9"}],
    },
    {"role": "tool", "tool_call_id": "call_9", "content": "ok"},
    # Never answered.
    {"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": "call_5"}]},
    {"role": "user", "content": "Well?"},
    {"role": "assistant", "content": "It passes."},
]
RESPONSES = [
    {"type": "message", "role": "user", "content": "List the files."},
    {"type": "function_call", "call_id": "fc_1", "name": "ls", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "fc_1", "output": "a.py b.py"},
    {"type": "function_call", "call_id": "fc_1", "name": "ls", "arguments": '{"all": true}'},
    {"type": "function_call_output", "call_id": "fc_1", "output": "a.py b.py .env"},
    {"type": "function_call_output", "call_id": "fc_2", "output": "an orphan"},
    {"type": "message", "role": "assistant", "content": "a.py and b.py"},
]
ANTHROPIC = [
    {"system": "You are helpful."},
    {"role": "user", "content": "What is in a.py?"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "read", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "x = 1"}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "read", "input": {"p": 2}}]},
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "tu_1", "content": "y = 2"},
            {"type": "tool_result", "tool_use_id": "tu_7", "content": "an orphan"},
        ],
    },
    {"role": "assistant", "content": "a.py sets x."},
]
EXPECTED = {
    "openai_chat": (
        CHAT,
        ["system_message", "repeated_call_id", "orphan_result", "superseded_call", "unanswered_call"],
    ),
    "openai_responses": (RESPONSES, ["repeated_call_id", "orphan_result"]),
    "anthropic": (ANTHROPIC, ["system_message", "repeated_call_id", "orphan_result"]),
}


def write(path: Path, records: list[Any]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


@pytest.mark.parametrize("fmt", sorted(EXPECTED))
def test_each_format_replays_and_reports_broken_pairs(backend: str, tmp_path: Path, fmt: str) -> None:
    records, issues = EXPECTED[fmt]
    path = write(tmp_path / f"{fmt}.jsonl", records)
    session = load_transcript(path)
    assert session.source == fmt
    assert [i.kind for i in session.issues] == issues
    options = ReplayOptions([ReplayConfig("c")], baselines=True)
    rows = asyncio.run(replay_transcripts([path], options))
    requests = [r for r in rows if r["kind"] == "request" and r["config"] == "c"]
    assert len(requests) == len(request_points(session.items)) > 0
    assert all(r["fits"] for r in requests)
    sessions = [r for r in rows if r["kind"] == "session"]
    assert {r["config"] for r in sessions} >= {"c", "full_history"}
    assert all([i["kind"] for i in r["issues"]] == issues for r in sessions)


def test_a_transcript_that_does_not_convert_is_an_issue(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\nnot json\n')
    weird = write(tmp_path / "weird.jsonl", [{"role": "wizard", "content": "?"}])
    for path in (bad, weird):
        session = load_transcript(path)
        assert session.items == ()
        assert [i.kind for i in session.issues] == ["not_converted"]
    rows = asyncio.run(replay_transcripts([bad, weird], ReplayOptions([ReplayConfig("c")], baselines=False)))
    assert [r["requests"] for r in rows if r["kind"] == "summary"] == [0]


def test_the_format_is_detected(tmp_path: Path) -> None:
    for fmt, (records, _) in EXPECTED.items():
        assert load_transcript(write(tmp_path / f"x-{fmt}.jsonl", records)).source == fmt
