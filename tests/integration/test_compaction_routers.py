"""Issue 43, acceptance 4: the compaction routers over the official async clients
(``openai.AsyncOpenAI``, ``anthropic.AsyncAnthropic``) against a loopback server that records
each request and answers with a summary and usage; and a compaction through each."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import anthropic
import openai
import pytest

import ctxengine as ce
from builder_fixtures import make_plan
from ctxengine.providers import anthropic_router, openai_router, to_anthropic_messages, to_openai_chat
from loopback import JsonHandler, serving

SUMMARY = "The user compared two offers; the assistant found the second cheaper."


class _Summarizer(JsonHandler):
    bodies: ClassVar[list[tuple[str, Any]]] = []
    reply_text: ClassVar[str] = SUMMARY
    status: ClassVar[int] = 200

    def do_POST(self) -> None:
        body = self.read_json()
        self.bodies.append((self.path, body))
        if self.path.endswith("/chat/completions"):
            reply: dict[str, Any] = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": self.reply_text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 321, "completion_tokens": 17, "total_tokens": 338},
            }
        else:
            reply = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": self.reply_text}],
                "stop_reason": "end_turn",
                "usage": {
                    "input_tokens": 300,
                    "cache_read_input_tokens": 20,
                    "cache_creation_input_tokens": 1,
                    "output_tokens": 17,
                },
            }
        self.send_json(self.status, reply if self.status == 200 else {"error": {"message": "down"}})


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving(_Summarizer) as url:
        yield url


def _checkpoint() -> tuple[ce.Checkpoint, int]:
    items: list[Any] = []
    for n in range(30):
        items.append(ce.UserMessage(f"turn {n}: compare offer {n}", seq=len(items) + 1))
        items.append(ce.ToolCall(f"c{n}", "search", {"q": f"offer {n}"}, seq=len(items) + 1))
        page = "UNTRUSTED-PAGE " + "p" * 2_000
        items.append(ce.ToolResult(f"c{n}", page, trust=ce.TrustLevel.EXTERNAL_UNTRUSTED, seq=len(items) + 1))
        items.append(ce.AssistantMessage(f"offer {n} costs {n} EUR", seq=len(items) + 1))
    seed = len(items) + 1
    items.append(ce.UserMessage("which one?", seq=seed))
    return ce.Checkpoint("r1", conversation=tuple(items)), seed


async def _compact(router: Any) -> tuple[ce.Checkpoint, ce.CompactionResult]:
    planner, plan = make_plan(32_000)
    cp, seed = _checkpoint()
    compactor = ce.ModelCompactor(planner.estimator, router)
    return await compactor.compact_async(
        cp, plan.budget, "history_requires_compaction", model_id=plan.model_id, seed_sequence=seed
    )


async def test_the_openai_router_sends_the_chat_payload_and_reads_text_and_usage(server: str) -> None:
    client = openai.AsyncOpenAI(api_key="test", base_url=f"{server}/v1", max_retries=0)
    router = openai_router(client, model="gpt-4o-mini")
    assert router.model_id == "openai:gpt-4o-mini"
    compacted, result = await _compact(router)
    path, sent = _Summarizer.bodies[-1]
    assert path.endswith("/chat/completions")
    assert "UNTRUSTED-PAGE" not in json.dumps(sent)
    record = result.summarizer
    assert record is not None and record.outcome == "adopted" and record.text == SUMMARY
    assert (record.input_tokens, record.output_tokens) == (321, 17)
    assert record.model_id == "openai:gpt-4o-mini"
    assert compacted.compacted_summary is not None and compacted.compacted_summary.endswith(SUMMARY)
    assert sent["model"] == "gpt-4o-mini" and sent["messages"][0]["role"] == "system"
    assert sent["max_completion_tokens"] > 0


async def test_the_anthropic_router_sends_the_messages_payload_and_reads_text_and_usage(server: str) -> None:
    client = anthropic.AsyncAnthropic(api_key="test", base_url=server, max_retries=0)
    router = anthropic_router(client, model="claude-haiku-4-5")
    compacted, result = await _compact(router)
    path, sent = _Summarizer.bodies[-1]
    assert path.endswith("/v1/messages")
    assert "UNTRUSTED-PAGE" not in json.dumps(sent)
    assert sent["system"][0]["text"].startswith("You compact the earlier part of a conversation")
    record = result.summarizer
    assert record is not None and record.outcome == "adopted" and record.text == SUMMARY
    assert (record.input_tokens, record.output_tokens) == (321, 17)  # cache reads and writes included
    assert record.model_id == "anthropic:claude-haiku-4-5"
    assert compacted.compacted_summary is not None and compacted.compacted_summary.endswith(SUMMARY)


async def test_the_payloads_are_the_renderers_own(server: str) -> None:
    seen: list[ce.ModelRequest] = []

    class Spy:
        def __init__(self, inner: Any) -> None:
            self.inner, self.model_id = inner, inner.model_id

        async def __call__(self, request: ce.ModelRequest) -> ce.RouterReply:
            seen.append(request)
            reply: ce.RouterReply = await self.inner(request)
            return reply

    oa = openai_router(openai.AsyncOpenAI(api_key="t", base_url=f"{server}/v1", max_retries=0), model="m")
    await _compact(Spy(oa))
    assert _Summarizer.bodies[-1][1] == to_openai_chat(seen[-1], model="m")
    an = anthropic_router(anthropic.AsyncAnthropic(api_key="t", base_url=server, max_retries=0), model="m")
    await _compact(Spy(an))
    assert _Summarizer.bodies[-1][1] == to_anthropic_messages(seen[-1], model="m")


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
async def test_an_sdk_error_falls_back_to_the_extractive_summary(server: str, sdk: str) -> None:
    _Summarizer.status = 500
    try:
        if sdk == "openai":
            client: Any = openai.AsyncOpenAI(api_key="t", base_url=f"{server}/v1", max_retries=0)
            router: Any = openai_router(client, model="m")
        else:
            client = anthropic.AsyncAnthropic(api_key="t", base_url=server, max_retries=0)
            router = anthropic_router(client, model="m")
        compacted, result = await _compact(router)
    finally:
        _Summarizer.status = 200
    record = result.summarizer
    assert record is not None and record.outcome == "fallback"
    assert record.reason == "error:InternalServerError"
    assert (compacted.compacted_summary or "").startswith("Compacted conversation through event")
