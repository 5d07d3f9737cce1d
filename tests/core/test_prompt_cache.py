"""The prompt-cache simulator (issue 39, ADR 0020): hand-computed cases for each rule, and
the invariant cached <= ceiling <= total under every rule."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.core.prompt_cache import PriceTable, PromptCacheSimulator, RequestCache, simulate
from ctxengine.errors import ArgumentError


def add(sim: PromptCacheSimulator, units: str, tokens: list[int], bps: tuple[int, ...] = ()) -> RequestCache:
    """A request whose units are the letters of ``units`` (one digest a letter)."""
    return sim.add(tokens, list(units), bps)


def test_the_shared_prefix_is_with_any_earlier_request_and_openai_counts_it_in_steps() -> None:
    sim = PromptCacheSimulator()
    first = add(sim, "ab", [600, 600])
    assert (first.shared, first.ceiling, first.openai) == (0, 0, 0)
    second = add(sim, "abc", [600, 600, 300])
    # 1,200 shared: at least 1,024, in 128-token steps -> 9 x 128.
    assert (second.total, second.shared, second.ceiling, second.openai) == (1_500, 1_200, 1_200, 1_152)
    third = add(sim, "ad", [600, 100])
    # 600 shared: below OpenAI's 1,024 -> nothing.
    assert (third.shared, third.ceiling, third.openai) == (600, 600, 0)
    fourth = add(sim, "abce", [600, 600, 300, 50])
    # The prefix it shares is with the second request, not the previous one (which held a only).
    assert (fourth.shared, fourth.ceiling, fourth.openai, fourth.previous) == (1_500, 1_500, 1_408, 600)


def test_the_ceiling_counts_units_seen_anywhere_before_not_only_the_prefix() -> None:
    sim = PromptCacheSimulator()
    add(sim, "abc", [100, 2_000, 300])
    # The first unit changed: nothing is a shared prefix, but b and c were seen.
    again = add(sim, "xbc", [100, 2_000, 300])
    assert (again.shared, again.openai, again.vllm, again.ceiling) == (0, 0, 0, 2_300)


def test_vllm_serves_full_blocks_and_never_the_last_token() -> None:
    sim = PromptCacheSimulator(vllm_block=256)
    add(sim, "ab", [600, 600])
    second = add(sim, "abc", [600, 600, 300])
    assert second.vllm == 1_024  # 1,200 // 256 = 4 blocks
    sim16 = PromptCacheSimulator()
    add(sim16, "ab", [600, 601])
    assert add(sim16, "abc", [600, 601, 10]).vllm == 1_200  # 1,201 // 16 = 75 blocks
    # The same request again: every token shared, but vLLM computes the last one.
    assert add(sim16, "abc", [600, 601, 10]).vllm == 1_200  # min(1,211, 1,210) // 16 = 75 blocks


def test_anthropic_reads_the_longest_entry_an_earlier_breakpoint_wrote() -> None:
    sim = PromptCacheSimulator()
    first = add(sim, "abc", [1_000, 200, 300], bps=(1,))
    # No entry yet: the request writes its prefix through the breakpoint (1,200 tokens).
    assert (first.anthropic_read, first.anthropic_write) == (0, 1_200)
    second = add(sim, "abcd", [1_000, 200, 300, 400], bps=(3,))
    # The breakpoint at d looks back: c is shared but has no entry, b has one -> 1,200 read;
    # it writes from there through d: 1,900 - 1,200.
    assert (second.anthropic_read, second.anthropic_write) == (1_200, 700)
    third = add(sim, "abcd", [1_000, 200, 300, 400], bps=(3,))
    assert (third.anthropic_read, third.anthropic_write) == (1_900, 0)
    # OpenAI on the same requests reads the whole shared prefix in steps.
    assert (second.openai, third.openai) == (1_408, 1_792)


def test_anthropic_looks_back_twenty_units_from_a_breakpoint() -> None:
    sim = PromptCacheSimulator()
    add(sim, "abcd", [1_000, 200, 300, 400], bps=(3,))  # an entry through d (1,900 tokens)
    tail = [f"t{i}" for i in range(20)]
    near = sim.add([1_000, 200, 300, 400, *[10] * 20], ["a", "b", "c", "d", *tail], [23])
    # d is 20 units before the breakpoint: within the lookback.
    assert (near.anthropic_read, near.anthropic_write) == (1_900, 200)
    sim = PromptCacheSimulator()
    add(sim, "abcd", [1_000, 200, 300, 400], bps=(3,))
    tail = [f"u{i}" for i in range(21)]
    far = sim.add([1_000, 200, 300, 400, *[10] * 21], ["a", "b", "c", "d", *tail], [24])
    # 21 units back: missed, although the prefix is shared; the whole prefix is written again.
    assert (far.anthropic_read, far.anthropic_write, far.shared) == (0, 2_110, 1_900)
    # A second breakpoint nearer the entry finds it.
    sim = PromptCacheSimulator()
    add(sim, "abcd", [1_000, 200, 300, 400], bps=(3,))
    both = sim.add([1_000, 200, 300, 400, *[10] * 21], ["a", "b", "c", "d", *tail], [3, 24])
    assert (both.anthropic_read, both.anthropic_write) == (1_900, 210)


def test_anthropic_writes_no_entry_below_its_minimum_and_nothing_without_breakpoints() -> None:
    sim = PromptCacheSimulator()
    short = add(sim, "ab", [500, 700], bps=(0,))
    assert (short.anthropic_read, short.anthropic_write) == (0, 0)
    again = add(sim, "ab", [500, 700], bps=(0, 1))
    # No entry at a (too short to cache), one written at b.
    assert (again.anthropic_read, again.anthropic_write) == (0, 1_200)
    bare = add(sim, "ab", [500, 700])
    assert (bare.anthropic_read, bare.anthropic_write, bare.openai) == (0, 0, 1_152)


def test_a_changed_unit_ends_the_prefix() -> None:
    sim = PromptCacheSimulator()
    add(sim, "abcd", [1_000, 200, 300, 400], bps=(3,))
    changed = add(sim, "abXd", [1_000, 200, 300, 400], bps=(3,))
    assert (changed.shared, changed.anthropic_read, changed.anthropic_write) == (1_200, 0, 1_900)
    assert changed.ceiling == 1_600  # a, b and d were seen


def test_simulate_is_add_in_order() -> None:
    requests: list[tuple[list[int], list[Any], tuple[int, ...]]] = [
        ([600, 600], ["a", "b"], (1,)),
        ([600, 600, 300], ["a", "b", "c"], (2,)),
    ]
    sim = PromptCacheSimulator(vllm_block=64)
    assert simulate(requests, vllm_block=64) == [sim.add(*r) for r in requests]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda s: s.add([1, 2], ["a"]), "digests"),
        (lambda s: s.add([1, -2], ["a", "b"]), "tokens[1]"),
        (lambda s: s.add([1, True], ["a", "b"]), "tokens[1]"),
        (lambda s: s.add([1, 2], ["a", "b"], [2]), "breakpoints"),
        (lambda s: s.add([1] * 6, list("abcdef"), [0, 1, 2, 3, 4]), "breakpoints"),
    ],
)
def test_bad_requests_name_the_argument(call: Any, named: str) -> None:
    with pytest.raises(ArgumentError) as err:
        call(PromptCacheSimulator())
    assert err.value.argument == named


@pytest.mark.parametrize("rule", ["openai_step", "vllm_block"])
def test_a_step_of_zero_is_refused(rule: str) -> None:
    with pytest.raises(ArgumentError) as err:
        PromptCacheSimulator(**{rule: 0})
    assert err.value.argument == rule


def test_prices() -> None:
    prices = PriceTable()
    assert prices.cost(1_000) == 1_000
    assert prices.cost(1_000, cached_read=800) == pytest.approx(200 + 80)
    assert prices.cost(1_000, cached_read=500, cache_write=400) == pytest.approx(100 + 50 + 500)
    assert PriceTable(input=2.5e-6, cached_read=0.5).cost(1_000, 1_000) == pytest.approx(1.25e-3)
    for bad in ({"input": -1}, {"cached_read": float("nan")}, {"cache_write": "1"}, {"input": True}):
        with pytest.raises(ArgumentError):
            PriceTable(**bad)  # type: ignore[arg-type]


# A session: each request starts from an earlier one (usually the previous), keeps a prefix
# of it and appends new units; digests from a small alphabet so units repeat.
edit = st.tuples(
    st.integers(0, 10),  # which earlier request (counted back from the newest)
    st.integers(0, 40),  # how many of its units to keep
    st.lists(st.tuples(st.integers(0, 2_000), st.sampled_from("abcdefgh")), max_size=12),
    st.lists(st.integers(0, 60), max_size=5),
)


@settings(max_examples=200, deadline=None)
@given(
    edits=st.lists(edit, min_size=1, max_size=25),
    lookback=st.integers(0, 25),
    block=st.integers(1, 300),
    step=st.integers(1, 300),
    minimum=st.integers(0, 3_000),
)
def test_every_rule_stays_under_the_ceiling(
    edits: list[Any], lookback: int, block: int, step: int, minimum: int
) -> None:
    sim = PromptCacheSimulator(
        anthropic_lookback=lookback,
        vllm_block=block,
        openai_step=step,
        openai_min=minimum,
        anthropic_min=minimum,
    )
    history: list[list[tuple[int, str]]] = [[]]
    for back, keep, new, marks in edits:
        base = history[max(0, len(history) - 1 - back)]
        units = base[:keep] + new
        bps = sorted({m for m in marks if m < len(units)})[:4]
        got = sim.add([n for n, _ in units], [d for _, d in units], bps)
        total = sum(n for n, _ in units)
        assert got.total == total
        assert 0 <= got.shared <= got.ceiling <= total
        assert 0 <= got.previous <= got.ceiling
        for cached in (got.openai, got.vllm, got.anthropic_read):
            assert 0 <= cached <= got.shared
        assert got.vllm <= max(0, total - 1)
        assert got.anthropic_read + got.anthropic_write <= total
        history.append(units)
