"""A provider request body as the units a prompt cache matches (ADR 0020): what
``core.prompt_cache`` takes.

A unit is what a provider's cache can keep or lose as a whole, in the order the provider
reads the request: for OpenAI Chat, the tool list (rendered ahead of the messages) and then
each message; for Anthropic Messages, each tool, each system block and each content block
of each message (the blocks its 20-block lookback counts), with the blocks that carry
``cache_control`` as the breakpoints. A unit's digest is the SHA-256 of its compact,
key-sorted JSON without its ``cache_control`` marker (a marker moves, the content stays the
same prefix); its tokens are that JSON counted by ``count`` (memoized by digest, so a
session's repeated units are counted once).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core import backends


@dataclass(frozen=True, slots=True)
class WireUnits:
    """One request: its units' token counts and digests in order, and Anthropic's breakpoints."""

    tokens: tuple[int, ...]
    digests: tuple[bytes, ...]
    breakpoints: tuple[int, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.tokens)


def o200k(text: str) -> int:
    """Tokens of ``text`` in ``o200k_base`` on the active backend."""
    return int(backends.active().count_tokens("o200k_base", text))


@dataclass(slots=True)
class UnitCounter:
    """Counts units, each distinct unit once."""

    count: Callable[[str], int] = o200k
    memo: dict[bytes, int] = field(default_factory=dict)

    def unit(self, value: Any) -> tuple[int, bytes]:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(text.encode()).digest()
        tokens = self.memo.get(digest)
        if tokens is None:
            tokens = self.memo[digest] = self.count(text)
        return tokens, digest

    def units(self, values: Iterator[tuple[Any, bool]]) -> WireUnits:
        tokens: list[int] = []
        digests: list[bytes] = []
        marks: list[int] = []
        for i, (value, mark) in enumerate(values):
            n, d = self.unit(value)
            tokens.append(n)
            digests.append(d)
            if mark:
                marks.append(i)
        return WireUnits(tuple(tokens), tuple(digests), tuple(marks))

    def openai_chat(self, body: dict[str, Any]) -> WireUnits:
        """A ``to_openai_chat`` body (or any Chat Completions body)."""
        return self.units(_chat(body))

    def anthropic(self, body: dict[str, Any]) -> WireUnits:
        """A ``to_anthropic_messages`` body (or any Messages body)."""
        return self.units(_anthropic(body))


def _chat(body: dict[str, Any]) -> Iterator[tuple[Any, bool]]:
    if body.get("tools"):
        yield {"tools": body["tools"]}, False
    for message in body["messages"]:
        yield message, False


def _unmarked(block: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    if "cache_control" not in block:
        return block, False
    return {k: v for k, v in block.items() if k != "cache_control"}, True


def _anthropic(body: dict[str, Any]) -> Iterator[tuple[Any, bool]]:
    for tool in body.get("tools") or ():
        value, mark = _unmarked(tool)
        yield {"tool": value}, mark
    system = body.get("system") or ()
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system:
        value, mark = _unmarked(block)
        yield {"system": value}, mark
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for i, block in enumerate(content):
            value, mark = _unmarked(block)
            # The role and where a message starts are part of the prefix, not only the blocks.
            yield {"role": message["role"], "start": i == 0, "block": value}, mark


__all__ = ["UnitCounter", "WireUnits", "o200k"]
