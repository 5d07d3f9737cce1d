"""The Rust binding keeps what it read from a line's entries between calls (its line
cache): a line kept and changed in place from call to call (grown, shortened, cleared,
an entry's render or item replaced, the history no longer the line's) gets, call after
call, the fit of a line read anew: the same body objects, numbers, steps and digest,
and the reference's memo traffic."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_fit_body import MODEL, core, ref  # (skips this module too without the extension)

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
        self.line = RenderLine([], [], [])

    def put(self, items: list[Any]) -> None:
        for item in items:
            it, render, pointer = entry(item)
            self.history.append(it)
            self.line.items.append(it)  # type: ignore[attr-defined]
            self.line.renders.append(render)  # type: ignore[attr-defined]
            self.line.pointers.append(pointer)  # type: ignore[attr-defined]

    def change(self, how: str, at: int, more: list[Any]) -> None:
        items, renders, pointers = self.line
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
        copy = RenderLine(*(list(part) for part in kept.line))
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
        assert mine.memo_stats() == anew.memo_stats() == theirs.memo_stats()


def test_a_growing_line_is_read_from_the_cache_and_a_changed_one_recovers() -> None:
    """Speed, checked: the entries of earlier calls are served, and after an entry
    changes the cache holds the new one from the next call on."""
    est = core.TokenEstimator()
    kept = Line()
    kept.put([UserMessage(f"turn {i}", seq=i + 1) for i in range(6)])

    def served() -> int:
        before = core._line_cache_stats()[2]
        fit(core, kept.history, kept.line, tables(kept.history), est, 10**6)
        return int(core._line_cache_stats()[2] - before)

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
