"""What the session API takes as the application holds it (issue 41): the user's message in any
provider's shape, tools as ``ToolSpec`` or tool dicts, the model by name (a table the user can
extend) or as a ``ResolvedModel``, the response as the provider's SDK object or its dict."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage
from openai.types.chat import ChatCompletionUserMessageParam

import ctxengine as ce
from ctxengine.engine import MODELS, read_reply, register_model, user_message
from ctxengine.engine.engine import tool_spec
from ctxengine.engine.models import lookup_model
from enginekit import WEATHER, engine
from fake_provider import ScriptedModel, sdk_object

TEXT = "What is the weather in Paris?"


@pytest.mark.parametrize(
    "message",
    [
        TEXT,
        {"role": "user", "content": TEXT},
        {"role": "user", "content": [{"type": "text", "text": TEXT}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TEXT}]},
        ChatCompletionUserMessageParam(role="user", content=TEXT),
        HumanMessage(TEXT),
        ce.UserMessage(TEXT),
    ],
    ids=["text", "chat", "parts", "responses", "typed-dict", "langchain", "item"],
)
async def test_a_turn_starts_from_the_message_in_any_shape(message: object) -> None:
    async with engine("memory://") as agent:
        turn = await agent.session("s1").turn(message)
        body = await turn.request("openai_chat")
    seed = turn.checkpoint.conversation[-1]
    assert isinstance(seed, ce.UserMessage) and ce.engine.messages.text_of(seed) == TEXT
    # The last user message (builder version 3 renders the runtime metadata after it, ADR 0027).
    (*_, last_user) = (m for m in body["messages"] if m["role"] == "user")
    assert TEXT in last_user["content"]


def test_a_message_that_is_not_one_user_message_is_a_conversion_error() -> None:
    for bad, field in (
        ({"role": "assistant", "content": "hi"}, "role"),
        (42, "<message>"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, "content[0].type"),
    ):
        with pytest.raises(ce.ConversionError) as caught:
            user_message(bad, None)
        assert caught.value.field == field


def test_tools_as_tool_specs_or_any_providers_tool_dict() -> None:
    schema = WEATHER.input_schema
    shapes = [
        WEATHER,
        {
            "type": "function",
            "function": {"name": "weather", "description": WEATHER.description, "parameters": schema},
        },
        {"type": "function", "name": "weather", "description": WEATHER.description, "parameters": schema},
        {"name": "weather", "description": WEATHER.description, "input_schema": schema},
    ]
    assert [tool_spec(s) for s in shapes] == [WEATHER] * 4


def test_models_by_name_or_id_and_the_table_extends() -> None:
    assert lookup_model("gpt-4.1").model == lookup_model("openai:gpt-4.1").model == MODELS["gpt-4.1"].model
    assert lookup_model("claude-sonnet-4-5").model.provider == "anthropic"
    with pytest.raises(ce.ModelValidationError):
        lookup_model("anthropic:gpt-4.1")  # the provider must match
    own = ce.ResolvedModel("azure", "gpt-4o-eu", 128_000, 16_384, 8_192)
    try:
        entry = register_model("gpt-4o-eu", own, encoding="o200k_base")
        assert lookup_model("gpt-4o-eu") == entry and lookup_model(own).model is own
        with pytest.raises(ce.ModelValidationError, match="encoding"):
            register_model("x", own, encoding="p50k")
    finally:
        MODELS.pop("gpt-4o-eu", None)
    for entry in MODELS.values():
        m = entry.model
        assert m.default_output_reserve <= m.max_output_tokens < m.context_window


async def test_a_registered_encoding_counts_exactly() -> None:
    own = ce.ResolvedModel("azure", "gpt-4o-eu", 128_000, 16_384, 8_192)
    try:
        register_model("gpt-4o-eu", own, encoding="o200k_base")
        async with engine("memory://", model="gpt-4o-eu") as agent:
            turn = await agent.session("s1").turn(TEXT)
            await turn.request()
            plan = await agent.planner.current("s1")
    finally:
        MODELS.pop("gpt-4o-eu", None)
    assert plan is not None and plan.counting == "o200k_base" and plan.model_id == "azure:gpt-4o-eu"


@pytest.mark.parametrize("wire", ["openai_chat", "openai_responses", "anthropic_messages"])
def test_a_response_reads_the_same_as_its_sdk_object(wire: str) -> None:
    body = {
        "model": "m",
        "messages" if wire != "openai_responses" else "input": [{"role": "user", "content": "Weather?"}],
        "tools": [],
    }
    model = ScriptedModel()
    raw = model.respond(body, wire)
    as_dict, as_object = read_reply(raw), read_reply(sdk_object(raw, wire))
    assert as_dict == as_object and as_dict.wire == wire
    assert as_dict.usage is not None and as_dict.usage.input > 0
    if wire == "anthropic_messages":  # cache reads and writes count in the input (ADR 0020)
        usage = raw["usage"]
        parts = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        assert as_dict.usage.input == sum(usage[k] for k in parts)
        assert as_dict.usage.cache_write == usage["cache_creation_input_tokens"]
    assert read_reply(list(as_dict.items)).items == as_dict.items


def test_an_empty_assistant_text_beside_tool_calls_is_left_out() -> None:
    reply = read_reply(
        {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                        ],
                    }
                }
            ]
        }
    )
    assert [type(i).__name__ for i in reply.items] == ["ToolCall"] and reply.usage is None


def test_import_ctxengine_loads_the_session_api_on_first_use() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ctxengine as ce; assert 'ctxengine.engine' not in sys.modules; "
        "assert 'ctxengine.interop' not in sys.modules; ce.engine.MODELS; ce.Engine; "
        "assert 'ctxengine.engine' in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
