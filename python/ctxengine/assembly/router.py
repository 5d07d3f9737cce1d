"""The model router port (issue 43, ADR 0026): an async callable that sends a ``ModelRequest``
to a model and returns what it answered.

The engine never calls a model for an agent's step (the application does); the one request
it sends itself is a compaction's (``runtime.model_compactor.ModelCompactor``). The
adapters for the official OpenAI and Anthropic async clients are in
``ctxengine.providers.routers``; a test or a demo passes any async function.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..errors import ModelValidationError
from .request import ModelRequest


def _count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ModelValidationError("RouterReply", name, f"expected an int >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class RouterReply:
    """A model's answer: its text and the tokens the provider counted for the call
    (``input_tokens``: every input token, cached ones included)."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ModelValidationError(
                "RouterReply", "text", f"expected a str, got {type(self.text).__name__}"
            )
        _count("input_tokens", self.input_tokens)
        _count("output_tokens", self.output_tokens)


#: An async callable from a request to the model's reply.
Router = Callable[[ModelRequest], Awaitable[RouterReply]]

__all__ = ["Router", "RouterReply"]
