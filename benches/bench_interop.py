"""Issue 15: ``trim_messages`` against LangChain's on 1k / 10k / 100k messages (warm and cold),
and 10,000 OpenAI Chat dicts -> the cut index, cold, conversion included.

Targets (reported, never asserted on time): at 10,000 messages ours >= 20x LangChain warm and
>= 5x cold; the chat cut <= 10 ms on the Rust backend.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ctxengine.cli.bench_interop import (
    CHAT_HISTORY_TOKENS,
    CHAT_MODEL,
    TRIM_SIZES,
    chat_cut,
    chat_session,
    langchain_session,
    ours,
    synthetic_session,
    theirs,
    trim_options,
)
from ctxengine.interop import _backend as backends

pytest.importorskip("langchain_core")

IMPLS = {"ctxengine": ours, "langchain": theirs}


@pytest.fixture(scope="module")
def sessions() -> dict[int, list[Any]]:
    return {}


def session(cache: dict[int, list[Any]], n: int) -> list[Any]:
    if n not in cache:
        cache[n] = langchain_session(n, tag=f"bench-{n}")
    return cache[n]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", TRIM_SIZES)
def bench_trim_messages_warm(benchmark: Any, impl: str, n: int, sessions: dict[int, list[Any]]) -> None:
    from langchain_core.messages import HumanMessage

    base = session(sessions, n)
    messages, opts, trim = list(base), trim_options(base), IMPLS[impl]()
    trim(messages, **opts)
    counter = itertools.count()

    def step() -> list[Any]:
        messages.append(HumanMessage(f"and one more thing ({next(counter)})"))
        return trim(messages, **opts)

    kept = benchmark(step)
    assert kept and kept[-1] is messages[-1]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", TRIM_SIZES)
def bench_trim_messages_cold(benchmark: Any, impl: str, n: int, sessions: dict[int, list[Any]]) -> None:
    opts, trim = trim_options(session(sessions, n)), IMPLS[impl]()
    fresh = itertools.count()

    def setup() -> tuple[tuple[list[Any]], dict[str, Any]]:
        return (langchain_session(n, tag=f"cold-{impl}-{n}-{next(fresh)}"),), opts

    kept = benchmark.pedantic(trim, setup=setup, rounds=5 if n < 100_000 else 3)
    assert kept


@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_openai_chat_cut_cold_10k(benchmark: Any, name: str) -> None:
    fresh = itertools.count()
    previous = backends.active_name()
    backends.use(name)
    try:

        def setup() -> tuple[tuple[list[dict[str, Any]], Any], dict[str, Any]]:
            dicts = chat_session(10_000, tag=f"chat-{name}-{next(fresh)}")
            return (dicts, backends.module(name).TokenEstimator()), {}

        cut = benchmark.pedantic(chat_cut, setup=setup, rounds=15 if name == "rust" else 3)
    finally:
        backends.use(previous)
    assert 0 < cut < 10_000


@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_item_dicts_cut_cold_10k(benchmark: Any, name: str) -> None:
    """A history kept as the items' dict forms, cut without decoding (reference: decode, then cut)."""
    from ctxengine.interop import mappings

    fresh = itertools.count()
    previous = backends.active_name()
    backends.use(name)
    try:

        def setup() -> tuple[tuple[list[dict[str, Any]], int, int, Any, str], dict[str, Any]]:
            dicts = mappings.from_items(synthetic_session(10_000, tag=f"dicts-{name}-{next(fresh)}"))
            return (dicts, 0, CHAT_HISTORY_TOKENS, backends.module(name).TokenEstimator(), CHAT_MODEL), {}

        cut = benchmark.pedantic(mappings.select_history, setup=setup, rounds=15 if name == "rust" else 3)
    finally:
        backends.use(previous)
    assert 0 < cut < 10_000
