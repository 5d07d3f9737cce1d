"""Budget arithmetic (``allocate_tokens``) under both backends: the ADR 0001 formula,
the three ``ContextOverflow`` cases in their order, and Rust == reference."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxengine.core import backends
from ctxengine.errors import ContextOverflow, PolicyError


class Args(NamedTuple):
    context_window: int = 200_000
    max_output_tokens: int = 64_000
    default_output_reserve: int = 16_000
    prefix_tokens: int = 10_000
    reserve_tokens: int = 8192
    margin_ratio: float = 0.05
    tool_results_ratio: float = 0.25
    working_state_tokens: int = 1000
    history_floor: int = 8000
    prefix_ceiling: int = 15_000


def allocate(args: Args) -> tuple[int, int, int, int, int]:
    result: tuple[int, int, int, int, int] = backends.active().allocate_tokens(*args)
    return result


def formula(args: Args) -> tuple[int, int, int, int, int] | tuple[str, int, int]:
    """ADR 0001, written out independently: a result, or the overflow it must raise."""
    if args.prefix_tokens > args.prefix_ceiling:
        return ("prefix", args.prefix_tokens, args.prefix_ceiling)
    reserve = min(args.reserve_tokens, args.default_output_reserve, args.max_output_tokens)
    body = args.context_window - reserve - args.prefix_tokens
    if body <= 0:
        return ("context_window", reserve + args.prefix_tokens, args.context_window)
    usable = body - math.floor(float(body) * args.margin_ratio)
    tool_results = math.floor(float(usable) * args.tool_results_ratio)
    history = usable - args.working_state_tokens - tool_results
    if history < args.history_floor:
        return ("history", history, args.history_floor)
    return (reserve, body, usable, tool_results, history)


def overflow(args: Args) -> tuple[str, int, int]:
    with pytest.raises(ContextOverflow) as info:
        allocate(args)
    return info.value.budget_class, info.value.tokens, info.value.cap


def test_worked_example(backend: str) -> None:
    # reserve = min(8192, 16000, 64000); body = 200000 - 8192 - 10000 = 181808
    # usable = 181808 - floor(9090.4) = 172718; tool = floor(43179.5) = 43179
    # history = 172718 - 1000 - 43179 = 128539
    assert allocate(Args()) == (8192, 181808, 172718, 43179, 128539)


def test_reserve_is_the_smallest_of_three(backend: str) -> None:
    assert allocate(Args(reserve_tokens=9000, default_output_reserve=4000))[0] == 4000
    assert allocate(Args(reserve_tokens=9000, max_output_tokens=2048))[0] == 2048
    assert allocate(Args(reserve_tokens=100))[0] == 100


def test_ratios_floor(backend: str) -> None:
    # body 1000: margin floor(1000 * 0.333) = 333; usable 667; tool floor(667 * 0.5) = 333
    args = Args(
        context_window=1100,
        prefix_tokens=0,
        reserve_tokens=100,
        margin_ratio=0.333,
        tool_results_ratio=0.5,
        working_state_tokens=10,
        history_floor=0,
    )
    assert allocate(args) == (100, 1000, 667, 333, 324)
    zero = args._replace(margin_ratio=0.0, tool_results_ratio=0.0)
    assert allocate(zero) == (100, 1000, 1000, 0, 990)


def test_prefix_over_ceiling(backend: str) -> None:
    assert overflow(Args(prefix_tokens=15_001)) == ("prefix", 15_001, 15_000)
    assert allocate(Args(prefix_tokens=15_000))[1] == 200_000 - 8192 - 15_000


def test_prefix_check_comes_first(backend: str) -> None:
    # the window is also too small, but the prefix ceiling is checked first
    assert overflow(Args(context_window=100, prefix_tokens=20_000)) == ("prefix", 20_000, 15_000)


def test_no_room_for_a_body(backend: str) -> None:
    # body == 0 fails: reserve 8192 + prefix 10000 fill the window exactly
    assert overflow(Args(context_window=18_192)) == ("context_window", 18_192, 18_192)
    assert overflow(Args(context_window=5000)) == ("context_window", 18_192, 5000)


def test_window_check_comes_before_history(backend: str) -> None:
    assert overflow(Args(context_window=18_000, history_floor=10**9)) == ("context_window", 18_192, 18_000)


def test_history_below_floor(backend: str) -> None:
    # body 1, usable 1, tool 0, history 1 - 1000 = -999
    assert overflow(Args(context_window=18_193)) == ("history", -999, 8000)
    assert overflow(Args(history_floor=128_540)) == ("history", 128_539, 128_540)
    # exactly at the floor is fine
    assert allocate(Args(history_floor=128_539))[4] == 128_539


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"margin_ratio": float("nan")}, "margin_ratio"),
        ({"margin_ratio": float("inf")}, "margin_ratio"),
        ({"tool_results_ratio": float("nan")}, "tool_results_ratio"),
        ({"tool_results_ratio": float("-inf")}, "tool_results_ratio"),
    ],
)
def test_non_finite_ratio_is_a_policy_error(backend: str, changes: dict[str, float], key: str) -> None:
    with pytest.raises(PolicyError) as info:
        allocate(Args()._replace(**changes))
    assert info.value.key == key


def test_token_counts_must_be_ints(backend: str) -> None:
    with pytest.raises(TypeError):
        allocate(Args(context_window=200_000.0))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        allocate(Args(prefix_tokens="10"))  # type: ignore[arg-type]


FIXTURE_OK = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

ratios = st.one_of(
    st.floats(0.0, 0.99, allow_nan=False),
    st.sampled_from((0.0, 0.05, 0.1, 0.25, 0.333, 1 / 3, 0.5, 0.7)),
)
args_strategy = st.builds(
    Args,
    context_window=st.integers(1, 2_000_000),
    max_output_tokens=st.integers(1, 200_000),
    default_output_reserve=st.integers(1, 200_000),
    prefix_tokens=st.integers(0, 40_000),
    reserve_tokens=st.integers(0, 200_000),
    margin_ratio=ratios,
    tool_results_ratio=ratios,
    working_state_tokens=st.integers(0, 5000),
    history_floor=st.integers(0, 20_000),
    prefix_ceiling=st.integers(0, 40_000),
)


@FIXTURE_OK
@given(args=args_strategy)
def test_matches_formula(backend: str, args: Args) -> None:
    expected = formula(args)
    if isinstance(expected[0], str):
        assert overflow(args) == expected
    else:
        assert allocate(args) == expected


@settings(max_examples=200, deadline=None)
@given(args=args_strategy)
def test_differential_allocate(args: Args) -> None:
    outcomes: list[Any] = []
    for name in ("rust", "python"):
        try:
            outcomes.append(backends.module(name).allocate_tokens(*args))
        except ContextOverflow as error:
            outcomes.append((type(error), error.budget_class, error.tokens, error.cap))
    assert outcomes[0] == outcomes[1]
    for outcome in outcomes:
        if not isinstance(outcome[0], type):  # a result, not an overflow
            assert all(type(x) is int for x in outcome)
