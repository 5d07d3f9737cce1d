"""``core.prompt_cache``'s rules over a session's rebuilt requests, from their layout rather
than their units (issue 42's fast path).

A request of the fast path is laid out as the prefix (one unit: ``prefix_tokens``, the
plan's Anthropic breakpoint), the summary's blocks, the history's items ``a..u`` (each item a
unit keyed by its index, a truncated tool result by its pointer), the per-turn blocks and
the turn's units. Within a session the history only grows until a compaction moves its
start forward, a summary only changes at a compaction, and the turn of a run only grows
(its cleared set too), so the longest prefix a request shares with any earlier request of
the session is the one it shares with the request just before (the simulator's prefix tree
finds no longer one), and the units it shares with that request were all seen. So a request
costs its new units, not all of them; ``tests/replay/test_fast_cache.py`` holds every
figure to ``PromptCacheSimulator`` over the same requests' units.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ..core.prompt_cache import (
    ANTHROPIC_MIN_TOKENS,
    OPENAI_MIN_TOKENS,
    OPENAI_STEP_TOKENS,
    VLLM_BLOCK_TOKENS,
    RequestCache,
)


@dataclass(slots=True)
class Layout:
    """One request's units by part (see the module)."""

    summary: tuple[Hashable, ...]
    summary_tokens: tuple[int, ...]
    #: The history's first and end item index.
    a: int
    u: int
    #: Tokens of the history items ``a..u`` as shown.
    history: int
    #: The truncated results among ``a..u`` (shown as pointers), in order.
    pointers: tuple[int, ...]
    turn: tuple[Hashable, ...]
    turn_tokens: tuple[int, ...]


class SessionCache:
    """The cache figures of one session's requests under one configuration, in order."""

    def __init__(
        self,
        prefix_tokens: int,
        blocks: Sequence[Hashable],
        block_tokens: Sequence[int],
        raws: Sequence[int],
        prefix_sums: Sequence[int],
        pointer_raw: dict[int, int],
    ) -> None:
        self.prefix = prefix_tokens
        self.blocks = tuple(blocks)
        self.block_list = list(block_tokens)
        self.block_tokens = sum(block_tokens)
        self.raws = raws
        self.sums = prefix_sums
        self.pointer_raw = pointer_raw
        self.prev: Layout | None = None
        self.seen: set[Hashable] = set()

    def _history_tokens(self, a: int, b: int, pointers: Sequence[int]) -> int:
        n = self.sums[b] - self.sums[a]
        for i in pointers:
            if a <= i < b:
                n += self.pointer_raw[i] - self.raws[i]
        return n

    def add(self, r: Layout) -> RequestCache:
        prev, seen = self.prev, self.seen
        first = prev is None
        summary_total, turn_total = sum(r.summary_tokens), sum(r.turn_tokens)
        total = self.prefix + summary_total + r.history + self.block_tokens + turn_total
        # The shared prefix: the prefix unit, then part by part while equal to the last request's.
        shared = 0
        if prev is not None:
            shared = self.prefix
            k = _common(prev.summary, r.summary)
            shared += summary_total if k == len(r.summary) else sum(r.summary_tokens[:k])
            if k == len(r.summary) == len(prev.summary) and prev.a == r.a:
                end = min(prev.u, r.u)
                diff = _first_pointer_change(prev.pointers, r.pointers, r.a, end)
                shared += self._history_tokens(r.a, diff, r.pointers)
                if diff == end and prev.u == r.u:
                    shared += self.block_tokens
                    k = _common(prev.turn, r.turn)
                    shared += turn_total if k == len(r.turn) else sum(r.turn_tokens[:k])
        # The ceiling: every unit an earlier request held.
        ceiling = 0 if first else self.prefix + (self.block_tokens if self.blocks else 0)
        for key, n in zip(r.summary, r.summary_tokens, strict=True):
            if key in seen:
                ceiling += n
        new_history: list[Hashable] = []
        start = r.a
        if prev is not None and prev.a <= r.a and prev.summary == r.summary:
            end = min(prev.u, r.u)
            changed = (
                set(prev.pointers).symmetric_difference(r.pointers) if prev.pointers != r.pointers else ()
            )
            ceiling += self._history_tokens(r.a, end, r.pointers)
            for i in changed:
                if r.a <= i < end:  # shown otherwise than last time: seen only if seen before
                    key = -1 - i if i in r.pointers else i
                    n = self.pointer_raw[i] if i in r.pointers else self.raws[i]
                    ceiling -= 0 if key in seen else n
                    new_history.append(key)
            start = end
        if r.pointers:
            pointers = set(r.pointers)
            for i in range(start, r.u):
                key = -1 - i if i in pointers else i
                if key in seen:
                    ceiling += self.pointer_raw[i] if i in pointers else self.raws[i]
                new_history.append(key)
        else:
            raws = self.raws
            for i in range(start, r.u):
                if i in seen:
                    ceiling += raws[i]
                new_history.append(i)
        for key, n in zip(r.turn, r.turn_tokens, strict=True):
            if key in seen:
                ceiling += n
        if first:
            seen.add(_PREFIX)
            seen.update(self.blocks)
        seen.update(r.summary)
        seen.update(new_history)
        seen.update(r.turn)
        self.prev = r
        # The rules: Anthropic's one breakpoint is on the prefix unit.
        written = self.prefix >= ANTHROPIC_MIN_TOKENS
        read = self.prefix if written and not first else 0
        write = self.prefix if written and first else 0
        openai = shared // OPENAI_STEP_TOKENS * OPENAI_STEP_TOKENS if shared >= OPENAI_MIN_TOKENS else 0
        vllm = min(shared, total - 1) // VLLM_BLOCK_TOKENS * VLLM_BLOCK_TOKENS if total else 0
        return RequestCache(total, shared, ceiling, openai, read, write, vllm, 0)

    def units(self, r: Layout) -> tuple[list[int], list[Hashable], list[int]]:
        """The request's units in order (what ``PromptCacheSimulator`` takes; for tests)."""
        pointers = set(r.pointers)
        keys: list[Hashable] = [_PREFIX, *r.summary]
        tokens = [self.prefix, *r.summary_tokens]
        for i in range(r.a, r.u):
            keys.append(-1 - i if i in pointers else i)
            tokens.append(self.pointer_raw[i] if i in pointers else self.raws[i])
        keys += self.blocks
        tokens += self.block_list
        keys += r.turn
        tokens += r.turn_tokens
        return tokens, keys, [0]


_PREFIX = ("prefix",)


def _common(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    if a is b:
        return len(a)
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _first_pointer_change(a: Sequence[int], b: Sequence[int], lo: int, hi: int) -> int:
    """The first history index in ``lo..hi`` shown otherwise in the two requests."""
    if a == b:
        return hi
    changed = [i for i in set(a).symmetric_difference(b) if lo <= i < hi]
    return min(changed) if changed else hi


__all__ = ["Layout", "SessionCache"]
