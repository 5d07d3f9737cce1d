"""What a provider's prompt cache would serve of a session's requests, and what that costs
(ADR 0020).

Plain data in, plain data out: a session's requests in order, each as its rendered units
(wire messages or content blocks, the prefix included) with a token count and a digest
per unit, and, for Anthropic, the units that carry ``cache_control``. Nothing here
renders, counts or reads a store, so the bench and the replay of recorded sessions use
the same rules.

The **shared prefix** of a request is the tokens of its units up to the first unit that
differs from every earlier request of the session (the longest prefix it shares with any
of them; one unit is one unit: a provider that matches inside the first differing unit
would serve a little more). Each provider's rule applies to it:

- **OpenAI** (automatic prefix caching): nothing below ``openai_min`` (1,024) tokens,
  then whole ``openai_step`` (128) token steps.
- **Anthropic** (explicit breakpoints): a request writes a cache entry at each unit that
  carries ``cache_control`` (when the prefix through it holds ``anthropic_min`` tokens);
  a read hits the longest entry an earlier request wrote whose prefix this request still
  shares, looked for at each breakpoint and the ``anthropic_lookback`` (20) units before
  it; the request's cache write is its tokens from the end of that read through its last
  breakpoint (none when that entry already existed).
- **vLLM** (automatic prefix caching in blocks): the full ``vllm_block``-token blocks of
  the shared prefix, never the request's last token (vLLM always computes one).

The **ceiling** is every token of the request whose unit was in an earlier request of the
session: no prefix rule can serve more, so ``cached <= ceiling <= total`` for each rule.
``previous`` counts only the units of the request just before (issue 39's first wording of
the ceiling); a rule can exceed it when a request shares more with an older one.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from ..errors import ArgumentError

#: OpenAI: prefixes from 1,024 tokens, in 128-token steps.
OPENAI_MIN_TOKENS = 1_024
OPENAI_STEP_TOKENS = 128
#: Anthropic: how many units before a breakpoint a read looks for an earlier entry.
ANTHROPIC_LOOKBACK = 20
#: Anthropic: the shortest prefix it caches (model-dependent: 1,024 to 4,096 tokens).
ANTHROPIC_MIN_TOKENS = 1_024
#: Anthropic: breakpoints a request may carry.
ANTHROPIC_MAX_BREAKPOINTS = 4
#: vLLM's default KV-cache block size.
VLLM_BLOCK_TOKENS = 16


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Input prices for an effective cost: ``input`` per uncached token, and the cached
    read and the cache write as multiples of it (defaults: Anthropic's 0.1x and 1.25x; an
    OpenAI request reports no writes). The unit of ``input`` is the caller's: with the
    default 1.0 a cost reads as input-token equivalents."""

    input: float = 1.0
    cached_read: float = 0.1
    cache_write: float = 1.25

    def __post_init__(self) -> None:
        for name in ("input", "cached_read", "cache_write"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ArgumentError("PriceTable", name, f"expected a finite number, got {value!r}")
            if value < 0:
                raise ArgumentError("PriceTable", name, f"expected a price >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))

    def cost(self, total: int, cached_read: int = 0, cache_write: int = 0) -> float:
        """The price of ``total`` input tokens of which ``cached_read`` were served from the
        cache and ``cache_write`` written to it."""
        uncached = total - cached_read - cache_write
        return self.input * (uncached + self.cached_read * cached_read + self.cache_write * cache_write)


@dataclass(frozen=True, slots=True)
class RequestCache:
    """One request under every rule (tokens)."""

    total: int
    #: Tokens of the longest prefix shared with an earlier request of the session.
    shared: int
    #: Tokens of units that were in an earlier request: what any cache could serve at most.
    ceiling: int
    openai: int
    anthropic_read: int
    anthropic_write: int
    vllm: int
    #: Tokens of units that were in the request just before.
    previous: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "shared": self.shared,
            "ceiling": self.ceiling,
            "previous": self.previous,
            "openai": self.openai,
            "anthropic_read": self.anthropic_read,
            "anthropic_write": self.anthropic_write,
            "vllm": self.vllm,
        }


class _Node:
    """One prefix of units seen in the session; ``entry``: Anthropic wrote a cache entry here."""

    __slots__ = ("children", "entry")

    def __init__(self) -> None:
        self.children: dict[Hashable, _Node] = {}
        self.entry = False


class PromptCacheSimulator:
    """One session's requests, in order: ``add`` each and read what every rule caches of it."""

    def __init__(
        self,
        *,
        openai_min: int = OPENAI_MIN_TOKENS,
        openai_step: int = OPENAI_STEP_TOKENS,
        anthropic_lookback: int = ANTHROPIC_LOOKBACK,
        anthropic_min: int = ANTHROPIC_MIN_TOKENS,
        vllm_block: int = VLLM_BLOCK_TOKENS,
    ) -> None:
        for name, value, low in (
            ("openai_min", openai_min, 0),
            ("openai_step", openai_step, 1),
            ("anthropic_lookback", anthropic_lookback, 0),
            ("anthropic_min", anthropic_min, 0),
            ("vllm_block", vllm_block, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ArgumentError("PromptCacheSimulator", name, f"expected an int >= {low}, got {value!r}")
        self.openai_min = openai_min
        self.openai_step = openai_step
        self.anthropic_lookback = anthropic_lookback
        self.anthropic_min = anthropic_min
        self.vllm_block = vllm_block
        self._root = _Node()
        self._seen: set[Hashable] = set()
        self._previous: frozenset[Hashable] = frozenset()

    def add(
        self, tokens: Sequence[int], digests: Sequence[Hashable], breakpoints: Iterable[int] = ()
    ) -> RequestCache:
        """The next request: its units' token counts and digests in request order, and the
        indices of the units that carry Anthropic's ``cache_control``."""
        if len(tokens) != len(digests):
            raise ArgumentError(
                "PromptCacheSimulator.add", "digests", f"{len(digests)} digests for {len(tokens)} units"
            )
        for i, n in enumerate(tokens):
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ArgumentError(
                    "PromptCacheSimulator.add", f"tokens[{i}]", f"expected an int >= 0, got {n!r}"
                )
        marks = sorted(set(breakpoints))
        if len(marks) > ANTHROPIC_MAX_BREAKPOINTS:
            raise ArgumentError(
                "PromptCacheSimulator.add",
                "breakpoints",
                f"{len(marks)} breakpoints; a request carries at most {ANTHROPIC_MAX_BREAKPOINTS}",
            )
        for b in marks:
            if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < len(tokens):
                raise ArgumentError("PromptCacheSimulator.add", "breakpoints", f"{b!r} is not a unit index")
        # Cumulative tokens through each unit, and the session's prefix tree along the request.
        through: list[int] = []
        running = 0
        for n in tokens:
            running += n
            through.append(running)
        total = running
        nodes: list[_Node] = []
        node = self._root
        for digest in digests:
            child = node.children.get(digest)
            if child is None:
                break
            nodes.append(child)
            node = child
        shared_units = len(nodes)
        shared = through[shared_units - 1] if shared_units else 0
        ceiling = sum(n for n, d in zip(tokens, digests, strict=True) if d in self._seen)
        previous = sum(n for n, d in zip(tokens, digests, strict=True) if d in self._previous)
        read, write = self._anthropic(marks, nodes, through)
        # Extend the tree with the rest of the request, then mark this request's entries.
        for digest in digests[shared_units:]:
            child = _Node()
            node.children[digest] = child
            nodes.append(child)
            node = child
        for b in marks:
            if through[b] >= self.anthropic_min:
                nodes[b].entry = True
        self._seen.update(digests)
        self._previous = frozenset(digests)
        openai = shared // self.openai_step * self.openai_step if shared >= self.openai_min else 0
        vllm = min(shared, total - 1) // self.vllm_block * self.vllm_block if total else 0
        return RequestCache(total, shared, ceiling, openai, read, write, vllm, previous)

    def _anthropic(self, marks: list[int], shared: list[_Node], through: list[int]) -> tuple[int, int]:
        """Anthropic's read (the longest earlier entry within a breakpoint's lookback) and write."""
        read_at = -1
        for b in marks:
            for j in range(min(b, len(shared) - 1), max(-1, b - self.anthropic_lookback - 1), -1):
                if shared[j].entry:
                    read_at = max(read_at, j)
                    break
        read = through[read_at] if read_at >= 0 else 0
        written = [b for b in marks if through[b] >= self.anthropic_min]
        if not written or written[-1] <= read_at:
            return read, 0
        return read, through[written[-1]] - read


def simulate(
    requests: Iterable[tuple[Sequence[int], Sequence[Hashable], Iterable[int]]], **rules: int
) -> list[RequestCache]:
    """``PromptCacheSimulator(**rules).add`` over a session's requests in order."""
    sim = PromptCacheSimulator(**rules)
    return [sim.add(tokens, digests, breakpoints) for tokens, digests, breakpoints in requests]


__all__ = [
    "ANTHROPIC_LOOKBACK",
    "ANTHROPIC_MAX_BREAKPOINTS",
    "ANTHROPIC_MIN_TOKENS",
    "OPENAI_MIN_TOKENS",
    "OPENAI_STEP_TOKENS",
    "VLLM_BLOCK_TOKENS",
    "PriceTable",
    "PromptCacheSimulator",
    "RequestCache",
    "simulate",
]
