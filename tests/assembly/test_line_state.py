"""A render line's state (``RenderLine.state``): what the native fit read of the line, owned by
the line's owner rather than kept per thread. Any thread's call reads it; a call that finds it
taken by another (re-entered, or another thread's) fits without it; ``clear()`` drops what it
holds, even from a call in progress; ``nbytes`` is what it holds. The fit is the same with or
without it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from test_fit_body import MODEL, core  # (skips this module too without the extension)

from builder_fixtures import session
from ctxengine.assembly.render import render_conversation, render_pointer
from ctxengine.assembly.request import RenderedItem
from ctxengine.assembly.session_renders import SessionRenders
from ctxengine.core import backends
from ctxengine.core.body import BodyBlock, BodyInputs, BodyLimits, RenderLine
from ctxengine.model import ToolResult

BLOCKS = (
    BodyBlock(region_class="history", kind="history"),
    BodyBlock(
        region_class="current_user", kind="turn", items=(RenderedItem("current_user", "user", text="go"),)
    ),
)
LIMITS = BodyLimits(usable=10**6, history_cap=10**6, tool_cap=10**5)


def history(n: int) -> list[Any]:
    """``n`` turns: a question, a tool call, its result and a reply."""
    return session(n, result_size=200)


def line_of(items: list[Any], state: Any) -> RenderLine:
    renders = [render_conversation(item, "history") for item in items]
    pointers = [render_pointer(item) if isinstance(item, ToolResult) else None for item in items]
    return RenderLine(list(items), renders, pointers, state)


def tables(items: list[Any]) -> tuple[dict[bytes, Any], dict[bytes, Any]]:
    renders = {core.item_canonical(i)[1]: render_conversation(i, "history") for i in items}
    pointers = {core.item_canonical(i)[1]: render_pointer(i) for i in items if isinstance(i, ToolResult)}
    return renders, pointers


def fit(module: Any, items: list[Any], line: RenderLine | None, blocks: Any = BLOCKS) -> dict[str, Any]:
    inputs = BodyInputs(tuple(items), *tables(items), blocks, line)
    got = dict(
        module.fit_body(inputs=inputs, limits=LIMITS, estimator=module.TokenEstimator(), model_id=MODEL)
    )
    got["body"] = [id(x) for x in got["body"]]
    return got


def test_each_backend_makes_its_own_state(backend: str) -> None:
    state = backends.line_state()
    if backend == "rust":
        assert isinstance(state, core.LineState) and state.nbytes == 0 and state.served == 0
    else:
        assert state is None
    assert SessionRenders().line.state.__class__ is state.__class__
    assert RenderLine([], [], []).state is None


def test_a_state_is_read_by_a_call_on_another_thread() -> None:
    items = history(12)
    state = core.LineState()
    line = line_of(items, state)
    want = fit(core, items, line._replace(state=None))
    assert fit(core, items, line) == want
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(fit(core, items, line)))
    thread.start()
    thread.join()
    assert got == [want]
    assert state.served == len(items)  # the second call, on the other thread, read them all from it


def test_nbytes_counts_what_the_state_holds_and_clear_drops_it() -> None:
    items = history(20)
    state = core.LineState()
    line = line_of(items, state)
    half = RenderLine(*(part[:40] for part in line[:3]), state)
    fit(core, items[:40], half)
    some = state.nbytes
    fit(core, items, line)
    full = state.nbytes
    assert 0 < some < full
    want = fit(core, items, line._replace(state=None))
    state.clear()
    assert state.nbytes == 0
    served = state.served
    assert fit(core, items, line) == want
    assert state.served == served  # nothing left to serve
    assert state.nbytes == full  # (read again)


class Reentrant:
    """Inputs whose ``blocks`` runs ``during(line)`` while the fit has the line's state out."""

    def __init__(self, items: list[Any], line: RenderLine, during: Any) -> None:
        self.history = tuple(items)
        self.renders, self.pointers = tables(items)
        self.line, self._during = line, during

    @property
    def blocks(self) -> Any:
        self._during(self.line)
        return BLOCKS


def test_a_call_finding_the_state_taken_fits_without_it() -> None:
    """A call re-entered from Python code the fit runs (another thread's would find the
    same): the state is out, so it reads the line anew; both fit as without a state."""
    items = history(10)
    state = core.LineState()
    line = line_of(items, state)
    fit(core, items, line)  # the state holds the line
    want = fit(core, items, line._replace(state=None))
    inner: list[Any] = []

    def during(line: RenderLine) -> None:
        before = state.served
        inner.append(fit(core, items, line))
        inner.append(state.served - before)

    outer = core.fit_body(
        inputs=Reentrant(items, line, during), limits=LIMITS, estimator=core.TokenEstimator(), model_id=MODEL
    )
    assert inner == [want, 0]  # (read anew: the state was out)
    assert [id(x) for x in outer["body"]] == want["body"]
    assert outer["body_sha256"] == want["body_sha256"]
    assert state.served == len(items)  # the outer call read it all, and gave it back


def test_a_state_cleared_during_a_call_keeps_nothing_of_it() -> None:
    """Its owner starts the line again while a call has the state out: the call still reads
    what it took (its references stay alive until the call ends), then lets it go."""
    items = history(10)
    state = core.LineState()
    line = line_of(items, state)
    fit(core, items, line)
    want = fit(core, items, line._replace(state=None))

    def during(line: RenderLine) -> None:
        line.state.clear()
        for part in line[:3]:
            part.clear()

    outer = core.fit_body(
        inputs=Reentrant(items, line, during), limits=LIMITS, estimator=core.TokenEstimator(), model_id=MODEL
    )
    assert outer["body_sha256"] == want["body_sha256"]
    assert state.nbytes == 0
    before = state.served
    fit(core, items, line_of(items, state))
    assert state.served == before  # nothing of the cleared state came back


def test_another_thread_finding_the_state_taken_fits_without_it() -> None:
    """One thread's call has the state out and waits (its Python code released the GIL);
    another thread's call with the same line reads the line anew; both fit the same."""
    items = history(12)
    state = core.LineState()
    line = line_of(items, state)
    fit(core, items, line)
    want = fit(core, items, line._replace(state=None))
    taken, done = threading.Event(), threading.Event()
    other: list[Any] = []

    def during(line: RenderLine) -> None:
        taken.set()
        assert done.wait(10)

    def second() -> None:
        assert taken.wait(10)
        before = state.served
        other.append(fit(core, items, line))
        other.append(state.served - before)
        done.set()

    thread = threading.Thread(target=second)
    thread.start()
    outer = core.fit_body(
        inputs=Reentrant(items, line, during), limits=LIMITS, estimator=core.TokenEstimator(), model_id=MODEL
    )
    thread.join()
    assert other == [want, 0]
    assert outer["body_sha256"] == want["body_sha256"]
    assert [id(x) for x in outer["body"]] == want["body"]


@pytest.mark.parametrize("how", ["forget", "drop"])
def test_session_renders_clear_the_state_with_the_line(how: str) -> None:
    previous = backends.backend()
    backends.use_backend("rust")
    try:
        tables_ = SessionRenders()
    finally:
        backends.use_backend(previous)
    items = history(8)
    tables_.renders.update(tables(items)[0])
    tables_.pointers.update(tables(items)[1])
    line = tables_.line_of(tuple(items))
    fit(core, items, line)
    state = tables_.line.state
    assert state.nbytes > 0
    if how == "forget":
        tables_.forget_line()
        assert state.nbytes == 0 and len(tables_.line.items) == 0
    else:  # a history that does not extend the line: the entries that still match stay
        assert tables_.line_of(tuple(items[:4])) is tables_.line
        before = state.served
        fit(core, items[:4], tables_.line)
        assert state.served - before == 4
