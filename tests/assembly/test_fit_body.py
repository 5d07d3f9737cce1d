"""``fit_body`` of the Rust backend against its specification, the reference:
the same ``BodyFit`` (body, numbers, steps, digest, missing renders), the same
memo traffic and the same errors, on every rung of the yield ladder."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.assembly.blocks import RECALL_TITLE, render_lines
from ctxengine.assembly.render import render_conversation, render_pointer
from ctxengine.assembly.request import RenderedItem
from ctxengine.core import backends
from ctxengine.core.body import BodyBlock, BodyInputs, BodyLimits, RenderLine
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


def recall_blocks(lines: list[str]) -> tuple[RenderedItem, ...]:
    return tuple(render_lines("recall", RECALL_TITLE, lines[:k]) for k in range(1, len(lines) + 1))


def tables(
    history: list[Any], skip_renders: set[int], skip_pointers: set[int]
) -> tuple[dict[bytes, Any], ...]:
    renders, pointers = {}, {}
    for i, item in enumerate(history):
        digest = ref.item_canonical(item)[1]
        if i not in skip_renders:
            renders[digest] = render_conversation(item, "history")
        if isinstance(item, ToolResult) and i not in skip_pointers:
            pointers[digest] = render_pointer(item)
    return renders, pointers


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    history = draw(sessions(max_turns=6, reuse_ids=draw(st.booleans())))
    size = st.integers(0, 300)
    turn: list[RenderedItem] = []
    if draw(st.booleans()):
        turn.append(block("current_user", "and now? " * draw(st.integers(1, 30))))
    lines = [f"memory line {i} " * draw(st.integers(1, 8)) for i in range(draw(st.integers(0, 5)))]
    # Caps that bind, or none but the window's (so that every reason and rung comes up).
    cap = st.one_of(st.none(), st.integers(0, 3000), st.integers(3000, 10**6))
    if draw(st.booleans()):
        cap = st.one_of(st.none(), st.integers(10**5, 10**6))
    count_cap = st.one_of(st.none(), st.integers(0, 5))
    n_passages = draw(st.integers(0, 4))
    blocks = [
        BodyBlock(
            region_class="compacted_summary",
            kind="summary",
            items=tuple(
                block("compacted_summary", "summary " * draw(size)) for _ in range(draw(st.integers(0, 2)))
            ),
        ),
        BodyBlock(region_class="history", kind="history"),
        BodyBlock(
            region_class="skill_bodies",
            kind="skills",
            items=tuple(block("skill_bodies", "skill " * draw(size)) for _ in range(draw(st.integers(0, 3)))),
            max_items=draw(count_cap),
            max_tokens=draw(cap),
        ),
        BodyBlock(
            region_class="working_state",
            kind="working_state",
            items=(block("working_state", "state " * draw(size)),),
            max_tokens=draw(cap),
        ),
        BodyBlock(
            region_class="knowledge",
            kind="passages",
            items=tuple(block("knowledge", "passage " * draw(size)) for _ in range(n_passages)),
            ids=tuple(f"k{i}" for i in range(n_passages)),
            max_items=draw(count_cap),
            max_tokens=draw(cap),
        ),
        BodyBlock(region_class="recall", kind="lines", items=recall_blocks(lines), max_tokens=draw(cap)),
        BodyBlock(
            region_class="memory_corrections",
            kind="fixed",
            items=(block("memory_corrections", "fix " * draw(size)),) if draw(st.booleans()) else (),
        ),
        BodyBlock(region_class="runtime_metadata", kind="fixed", items=(block("runtime_metadata", "meta"),)),
        BodyBlock(region_class="current_user", kind="turn", items=tuple(turn)),
    ]
    n = len(history)
    indices = st.sets(st.integers(0, max(n - 1, 0)), max_size=2) if n else st.just(set())
    return {
        "history": history,
        "blocks": tuple(blocks),
        "skip_renders": draw(indices) if draw(st.integers(0, 5)) == 0 else set(),
        "skip_pointers": draw(indices) if draw(st.integers(0, 3)) == 0 else set(),
        "limits": BodyLimits(
            usable=draw(st.integers(0, 8000)),
            history_cap=draw(st.integers(0, 8000)),
            tool_cap=draw(st.integers(0, 8000)),
            summary_floor=draw(st.one_of(st.none(), st.integers(-1, 40))),
            summary_compactable=draw(st.booleans()),
        ),
        "reconciled": draw(st.one_of(st.none(), st.tuples(st.integers(1, 50), st.integers(0, 120)))),
        "again": draw(st.booleans()),
        "line": draw(line_shapes(n)),
    }


@st.composite
def line_shapes(draw: st.DrawFn, n: int) -> dict[str, Any] | None:
    """How the case's ``RenderLine`` departs from its history: none at all, or a
    line as long as ``length`` whose entries at ``stale`` hold an equal copy of the
    item (not the item), at ``unrendered`` no render, at ``unpointed`` no pointer;
    with a ``state`` of its own or none."""
    if draw(st.integers(0, 3)) == 0:
        return None
    index = st.sets(st.integers(0, max(n - 1, 0)), max_size=3) if n else st.just(set())
    return {
        "length": draw(st.integers(0, n + 2)),
        "stale": draw(index),
        "unrendered": draw(index),
        "unpointed": draw(index),
        "state": draw(st.booleans()),
    }


def render_line(history: list[Any], how: dict[str, Any] | None, state: Any = None) -> RenderLine | None:
    """The case's line over ``history`` (entries past its end repeat its last item), with
    ``state`` (when the case asks for one: a new one if ``None``)."""
    if how is None:
        return None
    items, renders, pointers = [], [], []
    for i in range(how["length"]):
        item = history[min(i, len(history) - 1)] if history else UserMessage("extra", seq=i)
        if i in how["stale"]:
            item = fresh(item)
        items.append(item)
        renders.append(None if i in how["unrendered"] else render_conversation(item, "history"))
        pointed = isinstance(item, ToolResult) and i not in how["unpointed"]
        pointers.append(render_pointer(item) if pointed else None)
    if how.get("state") and state is None:
        state = core.LineState()  # (the reference ignores it)
    return RenderLine(items, renders, pointers, state)


def run(module: Any, case: dict[str, Any], estimator: Any) -> Any:
    history = [fresh(item) for item in case["history"]]
    renders, pointers = tables(history, case["skip_renders"], case["skip_pointers"])
    line = render_line(history, case.get("line"), case.get("state"))
    inputs = BodyInputs(
        history=tuple(history), renders=renders, pointers=pointers, blocks=case["blocks"], line=line
    )
    outcomes = []
    for _ in range(2 if case["again"] else 1):  # a second build over the same items: warm
        try:
            fit = dict(
                module.fit_body(inputs=inputs, limits=case["limits"], estimator=estimator, model_id=MODEL)
            )
        except OrphanedToolPair as e:
            outcomes.append(("orphan", e.call_id, e.index))
            break
        fit["body"] = [item.to_dict() for item in fit["body"]]
        outcomes.append(fit)
    return outcomes


def estimator(module: Any, case: dict[str, Any]) -> Any:
    est = module.TokenEstimator(memo_capacity=40)
    if case["reconciled"]:
        est.reconcile(MODEL, *case["reconciled"])
    return est


def same_memo_traffic(got: Any, want: Any) -> None:
    """The native fit's memo traffic against the reference's: as many lookups, and the
    same hits, misses and size while the reference's memo never evicted. (A count the
    native line cache kept is served as a hit without refreshing the memo's recency of
    its key: once the memo evicts, the two may keep different keys.)"""
    mine, theirs = got.memo_stats(), want.memo_stats()
    assert mine["hits"] + mine["misses"] == theirs["hits"] + theirs["misses"]
    if theirs["misses"] <= theirs["capacity"]:
        assert mine == theirs


@settings(max_examples=150, deadline=None)
@given(case=bodies())
def test_fit_body_equals_the_reference(case: dict[str, Any]) -> None:
    want_est = estimator(ref, case)
    want = run(ref, case, want_est)
    got_est = estimator(core, case)
    got = run(core, case, got_est)
    assert got == want
    same_memo_traffic(got_est, want_est)


@settings(max_examples=60, deadline=None)
@given(case=bodies())
def test_a_line_changes_nothing_but_the_lookups(case: dict[str, Any]) -> None:
    """The line only spares table lookups: the fit is the one without it, wherever
    it matches the history, falls short, runs past it or lacks an entry (the
    tables stand in); only renders the tables lack but the line holds differ."""
    line = case["line"]
    held = set()
    if line is not None:
        held = (
            {i for i in range(min(line["length"], len(case["history"])))} - line["stale"] - line["unrendered"]
        )
    case = {**case, "skip_renders": case["skip_renders"] - held, "skip_pointers": set()}
    for module in (core, ref):
        assert run(module, case, estimator(module, case)) == run(
            module, {**case, "line": None}, estimator(module, case)
        )


def test_the_line_is_read() -> None:
    """Where the line holds the very item, its render is the body's (the tables are
    not asked); an equal copy of the item is not the item."""
    history = [UserMessage("q", seq=1), ToolCall("c", "f", {}, seq=2), ToolResult("c", "r", seq=3)]
    renders, pointers = tables(history, {0}, set())
    own = block("history", "the line's own render")
    limits = BodyLimits(usable=10**6, history_cap=10**6, tool_cap=10**6)
    blocks = (BodyBlock(region_class="history", kind="history"),)
    for first, found in ((history[0], True), (UserMessage("q", seq=1), False)):
        line = RenderLine([first, *history[1:]], [own, None, None], [None, None, None])
        inputs = BodyInputs(tuple(history), renders, pointers, blocks, line)
        for module in (core, ref):
            fit = module.fit_body(
                inputs=inputs, limits=limits, estimator=module.TokenEstimator(), model_id=MODEL
            )
            if found:
                assert fit["missing"] == [] and fit["body"][0] is own
            else:
                assert fit["missing"] == [0]


def test_a_line_is_checked_after_the_tables() -> None:
    history = (UserMessage("q", seq=1),)
    renders, pointers = tables(list(history), set(), set())
    blocks = (BodyBlock(region_class="history", kind="history"),)
    limits = BodyLimits(usable=100, history_cap=100, tool_cap=100)
    bad = [
        (BodyInputs(history, renders, pointers, blocks, RenderLine([], [None], [])), "inputs.line"),
        (BodyInputs(history, renders, pointers, blocks, RenderLine(5, [], [])), "inputs.line.items"),  # type: ignore[arg-type]
        (BodyInputs(history, [], pointers, blocks, RenderLine(5, [], [])), "inputs.renders"),  # type: ignore[arg-type]
        (BodyInputs((None,), renders, pointers, blocks, RenderLine([], [None], [])), "inputs.history[0]"),
        (BodyInputs(history, renders, pointers, (), RenderLine([], [None], [])), "inputs.line"),
    ]
    for inputs, argument in bad:
        messages = []
        for module in (core, ref):
            with pytest.raises(ArgumentError) as info:
                module.fit_body(
                    inputs=inputs, limits=limits, estimator=module.TokenEstimator(), model_id=MODEL
                )
            assert info.value.argument == argument
            messages.append(str(info.value))
        assert messages[0] == messages[1]


def test_a_line_emptied_mid_call_is_still_read_safely() -> None:
    """An ``inputs`` whose fields run code that empties the line: the binding reads the
    line's entries after every other field, so none it borrows is freed under it."""
    history = [UserMessage(f"q{i}", seq=i) for i in range(50)]
    renders, pointers = tables(history, set(), set())
    blocks = (BodyBlock(region_class="history", kind="history"),)
    limits = BodyLimits(usable=10**6, history_cap=10**6, tool_cap=10**6)
    want = ref.fit_body(
        inputs=BodyInputs(tuple(history), renders, pointers, blocks),
        limits=limits,
        estimator=ref.TokenEstimator(),
        model_id=MODEL,
    )

    class Hostile:
        def __init__(self) -> None:
            self.history = tuple(history)
            self.renders, self.pointers = renders, pointers
            self.line = RenderLine(
                list(history), [render_conversation(i, "history") for i in history], [None] * len(history)
            )

        @property
        def blocks(self) -> Any:
            for part in self.line[:3]:
                part.clear()
            return blocks

    for module in (core, ref):
        fit = module.fit_body(
            inputs=Hostile(), limits=limits, estimator=module.TokenEstimator(), model_id=MODEL
        )
        assert [r.to_dict() for r in fit["body"]] == [r.to_dict() for r in want["body"]]


def ladder_case(recall_cap: int) -> dict[str, Any]:
    from builder_fixtures import session

    lines = ["one " * 20, "two " * 20, "three " * 20]
    passages = tuple(block("knowledge", f"{c} " * 200) for c in "ABC")
    return {
        "history": session(6, result_size=900),
        "blocks": (
            BodyBlock(region_class="history", kind="history"),
            BodyBlock(
                region_class="working_state", kind="working_state", items=(block("working_state", "s"),)
            ),
            BodyBlock(
                region_class="knowledge",
                kind="passages",
                items=passages,
                ids=("kA", "kB", "kC"),
                max_items=2,
                max_tokens=10**6,
            ),
            BodyBlock(region_class="recall", kind="lines", items=recall_blocks(lines), max_tokens=recall_cap),
            BodyBlock(region_class="runtime_metadata", kind="fixed", items=(block("runtime_metadata", "m"),)),
            BodyBlock(region_class="current_user", kind="turn", items=(block("current_user", "go on"),)),
        ),
        "skip_renders": set(),
        "skip_pointers": set(),
        "limits": BodyLimits(usable=400, history_cap=400, tool_cap=1000, summary_floor=2),
        "reconciled": None,
        "again": False,
    }


def test_every_rung_is_reached() -> None:
    """Deterministic walks down the whole ladder, step strings included."""
    names: set[str] = set()
    for recall_cap in (40, 200):
        case = ladder_case(recall_cap)
        want = run(ref, case, estimator(ref, case))
        got = run(core, case, estimator(core, case))
        assert got == want
        steps = got[0]["yield_steps"]
        assert steps[0] == "knowledge_over_cap:kC"
        names |= {step.split(":")[0] for step in steps}
    assert names == {
        "knowledge_over_cap",
        "recall_lines_over_cap",
        "knowledge_dropped",
        "recall_lines_dropped",
        "tool_results_over_cap",
        "tool_results_truncated",
        "history_cut",
    }


def test_missing_renders_come_back_before_any_estimate() -> None:
    case = ladder_case(200)
    case["skip_renders"] = {1, 4}
    for module in (core, ref):
        est = estimator(module, case)
        (fit,) = run(module, case, est)
        assert fit["missing"] == [1, 4] and fit["body"] == [] and fit["yield_steps"] == []
        assert est.memo_stats()["misses"] == 0
    case["skip_renders"], case["skip_pointers"] = set(), {2}
    results = [i for i, item in enumerate(case["history"]) if isinstance(item, ToolResult)]
    for module in (core, ref):
        (fit,) = run(module, case, estimator(module, case))
        assert fit["missing"] == [2]  # asked for when the ladder reached it
        assert 2 in results


def test_pairing_errors_come_at_the_cut() -> None:
    history = [ToolResult("orphan", "r", seq=1), UserMessage("q", seq=2)]
    case = {
        "history": history,
        "blocks": (BodyBlock(region_class="history", kind="history"),),
        "skip_renders": set(),
        "skip_pointers": set(),
        "limits": BodyLimits(usable=10**6, history_cap=10**6, tool_cap=10**6),
        "reconciled": None,
        "again": False,
    }
    for module in (core, ref):
        assert run(module, case, estimator(module, case)) == [("orphan", "orphan", 0)]


def test_the_inputs_are_checked_alike() -> None:
    history = [UserMessage("q", seq=1), ToolCall("c", "f", {}, seq=2), ToolResult("c", "r", seq=3)]
    renders, pointers = tables(history, set(), set())
    good = BodyInputs(
        history=tuple(history),
        renders=renders,
        pointers=pointers,
        blocks=(BodyBlock(region_class="history", kind="history"),),
    )
    limits = BodyLimits(usable=100, history_cap=100, tool_cap=100)
    bad_cases: list[tuple[Any, Any, str]] = [
        (
            BodyInputs(history=(None,), renders={}, pointers={}, blocks=good.blocks),
            limits,
            "inputs.history[0]",
        ),
        (BodyInputs(history=(), renders=[], pointers={}, blocks=good.blocks), limits, "inputs.renders"),
        (BodyInputs(history=(), renders={}, pointers={}, blocks=()), limits, "inputs.blocks"),
        (
            BodyInputs(
                history=(), renders={}, pointers={}, blocks=(BodyBlock(region_class="x", kind="odd"),)
            ),
            limits,
            "inputs.blocks[0].kind",
        ),
        (
            BodyInputs(
                history=(),
                renders={},
                pointers={},
                blocks=(*good.blocks, BodyBlock(region_class="k", kind="passages", items=(block("k", "p"),))),
            ),
            limits,
            "inputs.blocks[1].ids",
        ),
        (
            BodyInputs(
                history=(),
                renders={},
                pointers={},
                blocks=(*good.blocks, BodyBlock(region_class="f", kind="fixed", items=("x",))),
            ),
            limits,
            "inputs.blocks[1].items[0]",
        ),
        (good, BodyLimits(usable=1.5, history_cap=1, tool_cap=1), "limits.usable"),  # type: ignore[arg-type]
        (
            good,
            BodyLimits(usable=1, history_cap=1, tool_cap=1, summary_compactable=1),
            "limits.summary_compactable",
        ),  # type: ignore[arg-type]
        (good, {"usable": 1}, "limits.usable"),
    ]
    for inputs, lim, argument in bad_cases:
        messages = []
        for module in (core, ref):
            with pytest.raises(ArgumentError) as info:
                module.fit_body(inputs=inputs, limits=lim, estimator=module.TokenEstimator(), model_id=MODEL)
            assert info.value.argument == argument
            messages.append(str(info.value))
        assert messages[0] == messages[1]
    with pytest.raises(ArgumentError, match="estimator"):
        core.fit_body(inputs=good, limits=limits, estimator=ref.TokenEstimator(), model_id=MODEL)


def test_the_same_blocks_and_limits_read_again_after_their_type_changes() -> None:
    """The binding keeps in the line's state the last blocks and limits it read, by
    identity: a change to their type (a cap now computed) is read, as the reference
    reads it."""

    class Block(BodyBlock):
        __slots__ = ()

    class Limits(BodyLimits):
        __slots__ = ()

    case = ladder_case(200)
    case["blocks"] = tuple(Block(*b) for b in case["blocks"])
    case["limits"] = Limits(*case["limits"])
    n = len(case["history"])
    case["line"] = {"length": n, "stale": set(), "unrendered": set(), "unpointed": set(), "state": True}
    case["state"] = core.LineState()  # one for every call: the memo is kept from call to call
    before = run(core, case, estimator(core, case))
    assert before == run(ref, case, estimator(ref, case))
    Block.max_tokens = property(lambda self: 10 if self.region_class == "recall" else self[5])  # type: ignore[assignment]
    Limits.summary_floor = property(lambda self: None)  # type: ignore[assignment]
    after = run(core, case, estimator(core, case))
    assert after == run(ref, case, estimator(ref, case))
    assert after != before
