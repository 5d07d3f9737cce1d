"""The Rust binding keeps what it read from a line's entries between calls in the line's
own state (``RenderLine.state``, a ``_core.LineState``): a line kept and changed in place
from call to call (grown, shortened, cleared, an entry's render or item replaced, the
history no longer the line's) gets, call after call, the fit of a line read anew without
a state: the same body objects, numbers, steps and digest, and as many memo lookups as
the reference (the same traffic while its memo has room)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_fit_body import MODEL, core, ref, same_memo_traffic  # (skips this module too without the extension)

from ctxengine.assembly.render import render_conversation, render_pointer
from ctxengine.assembly.request import RenderedItem
from ctxengine.core.body import BodyBlock, BodyInputs, BodyLimits, RenderLine
from ctxengine.errors import OrphanedToolPair
from ctxengine.model import AssistantMessage, ToolResult, UserMessage
from strategies import fresh, sessions

BLOCKS = (
    BodyBlock(region_class="history", kind="history"),
    BodyBlock(
        region_class="current_user",
        kind="turn",
        items=(RenderedItem("current_user", "user", text="and now?"),),
    ),
)


def entry(item: Any) -> tuple[Any, Any, Any]:
    pointer = render_pointer(item) if isinstance(item, ToolResult) else None
    return item, render_conversation(item, "history"), pointer


class Line:
    """A line and its history, changed in place the way a builder's line is."""

    def __init__(self) -> None:
        self.history: list[Any] = []
        self.line = RenderLine([], [], [], core.LineState())

    def put(self, items: list[Any]) -> None:
        for item in items:
            it, render, pointer = entry(item)
            self.history.append(it)
            self.line.items.append(it)  # type: ignore[attr-defined]
            self.line.renders.append(render)  # type: ignore[attr-defined]
            self.line.pointers.append(pointer)  # type: ignore[attr-defined]

    def change(self, how: str, at: int, more: list[Any]) -> None:
        items, renders, pointers = self.line[:3]
        n = len(self.history)
        i = at % n if n else 0
        if how == "grow":
            self.put(more)
        elif how == "shorten":
            for seq in (self.history, items, renders, pointers):
                del seq[i:]
        elif how == "clear":
            old = list(self.history)
            for seq in (self.history, items, renders, pointers):
                seq.clear()
            self.put([fresh(item) for item in old])
        elif how == "rerender" and n:
            renders[i] = render_conversation(self.history[i], "history")
        elif how == "unrender" and n:
            renders[i] = None
        elif how == "repointer" and n and isinstance(self.history[i], ToolResult):
            pointers[i] = render_pointer(self.history[i])
        elif how == "unpointer" and n:
            pointers[i] = None
        elif how == "stale" and n:
            items[i] = fresh(self.history[i])
        elif how == "replace" and n:
            item = fresh(self.history[i])
            self.history[i] = item
            items[i], renders[i], pointers[i] = entry(item)
        elif how == "history" and n:
            self.history[i] = fresh(self.history[i])


def tables(history: list[Any]) -> tuple[dict[bytes, Any], dict[bytes, Any]]:
    renders = {core.item_canonical(item)[1]: render_conversation(item, "history") for item in history}
    pointers = {core.item_canonical(i)[1]: render_pointer(i) for i in history if isinstance(i, ToolResult)}
    return renders, pointers


def fit(module: Any, history: list[Any], line: RenderLine, tables: Any, estimator: Any, usable: int) -> Any:
    inputs = BodyInputs(tuple(history), *tables, BLOCKS, line)
    limits = BodyLimits(usable=usable, history_cap=usable, tool_cap=usable // 2)
    try:
        return dict(module.fit_body(inputs=inputs, limits=limits, estimator=estimator, model_id=MODEL))
    except OrphanedToolPair as e:  # a grown history may repeat a call id: the same error for all
        return {"orphan": (e.call_id, e.index), "missing": []}


changes = st.sampled_from(
    [
        "grow",
        "grow",
        "grow",
        "shorten",
        "clear",
        "rerender",
        "unrender",
        "repointer",
        "stale",
        "replace",
        "history",
    ]
)


@settings(max_examples=120, deadline=None)
@given(
    start=sessions(max_turns=4),
    steps=st.lists(st.tuples(changes, st.integers(0, 50), sessions(max_turns=2)), max_size=8),
    usable=st.sampled_from([400, 3000, 10**6]),
)
def test_a_line_changed_in_place_fits_as_a_line_read_anew(start: Any, steps: Any, usable: int) -> None:
    kept = Line()
    kept.put(start)
    mine, anew = core.TokenEstimator(memo_capacity=30), core.TokenEstimator(memo_capacity=30)
    theirs = ref.TokenEstimator(memo_capacity=30)
    for how, at, more in [("grow", 0, []), *steps]:
        kept.change(how, at, more)
        both = tables(kept.history)
        got = fit(core, kept.history, kept.line, both, mine, usable)
        copy = RenderLine(*(list(part) for part in kept.line[:3]))  # (no state)
        want = fit(core, kept.history, copy, both, anew, usable)
        spec = fit(ref, kept.history, copy, both, theirs, usable)
        if "orphan" in want:
            assert got == want == spec
            continue
        if want["missing"]:
            assert got["missing"] == want["missing"] == spec["missing"]
            continue
        assert [id(x) for x in got["body"]] == [id(x) for x in want["body"]]
        for key in ("body_raw", "reason", "cut", "history_budget", "yield_steps", "body_sha256"):
            assert got[key] == want[key] == spec[key], key
        assert anew.memo_stats() == theirs.memo_stats()
        same_memo_traffic(mine, theirs)


def test_a_growing_line_is_read_from_its_state_and_a_changed_one_recovers() -> None:
    """Speed, checked: the entries of earlier calls are served, and after an entry
    changes the state holds the new one from the next call on."""
    est = core.TokenEstimator()
    kept = Line()
    kept.put([UserMessage(f"turn {i}", seq=i + 1) for i in range(6)])

    def served() -> int:
        before = kept.line.state.served
        fit(core, kept.history, kept.line, tables(kept.history), est, 10**6)
        return int(kept.line.state.served - before)

    assert served() == 0  # a line met for the first time
    kept.put([AssistantMessage("reply", seq=7)])
    assert served() == 6
    assert served() == 7
    kept.change("rerender", 2, [])  # entry 2 holds another render now
    assert served() == 2
    assert served() == 7
    kept.change("shorten", 4, [])
    assert served() == 4
    kept.change("clear", 0, [])  # the same items copied: none of them is the cached one
    assert served() == 0
    assert served() == 4


def test_counts_the_line_kept_are_served_after_the_memo_evicted_them() -> None:
    """Speed, checked: a count an entry kept is not counted again, even when the memo has
    let its key go (the reference, which counts through the memo alone, misses)."""
    mine, theirs = core.TokenEstimator(memo_capacity=2), ref.TokenEstimator(memo_capacity=2)
    kept = Line()
    kept.put([UserMessage(f"turn {i} " * 20, seq=i + 1) for i in range(6)])
    for est, module in ((mine, core), (theirs, ref)):
        fit(module, kept.history, kept.line, tables(kept.history), est, 10**6)
    before = mine.memo_stats()["misses"], theirs.memo_stats()["misses"]
    kept.put([AssistantMessage("reply", seq=7)])
    got = fit(core, kept.history, kept.line, tables(kept.history), mine, 10**6)
    want = fit(ref, kept.history, kept.line, tables(kept.history), theirs, 10**6)
    assert got["body_raw"] == want["body_raw"]
    assert mine.memo_stats()["misses"] - before[0] == 1  # the new item only
    assert theirs.memo_stats()["misses"] - before[1] > 1
    same_memo_traffic(mine, theirs)


def test_a_kept_count_is_served_only_to_the_same_way_of_counting() -> None:
    """One line fitted in turn by estimators and models that count it differently: each
    fit measures what the reference measures with that estimator and model."""
    kept = Line()
    kept.put([UserMessage(f"turn {i} " * (5 + i), seq=i + 1) for i in range(5)])
    ways = [
        {"bytes_per_token": 3.0},
        {"bytes_per_token": 1.5},
        {"bytes_per_token": 3.0, "framing_tokens": 9},
        {"bytes_per_token": 3.0, "profiles": {"other": (2.0, 1)}},
    ]
    pairs = [(core.TokenEstimator(**w), ref.TokenEstimator(**w)) for w in ways]  # type: ignore[arg-type]
    pairs.append((core.TokenEstimator.restore(pairs[1][0].snapshot()), pairs[1][1]))
    for turn in range(3):
        kept.put([AssistantMessage(f"reply {turn}", seq=10 + turn)])
        for mine, theirs in pairs + pairs[::-1]:
            for model in (MODEL, "other-model"):
                inputs = BodyInputs(tuple(kept.history), *tables(kept.history), BLOCKS, kept.line)
                limits = BodyLimits(usable=10**6, history_cap=10**6, tool_cap=10**5)
                got = core.fit_body(inputs=inputs, limits=limits, estimator=mine, model_id=model)
                want = ref.fit_body(inputs=inputs, limits=limits, estimator=theirs, model_id=model)
                assert got["body_raw"] == want["body_raw"], (turn, model)
    assert kept.line.state.served > 0  # (the line was served)
