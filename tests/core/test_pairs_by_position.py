"""Issue 39, "pairs checked at the door" (ADR 0019): tool pairs pair by position. A result
answers the nearest earlier open call with its id, so a call id may be reused once its
earlier pair is complete (real agents do), never while that call is open. Both backends
agree, on validation, the cut and the body fit, on histories that reuse ids."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine
from ctxengine.core import backends
from ctxengine.errors import OrphanedToolPair
from ctxengine.model import AssistantMessage, ToolCall, ToolResult, UserMessage
from strategies import reconciles, sessions

MODEL = "m:a"
FIXTURE_OK = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def reused(n: int = 4) -> list[Any]:
    """One id used ``n`` times in a row, each pair complete before the next (the SWE-agent
    demonstration's shape)."""
    out: list[Any] = [UserMessage("fix the bug", seq=1)]
    for k in range(n):
        out += [
            ToolCall("call_0", "bash", {"cmd": f"step {k}"}, seq=2 + 3 * k),
            ToolResult("call_0", f"output {k}", seq=3 + 3 * k),
            AssistantMessage(f"next {k}", seq=4 + 3 * k),
        ]
    return out


def oracle_ends(items: list[Any]) -> dict[int, int] | None:
    """Brute force: each result answers the nearest earlier call with its id that has no
    result yet, provided no call with that id opened while it was open; ``None`` when some
    item is left unpaired or a call id is reused while open."""
    ends: dict[int, int] = {}
    for j, item in enumerate(items):
        if isinstance(item, ToolCall):
            earlier = [
                i
                for i in range(j)
                if isinstance(items[i], ToolCall) and items[i].call_id == item.call_id and i not in ends
            ]
            if earlier:
                return None  # reused while open
        elif isinstance(item, ToolResult):
            open_calls = [
                i
                for i in range(j)
                if isinstance(items[i], ToolCall) and items[i].call_id == item.call_id and i not in ends
            ]
            if not open_calls:
                return None
            ends[max(open_calls)] = j
    calls = [i for i, item in enumerate(items) if isinstance(item, ToolCall)]
    return ends if all(i in ends for i in calls) else None


def test_a_call_id_reused_after_its_pair_completed_is_accepted(backend: str) -> None:
    items = reused()
    ctxengine.validate_tool_pairs(items)
    est = ctxengine.TokenEstimator()
    raw = est.raw_estimates(items, MODEL)
    # Every cut lands on a whole pair: a budget that would keep only the second result of
    # call_0 moves the cut past it, not to the first call with that id.
    assert ctxengine.select_history(items, -1, sum(raw[5:]), est, MODEL) == 6
    assert ctxengine.select_history(items, -1, sum(raw[8:]), est, MODEL) == 9
    assert ctxengine.select_history(items, -1, sum(raw[4:]), est, MODEL) == 4
    assert ctxengine.select_history(items, -1, sum(raw), est, MODEL) == 0


@pytest.mark.parametrize(
    ("items", "index", "reason"),
    [
        # reused while the earlier call is open
        (
            [ToolCall("a", "f", {}), ToolCall("a", "f", {}), ToolResult("a", "r"), ToolResult("a", "r")],
            1,
            "tool call id reused while its earlier call is still open",
        ),
        # a second result for one call
        (
            [ToolCall("a", "f", {}), ToolResult("a", "r"), ToolResult("a", "r")],
            2,
            "tool result without an earlier unanswered call",
        ),
        # reused after completion, then answered twice
        (
            [ToolCall("a", "f", {}), ToolResult("a", "r"), ToolCall("a", "f", {}), UserMessage("q")],
            2,
            "tool call never answered",
        ),
    ],
)
def test_reuse_while_open_and_second_results_are_orphans(
    backend: str, items: list[Any], index: int, reason: str
) -> None:
    with pytest.raises(OrphanedToolPair) as info:
        ctxengine.validate_tool_pairs(items)
    assert (info.value.call_id, info.value.index, info.value.reason) == ("a", index, reason)


def valid_cut(items: list[Any], c: int, floor: int, budget: int, est: Any) -> bool:
    suffix = items[c:]
    return (
        est.estimate(suffix, MODEL) <= budget
        and all(item.seq is None or item.seq > floor for item in suffix)
        and oracle_ends(suffix) is not None
    )


@st.composite
def reusing_cases(draw: st.DrawFn) -> tuple[list[Any], int, int, list[tuple[str, int, int]]]:
    items = draw(sessions(max_turns=8, reuse_ids=True))
    seqs = [item.seq for item in items if item.seq is not None]
    floor = draw(st.one_of(st.just(-1), st.integers(-1, max(seqs, default=0) + 1)))
    steps = draw(reconciles)
    est = backends.module("python").TokenEstimator()
    for step in steps:
        est.reconcile(*step)
    whole = est.estimate(items, MODEL)
    budget = draw(st.one_of(st.integers(0, whole + 10), st.integers(whole // 3, whole)))
    return items, floor, budget, steps


@FIXTURE_OK
@given(case=reusing_cases())
def test_cuts_of_histories_that_reuse_ids(
    backend: str, case: tuple[list[Any], int, int, list[tuple[str, int, int]]]
) -> None:
    """Pairs whole, the cut the largest valid suffix (brute force), on either backend."""
    items, floor, budget, steps = case
    assert oracle_ends(items) is not None
    ctxengine.validate_tool_pairs(items)
    est = ctxengine.TokenEstimator()
    for step in steps:
        est.reconcile(*step)
    c = ctxengine.select_history(items, floor, budget, est, MODEL)
    assert valid_cut(items, c, floor, budget, est)
    ctxengine.validate_tool_pairs(items[c:])
    for shorter in range(c):
        assert not valid_cut(items, shorter, floor, budget, est), shorter


@settings(max_examples=200, deadline=None)
@given(case=reusing_cases(), data=st.data())
def test_backends_agree_on_histories_that_reuse_ids(
    case: tuple[list[Any], int, int, list[tuple[str, int, int]]], data: st.DataObject
) -> None:
    """Rust == reference: the cut, and validation of the history with one item removed or
    repeated (so both the orphan and its position are compared)."""
    items, floor, budget, steps = case
    rust, ref = backends.module("rust"), backends.module("python")
    ests = []
    for module in (rust, ref):
        est = module.TokenEstimator()
        for step in steps:
            est.reconcile(*step)
        ests.append(est)
    assert rust.select_history(items, floor, budget, ests[0], MODEL) == ref.select_history(
        items, floor, budget, ests[1], MODEL
    )
    if not items:
        return
    k = data.draw(st.integers(0, len(items) - 1))
    broken = data.draw(st.sampled_from([items[:k] + items[k + 1 :], items[: k + 1] + items[k:]]))

    def outcome(module: Any) -> tuple[str, int, str] | None:
        try:
            module.validate_tool_pairs(broken)
        except OrphanedToolPair as exc:
            return exc.call_id, exc.index, exc.reason
        return None

    got = outcome(rust)
    assert got == outcome(ref)
    assert (got is None) == (oracle_ends(broken) is not None)
