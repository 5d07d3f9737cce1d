"""What the session API takes in: the user's message and the model's response, in whatever
shape the application holds them (issue 41).

A user message is text, an item, a dict in OpenAI Chat, Responses or Anthropic shape (the
three agree on ``{"role": "user", "content": ...}``), an SDK object of one of them, or a
LangChain ``HumanMessage``. A response is what the provider's client returned: an OpenAI
``ChatCompletion`` or ``Response``, an Anthropic ``Message``, their dicts, or items. The
conversions are ``ctxengine.interop``'s, so a response reads into the same items as the
history it becomes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConversionError
from ..interop import anthropic, langchain, openai_chat, openai_responses
from ..interop._sdk import plain
from ..model import AssistantMessage, ConversationItem, TextPart, ToolCall, UserMessage
from ..model.items import ITEM_TYPES

_ITEMS = tuple(ITEM_TYPES.values())


def user_message(message: Any, principal_id: str | None) -> UserMessage:
    """``message`` as the run's ``UserMessage``; text is the principal's (``principal_id``)."""
    if isinstance(message, UserMessage):
        return message
    if isinstance(message, str):
        return UserMessage(message, principal_id=principal_id)
    if type(message).__module__.startswith("langchain_core"):
        items = langchain.to_items([message], first_seq=None)
    else:
        raw = plain(message)
        if not isinstance(raw, Mapping):
            raise ConversionError(
                "user_message", 0, "<message>", f"{type(message).__name__} is not a message"
            )
        if raw.get("role") != "user":
            raise ConversionError("user_message", 0, "role", f"expected 'user', got {raw.get('role')!r}")
        items = _user_items(raw)
    if len(items) != 1 or not isinstance(items[0], UserMessage):
        kinds = [type(i).__name__ for i in items]
        raise ConversionError("user_message", 0, "content", f"expected one user message, read {kinds}")
    return items[0]


def _user_items(raw: Mapping[str, Any]) -> list[ConversationItem]:
    content = raw.get("content")
    parts = content if isinstance(content, list | tuple) else ()
    kinds = {plain(p).get("type") if isinstance(plain(p), Mapping) else None for p in parts}
    if raw.get("type") == "message" or "input_text" in kinds:
        return openai_responses.to_items([raw], first_seq=None)
    return openai_chat.to_items([raw], first_seq=None)


@dataclass(frozen=True, slots=True)
class Usage:
    """A response's input tokens as the provider counted them (ADR 0020): ``input`` is every
    input token, cached ones included; ``cached_read`` and ``cache_write`` (``None``: not
    reported) the prompt cache's share."""

    input: int
    cached_read: int | None = None
    cache_write: int | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A model response as items (text, reasoning, tool calls, in order) and its usage."""

    items: tuple[ConversationItem, ...]
    usage: Usage | None
    #: The wire it came in (``openai_chat``, ``openai_responses``, ``anthropic_messages``, ``items``).
    wire: str

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(i for i in self.items if isinstance(i, ToolCall))


def _int(usage: Mapping[str, Any], *path: str) -> int | None:
    value: Any = usage
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(wire: str, raw: Any) -> Usage | None:
    usage = plain(raw)
    if not isinstance(usage, Mapping):
        return None
    if wire in ("openai_chat", "openai_responses"):
        # OpenAI's input count holds the tokens its cache served and wrote.
        kind = "prompt" if wire == "openai_chat" else "input"
        details = f"{kind}_tokens_details"
        total = _int(usage, f"{kind}_tokens")
        cached, written = _int(usage, details, "cached_tokens"), _int(usage, details, "cache_write_tokens")
    else:
        # Anthropic counts its cache reads and writes apart from input_tokens (ADR 0020).
        fresh = _int(usage, "input_tokens")
        cached, written = _int(usage, "cache_read_input_tokens"), _int(usage, "cache_creation_input_tokens")
        total = None if fresh is None else fresh + (cached or 0) + (written or 0)
    return None if total is None else Usage(total, cached, written)


def _has_text(item: ConversationItem) -> bool:
    """An assistant message with nothing in it (a tool-calling turn's ``""``) is no history."""
    if not isinstance(item, AssistantMessage):
        return True
    content = item.content
    return (
        bool(content) if isinstance(content, str) else any(p.text for p in content if isinstance(p, TextPart))
    )


def read_reply(response: Any) -> Reply:
    """The items and usage of a provider response (``ConversionError`` names what does not read)."""
    if isinstance(response, _ITEMS):
        return Reply((response,), None, "items")
    if isinstance(response, Sequence) and not isinstance(response, str | bytes | Mapping):
        if all(isinstance(i, _ITEMS) for i in response):
            return Reply(tuple(response), None, "items")
    raw = plain(response)
    if not isinstance(raw, Mapping):
        raise ConversionError(
            "response", 0, "<response>", f"{type(response).__name__} is not a model response"
        )
    if "choices" in raw:
        wire = "openai_chat"
        choices = raw["choices"]
        if not isinstance(choices, list | tuple) or not choices:
            raise ConversionError(wire, 0, "choices", "expected at least one choice")
        choice = plain(choices[0])
        message = choice.get("message") if isinstance(choice, Mapping) else None
        if not isinstance(message, Mapping):
            raise ConversionError(wire, 0, "choices[0].message", "missing")
        items = openai_chat.to_items([message], first_seq=None)
    elif raw.get("object") == "response" or ("output" in raw and "role" not in raw):
        wire = "openai_responses"
        output = raw.get("output")
        if not isinstance(output, list | tuple):
            raise ConversionError(wire, 0, "output", "expected a list of output items")
        items = openai_responses.to_items(list(output), first_seq=None)
    elif raw.get("role") == "assistant" and "content" in raw:
        wire = "anthropic_messages"
        items = anthropic.to_items([{"role": "assistant", "content": raw["content"]}], first_seq=None)
    else:
        keys = sorted(str(k) for k in raw)[:8]
        raise ConversionError(
            "response", 0, "<response>", f"not a ChatCompletion, Response or Message (keys {keys})"
        )
    return Reply(tuple(i for i in items if _has_text(i)), _usage(wire, raw.get("usage")), wire)


def text_of(item: ConversationItem) -> str:
    """An item's text (its text parts joined), or ``""``."""
    content = getattr(item, "content", "")
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, TextPart))


__all__ = ["Reply", "Usage", "read_reply", "text_of", "user_message"]
