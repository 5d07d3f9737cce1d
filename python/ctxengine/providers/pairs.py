"""Call ids as a request spells them, and wire-level tool-pair checks: what a provider
would reject with a 400.

A history may reuse a call id once its earlier pair is complete (ADR 0019), but a
request must not hold one id twice: Anthropic refuses it ("tool_use ids must be
unique"), and the OpenAI APIs match an output to its call by id. ``wire_call_ids``
gives every pair of a request an id of its own: the first pair with an id keeps it,
the n-th (n >= 2) becomes ``<id>~<n>`` (or ``<id>~<n+1>``, ... when that is an id
of the request already), the same names for the same request every time. Mapping
back: a wire id that is not a call id of the request's items is ``<id>~<k>``, and
its pair is the item pair with call id ``<id>`` at the same position; the log and
the checkpoint keep the original ids (the provider never sees them renamed again
as new calls: its next calls bring fresh ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..assembly.request import RenderedItem
from ..errors import OrphanedToolPair


def wire_call_ids(body: Sequence[RenderedItem]) -> list[str | None]:
    """Each body item's call id as the request spells it (``None`` for items without one):
    unique per pair within the request, see the module docstring."""
    taken = {item.call_id for item in body if item.call_id is not None}
    uses: dict[str, int] = {}
    open_calls: dict[str, str] = {}  # call id -> the wire id of its open call
    out: list[str | None] = []
    for item in body:
        call_id = item.call_id
        if call_id is None:
            out.append(None)
        elif item.is_tool_call:
            n = uses[call_id] = uses.get(call_id, 0) + 1
            wire = call_id
            if n > 1:
                wire = f"{call_id}~{n}"
                while wire in taken:
                    n += 1
                    wire = f"{call_id}~{n}"
                taken.add(wire)
            open_calls[call_id] = wire
            out.append(wire)
        else:  # a result answers the nearest earlier open call with its id
            out.append(open_calls.pop(call_id, call_id))
    return out


def _reused(call_id: str, index: int) -> OrphanedToolPair:
    return OrphanedToolPair(call_id, index, "tool call id reused within the request")


def _chat(body: dict[str, Any]) -> None:
    messages = body["messages"]
    pending: set[str] = set()
    called: set[str] = set()
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
            pending = set()
            for call in message.get("tool_calls") or []:
                if call["id"] in called:
                    raise _reused(call["id"], i)
                called.add(call["id"])
                pending.add(call["id"])
    if pending:
        raise OrphanedToolPair(sorted(pending)[0], len(messages), "assistant tool call never answered")


def _responses(body: dict[str, Any]) -> None:
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(body["input"]):
        kind = item.get("type")
        if kind == "function_call":
            if item["call_id"] in calls:
                raise _reused(item["call_id"], i)
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
    used: set[str] = set()
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
            for block in blocks:
                if block["type"] == "tool_use":
                    if block["id"] in used:
                        raise _reused(block["id"], i)
                    used.add(block["id"])
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


__all__ = ["check_wire_pairs", "wire_call_ids"]
