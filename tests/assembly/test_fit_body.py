"""``fit_body`` of the Rust backend against its specification, the reference:
the same body, numbers, steps and digest, the callbacks called at the same
points with the same arguments, the same memo traffic and the same errors,
on every rung of the yield ladder."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.assembly.builder import _render_recall
from ctxengine.assembly.render import render_item, tool_result_pointer
from ctxengine.assembly.request import RenderedItem
from ctxengine.core import backends
from ctxengine.errors import ArgumentError, OrphanedToolPair
from ctxengine.model import ToolCall, ToolResult, UserMessage
from strategies import fresh, sessions

try:
    core: Any = backends.module("rust")
except Exception:  # pragma: no cover - the extension is not built
    pytest.skip("ctxengine._core is not built", allow_module_level=True)

ref: Any = backends.module("python")
MODEL = "m:a"


def block(region: str, text: str) -> RenderedItem:
    return RenderedItem(region, "system", text=text)


class Calls:
    """The callbacks, logging what they were called with (items by position)."""

    def __init__(self, history: list[Any], turn: list[Any]) -> None:
        self.where = {id(item): ("history", i) for i, item in enumerate(history)}
        self.where.update({id(item): ("turn", i) for i, item in enumerate(turn)})
        self.log: list[tuple[Any, ...]] = []

    def render(self, item: Any, region_class: str) -> Any:
        self.log.append(("render", self.where[id(item)], region_class))
        return render_item(item, region_class)

    def render_recall(self, lines: list[str]) -> Any:
        assert type(lines) is list
        self.log.append(("recall", tuple(lines)))
        return _render_recall(lines)

    def pointer(self, item: Any) -> Any:
        self.log.append(("pointer", self.where[id(item)]))
        return tool_result_pointer(item)


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    history = draw(sessions(max_turns=6))
    turn: list[Any] = []
    if draw(st.booleans()):
        turn.append(UserMessage("and now? " * draw(st.integers(1, 30)), seq=10_000))
        if draw(st.booleans()):
            turn.append(ToolCall("now_1", "search", {"q": "x"}, seq=10_001))
            turn.append(ToolResult("now_1", "found " * draw(st.integers(0, 40)), seq=10_002))
    size = st.integers(0, 300)
    knowledge = [
        (f"k{i}", block("knowledge", "passage " * draw(size))) for i in range(draw(st.integers(0, 4)))
    ]
    lines = [f"memory line {i} " * draw(st.integers(1, 8)) for i in range(draw(st.integers(0, 5)))]
    # Class caps that bind, or only the window and the history and tool
    # caps (so that every reason and every rung comes up).
    cap = st.one_of(st.integers(-5, 3000), st.integers(3000, 10**6))
    if draw(st.booleans()):
        cap = st.integers(10**5, 10**6)
    limits = [draw(cap) for _ in range(9)]
    limits[:3] = [draw(st.integers(0, 8000)) for _ in range(3)]
    limits[4] = draw(st.integers(-1, 4))  # skill items
    limits[6] = draw(st.integers(-1, 5))  # knowledge items (negative: an ArgumentError)
    limits += [draw(st.integers(-1, 40)), draw(st.integers(0, 1))]
    return {
        "history": history,
        "turn": turn,
        "first_user": bool(turn) and draw(st.booleans()),
        "summary": [
            block("compacted_summary", "summary " * draw(size)) for _ in range(draw(st.integers(0, 2)))
        ],
        "skills": [block("skill_bodies", "skill " * draw(size)) for _ in range(draw(st.integers(0, 3)))],
        "working_state": [block("working_state", "state " * draw(size))],
        "knowledge": knowledge,
        "recall_lines": tuple(lines),
        "recall": [_render_recall(lines)] if lines else [],
        "corrections": [block("memory_corrections", "fix " * draw(size))] if draw(st.booleans()) else [],
        "metadata": [block("runtime_metadata", "meta")],
        "limits": tuple(limits),
        "reconciled": draw(st.one_of(st.none(), st.tuples(st.integers(1, 50), st.integers(0, 120)))),
        "shared_memo": draw(st.booleans()),
    }


def run(module: Any, case: dict[str, Any], estimator: Any) -> tuple[Any, list[tuple[Any, ...]]]:
    history = [fresh(item) for item in case["history"]]
    turn = [fresh(item) for item in case["turn"]]
    calls = Calls(history, turn)
    args = (
        tuple(history),
        tuple(turn),
        case["first_user"],
        tuple(case["summary"]),
        case["skills"],
        case["working_state"],
        case["knowledge"],
        case["recall_lines"],
        case["recall"],
        case["corrections"],
        case["metadata"],
        case["limits"],
        calls.render,
        calls.render_recall,
        calls.pointer,
        estimator,
        MODEL,
    )
    try:
        out: Any = module.fit_body(*args)
    except OrphanedToolPair as e:
        out = ("orphan", e.call_id, e.index)
    except ArgumentError as e:
        out = ("argument", str(e))
    else:
        body, *rest = out
        out = ([item.to_dict() for item in body], *rest)
    if case["shared_memo"]:  # a second build over the same items, warm
        again = module.fit_body(*args) if out[0] not in ("orphan", "argument") else None
        out = (out, again and ([item.to_dict() for item in again[0]], *again[1:]))
    return out, calls.log


def estimator(module: Any, case: dict[str, Any]) -> Any:
    est = module.TokenEstimator(memo_capacity=40)
    if case["reconciled"]:
        est.reconcile(MODEL, *case["reconciled"])
    return est


@settings(max_examples=150, deadline=None)
@given(case=bodies())
def test_fit_body_equals_the_reference(case: dict[str, Any]) -> None:
    want_est = estimator(ref, case)
    want, want_log = run(ref, case, want_est)
    got_est = estimator(core, case)
    got, got_log = run(core, case, got_est)
    assert got == want
    assert got_log == want_log
    assert got_est.memo_stats() == want_est.memo_stats()
    # Another estimator's methods: the reference's calls, made for it.
    mixed_est = estimator(ref, case)
    mixed, mixed_log = run(core, case, mixed_est)
    assert (mixed, mixed_log) == (want, want_log)
    assert mixed_est.memo_stats() == want_est.memo_stats()


def test_every_rung_is_reached() -> None:
    """Deterministic walks down the whole ladder, step strings included."""
    from builder_fixtures import session

    lines = ("one " * 20, "two " * 20, "three " * 20)
    names: set[str] = set()
    for recall_cap in (40, 200):
        case = {
            "history": session(6, result_size=900),
            "turn": [UserMessage("go on", seq=999)],
            "first_user": True,
            "summary": [],
            "skills": [],
            "working_state": [block("working_state", "state")],
            "knowledge": [(f"k{c}", block("knowledge", f"{c} " * 200)) for c in "ABC"],
            "recall_lines": lines,
            "recall": [_render_recall(list(lines))],
            "corrections": [],
            "metadata": [block("runtime_metadata", "meta")],
            "limits": (400, 400, 1000, 900, 3, 900, 2, 10**6, recall_cap, 2, 1),
            "reconciled": None,
            "shared_memo": False,
        }
        want, want_log = run(ref, case, estimator(ref, case))
        got, got_log = run(core, case, estimator(core, case))
        assert got == want and got_log == want_log
        assert got[6][0] == "knowledge_over_cap:kC"
        names |= {step.split(":")[0] for step in got[6]}
    assert names == {
        "knowledge_over_cap",
        "recall_lines_over_cap",
        "knowledge_dropped",
        "recall_lines_dropped",
        "tool_results_over_cap",
        "tool_results_truncated",
        "history_cut",
    }


def test_pairing_errors_and_callback_errors_come_in_the_reference_order() -> None:
    history = [ToolResult("orphan", "r", seq=1), UserMessage("q", seq=2)]

    def boom(item: Any, region_class: str) -> Any:
        raise RuntimeError(f"render {region_class}")

    args: list[Any] = [
        tuple(history),
        (),
        False,
        (),
        [],
        [block("working_state", "s")],
        [],
        (),
        [],
        [],
        [block("runtime_metadata", "m")],
        (10**6,) * 9 + (0, 1),
        render_item,
        _render_recall,
        tool_result_pointer,
    ]
    for module in (core, ref):
        args[0] = tuple(fresh(h) for h in history)
        with pytest.raises(OrphanedToolPair) as info:
            module.fit_body(*args, module.TokenEstimator(), MODEL)
        assert (info.value.call_id, info.value.index) == ("orphan", 0)
        # a render error comes first: the pairs are checked at the cut
        failing = list(args)
        failing[0] = tuple(fresh(h) for h in history)
        failing[12] = boom
        with pytest.raises(RuntimeError, match="render history"):
            module.fit_body(*failing, module.TokenEstimator(), MODEL)
        bad = list(args)
        bad[11] = (1, 2, 3)
        with pytest.raises(ArgumentError, match="limits: expected 11 values, got 3"):
            module.fit_body(*bad, module.TokenEstimator(), MODEL)
