"""The wire payloads go through the official SDKs unchanged (issue 4, acceptance 6).

Each SDK sends its request to a loopback HTTP server that records the body
and answers with a minimal valid response.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import anthropic
import openai
import pytest

import ctxengine as ce
from builder_fixtures import AGENT, ALICE, checkpoint_for, make_builder, make_plan, session
from ctxengine.providers import check_wire_pairs, to_anthropic_messages, to_openai_chat, to_openai_responses
from loopback import JsonHandler, serving

CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
}
RESPONSES_REPLY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 0,
    "model": "m",
    "status": "completed",
    "output": [],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


class _Recorder(JsonHandler):
    bodies: ClassVar[list[tuple[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.read_json()
        self.bodies.append((self.path, body))
        if self.path.endswith("/chat/completions"):
            reply: dict[str, Any] = CHAT_REPLY
        elif self.path.endswith("/responses"):
            reply = RESPONSES_REPLY
        else:
            reply = ANTHROPIC_REPLY
        self.send_json(200, reply)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving(_Recorder) as url:
        yield url


def _request(window: int = 128_000) -> ce.ModelRequest:
    planner, plan = make_plan(window)
    items = session(8, result_size=100, parallel_every=3)
    reasoning = (
        ce.ReasoningItem("openai", {"type": "reasoning", "id": "rs_1", "summary": []}, seq=items[-4].seq),
    )
    cp = checkpoint_for(items, reasoning=reasoning, recall=("likes tea",))
    return make_builder(planner).build(ce.RunContext("r1", "s1", items[-4].seq), cp, AGENT, ALICE, plan=plan)


def _last(path_suffix: str) -> Any:
    path, body = _Recorder.bodies[-1]
    assert path.endswith(path_suffix)
    return body


def test_openai_chat_sdk_sends_the_payload_unchanged(server: str) -> None:
    payload = to_openai_chat(_request(), model="gpt-x")
    client = openai.OpenAI(api_key="test", base_url=f"{server}/v1", max_retries=0)
    client.chat.completions.create(**payload)
    recorded = _last("/chat/completions")
    assert recorded == payload
    check_wire_pairs(recorded, "openai_chat")


def test_openai_responses_sdk_sends_the_payload_unchanged(server: str) -> None:
    payload = to_openai_responses(_request(), model="gpt-x")
    client = openai.OpenAI(api_key="test", base_url=f"{server}/v1", max_retries=0)
    client.responses.create(**payload)
    recorded = _last("/responses")
    assert recorded == payload
    check_wire_pairs(recorded, "openai_responses")


def test_anthropic_sdk_sends_the_payload_unchanged(server: str) -> None:
    payload = to_anthropic_messages(_request(), model="claude-x")
    client = anthropic.Anthropic(api_key="test", base_url=server, max_retries=0)
    client.messages.create(**payload)
    recorded = _last("/v1/messages")
    assert recorded == payload
    check_wire_pairs(recorded, "anthropic_messages")
    cached = [block for block in recorded["system"] if "cache_control" in block]
    assert len(cached) == len(_request().cache_breakpoints)


def test_pairs_hold_after_a_history_cut_in_every_sdk_format(server: str) -> None:
    planner, plan = make_plan(24_000)
    items = session(40, result_size=700, parallel_every=2)
    assembly = make_builder(planner).assemble(
        ce.RunContext("r1", "s1", items[-4].seq), checkpoint_for(items), AGENT, ALICE, plan=plan
    )
    assert assembly.pressure.history_cut > 0
    request = assembly.request
    oa = openai.OpenAI(api_key="test", base_url=f"{server}/v1", max_retries=0)
    an = anthropic.Anthropic(api_key="test", base_url=server, max_retries=0)
    oa.chat.completions.create(**to_openai_chat(request, model="m"))
    check_wire_pairs(_last("/chat/completions"), "openai_chat")
    oa.responses.create(**to_openai_responses(request, model="m"))
    check_wire_pairs(_last("/responses"), "openai_responses")
    an.messages.create(**to_anthropic_messages(request, model="m"))
    check_wire_pairs(_last("/v1/messages"), "anthropic_messages")
