"""Routers (``assembly.router``) over the official async clients: ``openai.AsyncOpenAI``
(Chat Completions) and ``anthropic.AsyncAnthropic`` (Messages). Each renders the request
with this package's renderer, sends it with the client, and reads the text and usage back;
the client is the caller's (its key, base URL, retries and timeouts). Neither SDK is
imported here: the client is passed in.
"""

from __future__ import annotations

from typing import Any

from ..assembly.request import ModelRequest
from ..assembly.router import RouterReply
from ..errors import ConversionError
from .anthropic import to_anthropic_messages
from .openai import to_openai_chat


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class OpenAIRouter:
    """``await router(request)``: one Chat Completions call through ``client``."""

    def __init__(self, client: Any, *, model: str) -> None:
        self.client = client
        self.model = model
        self.model_id = f"openai:{model}"

    async def __call__(self, request: ModelRequest) -> RouterReply:
        response = await self.client.chat.completions.create(**to_openai_chat(request, model=self.model))
        choices = _field(response, "choices") or ()
        if not choices:
            raise ConversionError("openai_chat", 0, "choices", "expected at least one choice")
        text = _field(_field(choices[0], "message"), "content")
        usage = _field(response, "usage")
        return RouterReply(
            text if isinstance(text, str) else "",
            _count(_field(usage, "prompt_tokens")),
            _count(_field(usage, "completion_tokens")),
        )


class AnthropicRouter:
    """``await router(request)``: one Messages call through ``client``."""

    def __init__(self, client: Any, *, model: str) -> None:
        self.client = client
        self.model = model
        self.model_id = f"anthropic:{model}"

    async def __call__(self, request: ModelRequest) -> RouterReply:
        response = await self.client.messages.create(**to_anthropic_messages(request, model=self.model))
        blocks = _field(response, "content") or ()
        text = "".join(
            str(_field(block, "text") or "") for block in blocks if _field(block, "type") == "text"
        )
        usage = _field(response, "usage")
        # Anthropic counts cache reads and writes apart from input_tokens (ADR 0020).
        read = sum(
            _count(_field(usage, name))
            for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        return RouterReply(text, read, _count(_field(usage, "output_tokens")))


def openai_router(client: Any, *, model: str) -> OpenAIRouter:
    """A router over an ``openai.AsyncOpenAI`` client (Chat Completions)."""
    return OpenAIRouter(client, model=model)


def anthropic_router(client: Any, *, model: str) -> AnthropicRouter:
    """A router over an ``anthropic.AsyncAnthropic`` client (Messages)."""
    return AnthropicRouter(client, model=model)


__all__ = ["AnthropicRouter", "OpenAIRouter", "anthropic_router", "openai_router"]
