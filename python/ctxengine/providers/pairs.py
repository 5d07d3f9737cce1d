"""Wire-level tool-pair checks: what a provider would reject with a 400."""

from __future__ import annotations

from typing import Any

from ..errors import OrphanedToolPair


def _chat(body: dict[str, Any]) -> None:
    messages = body["messages"]
    pending: set[str] = set()
    for i, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in pending:
                raise OrphanedToolPair(call_id, i, "tool message without a preceding assistant tool call")
            pending.discard(call_id)
            continue
        if pending:
            raise OrphanedToolPair(
                sorted(pending)[0], i, "assistant tool call not answered before the next message"
            )
        if role == "assistant":
            pending = {call["id"] for call in message.get("tool_calls") or []}
    if pending:
        raise OrphanedToolPair(sorted(pending)[0], len(messages), "assistant tool call never answered")


def _responses(body: dict[str, Any]) -> None:
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(body["input"]):
        kind = item.get("type")
        if kind == "function_call":
            if item["call_id"] in calls:
                raise OrphanedToolPair(item["call_id"], i, "duplicate function_call")
            calls[item["call_id"]] = i
        elif kind == "function_call_output":
            call_id = item["call_id"]
            if call_id not in calls or call_id in answered:
                raise OrphanedToolPair(call_id, i, "function_call_output without its function_call")
            answered.add(call_id)
    for call_id, i in calls.items():
        if call_id not in answered:
            raise OrphanedToolPair(call_id, i, "function_call without output")


def _anthropic(body: dict[str, Any]) -> None:
    messages = body["messages"]
    if not messages or messages[0]["role"] != "user":
        raise OrphanedToolPair("-", 0, "first message must be from the user")
    expected: set[str] = set()
    for i, message in enumerate(messages):
        blocks = message["content"]
        if i and messages[i - 1]["role"] == message["role"]:
            raise OrphanedToolPair("-", i, "consecutive turns with the same role")
        if message["role"] == "user":
            results = [b for b in blocks if b["type"] == "tool_result"]
            ids = {b["tool_use_id"] for b in results}
            if ids != expected:
                missing = sorted(expected - ids) or sorted(ids - expected)
                raise OrphanedToolPair(
                    missing[0], i, "tool_result blocks do not match the previous tool_use blocks"
                )
            if blocks[: len(results)] != results:
                raise OrphanedToolPair(
                    results[0]["tool_use_id"], i, "tool_result blocks must lead the user turn"
                )
            expected = set()
        else:
            if expected:
                raise OrphanedToolPair(sorted(expected)[0], i, "tool_use not answered")
            expected = {b["id"] for b in blocks if b["type"] == "tool_use"}
    if expected:
        raise OrphanedToolPair(sorted(expected)[0], len(messages), "tool_use never answered")


_CHECKS = {"openai_chat": _chat, "openai_responses": _responses, "anthropic_messages": _anthropic}


def check_wire_pairs(body: dict[str, Any], wire_format: str) -> None:
    """Raise ``OrphanedToolPair`` if ``body`` would split a tool pair in ``wire_format``."""
    try:
        check = _CHECKS[wire_format]
    except KeyError:
        raise ValueError(f"unknown wire format {wire_format!r}; expected one of {sorted(_CHECKS)}") from None
    check(body)


__all__ = ["check_wire_pairs"]
