"""Acceptance 5: histories built with the official SDKs' own types round trip, minus the
response-only metadata each module documents."""

from __future__ import annotations

from typing import Any

from ctxengine.interop import anthropic, langchain, openai_chat, openai_responses


def test_openai_chat_sdk_types() -> None:
    from openai.types.chat import (
        ChatCompletionDeveloperMessageParam,
        ChatCompletionMessage,
        ChatCompletionSystemMessageParam,
        ChatCompletionToolMessageParam,
        ChatCompletionUserMessageParam,
    )

    reply = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": "Looking it up.",
            "refusal": None,
            "annotations": [],
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q":"report"}'},
                }
            ],
        }
    )
    history: list[Any] = [
        ChatCompletionSystemMessageParam(role="system", content="Be brief."),
        ChatCompletionDeveloperMessageParam(
            role="developer", content=[{"type": "text", "text": "Use tools."}]
        ),
        ChatCompletionUserMessageParam(role="user", content="find the report", name="alice"),
        reply,
        ChatCompletionToolMessageParam(role="tool", tool_call_id="call_1", content="report.pdf"),
    ]
    back = openai_chat.from_items(openai_chat.to_items(history))
    expected = [*history[:3], reply.model_dump(exclude_none=True, exclude={"annotations"}), history[4]]
    assert back == expected


def test_openai_responses_sdk_types() -> None:
    from openai.types.responses import (
        EasyInputMessageParam,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseReasoningItem,
    )
    from openai.types.responses.response_input_param import FunctionCallOutput

    reasoning = ResponseReasoningItem.model_validate(
        {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]}
    )
    call = ResponseFunctionToolCall.model_validate(
        {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "search",
         "arguments": '{"q":"report"}', "status": "completed"}
    )  # fmt: skip
    said = ResponseOutputMessage.model_validate(
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Found it.", "annotations": []}]}
    )  # fmt: skip
    history: list[Any] = [
        EasyInputMessageParam(type="message", role="user", content="find the report"),
        reasoning,
        call,
        FunctionCallOutput(type="function_call_output", call_id="call_1", output="report.pdf"),
        said,
    ]
    back = openai_responses.from_items(openai_responses.to_items(history))
    assert back == [
        history[0],
        reasoning.model_dump(exclude_none=True),
        {"type": "function_call", "call_id": "call_1", "name": "search", "arguments": '{"q":"report"}'},
        history[3],
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Found it.", "annotations": []}],
        },
    ]


def test_anthropic_sdk_types() -> None:
    from anthropic.types import (
        AssistantMessageParam,
        TextBlock,
        ThinkingBlock,
        ToolResultBlockParam,
        ToolUseBlock,
        UserMessageParam,
    )

    answer = [
        ThinkingBlock(type="thinking", thinking="search first", signature="sig"),
        TextBlock(type="text", text="Looking.", citations=None),
        ToolUseBlock(type="tool_use", id="toolu_1", name="search", input={"q": "report"}),
    ]
    result = ToolResultBlockParam(type="tool_result", tool_use_id="toolu_1", content="report.pdf")
    history: list[Any] = [
        UserMessageParam(role="user", content="find the report"),
        AssistantMessageParam(role="assistant", content=answer),  # type: ignore[typeddict-item]
        UserMessageParam(role="user", content=[result]),
    ]
    back = anthropic.from_items(anthropic.to_items(history, system="Be brief."))
    assert back == {
        "system": "Be brief.",
        "messages": [
            history[0],
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer]},
            history[2],
        ],
    }


def test_langchain_message_classes() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    history = [
        SystemMessage("Be brief.", id="m0"),
        HumanMessage("find the report", id="m1", name="alice"),
        AIMessage(
            "Looking.",
            id="run-1",
            tool_calls=[{"name": "search", "args": {"q": "report"}, "id": "call_1", "type": "tool_call"}],
            response_metadata={"model_name": "gpt-x", "finish_reason": "tool_calls"},
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            additional_kwargs={"refusal": None},
        ),
        ToolMessage("report.pdf", tool_call_id="call_1", name="search", id="m3"),
        AIMessage("Found it.", id="run-2"),
    ]
    back = langchain.from_items(langchain.to_items(history))
    drop = {"id", "response_metadata", "usage_metadata", "additional_kwargs"}
    assert [m.model_dump(exclude=drop) for m in back] == [m.model_dump(exclude=drop) for m in history]
    assert [type(m) for m in back] == [type(m) for m in history]
