"""A seed's history continued from the previous seed (``seed_history``, the window's
``view``) is the one computed from the whole window, whatever the window went through in
between: new items, items hidden from the principal, reasoning, orphaned and duplicate
tool calls, a result that answers a call left open, a retracted tail, a carried point that moved on."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.model import AssistantMessage, Principal, ReasoningItem, ToolCall, ToolResult, UserMessage
from ctxengine.runtime.seed_history import seed_history
from ctxengine.runtime.window import SessionWindow, View
from ctxengine.runtime.windows import Span
from ctxengine.stores.events import ItemRow, Visibility

ALICE = Principal("alice", "acme", frozenset())
BOB = Principal("bob", "acme", frozenset())
CLASSES = (
    Visibility.session(),
    Visibility.principal("alice"),
    Visibility.tenant("acme"),
    Visibility.tenant("x"),
)


@st.composite
def items(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Item kinds and call ids: a few ids, so duplicates, orphans and late results occur."""
    kinds = st.sampled_from(["user", "assistant", "call", "result", "reasoning", "pair"])
    return [(draw(kinds), draw(st.sampled_from("abcdefgh"))) for _ in range(draw(st.integers(0, 6)))]


def make(kind: str, call_id: str, n: int) -> list[Any]:
    if kind == "user":
        return [UserMessage(f"u{n}")]
    if kind == "assistant":
        return [AssistantMessage(f"a{n}")]
    if kind == "call":
        return [ToolCall(f"{call_id}", "search", {"n": n})]
    if kind == "result":
        return [ToolResult(f"{call_id}", f"r{n}")]
    if kind == "pair":
        return [ToolCall(f"p{n}", "search", {"n": n}), ToolResult(f"p{n}", f"r{n}")]
    return [ReasoningItem("openai", {"n": n})]


class Log:
    """A session window, grown, retracted and moved on by its own methods (as ``Windows`` does)."""

    def __init__(self) -> None:
        self.window = SessionWindow("s")
        self.next = 1

    def append(self, batch: list[tuple[str, str]], visibility: Visibility) -> None:
        rows, out = [], []
        for kind, call_id in batch:
            for item in make(kind, call_id, self.next):
                rows.append(ItemRow(self.next, "{}", visibility, self.next if self.next % 3 else None))
                out.append(item)
                self.next += 1
        self.window.add(rows, out)
        self.window.hi = self.next - 1

    def seed(self) -> int:
        """A user message ending the range: the seed."""
        self.append([("user", "")], CLASSES[0])
        return len(self.window.items)

    def retract(self, count: int) -> None:
        w = self.window
        w.drop_from(len(w.items) - min(count, len(w.items)))

    def move_on(self, count: int) -> None:
        w = self.window
        count = min(count, len(w.items))
        if count:
            w.lo = w.seqs[count - 1]
            w.drop_below(count)


def whole(window: SessionWindow, end: int, principal: Principal | None, primed: int) -> Any:
    view, window.view = window.view, None
    try:
        return seed_history(Span(window, end), principal, primed)
    finally:
        window.view = view


steps = st.lists(
    st.tuples(
        items(),
        st.sampled_from(CLASSES),
        st.sampled_from(["seed", "seed", "seed", "retract", "move_on", "bob"]),
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(steps=steps, principal=st.sampled_from([None, ALICE]))
def test_a_continued_seed_is_the_whole_one(steps: list[Any], principal: Principal | None) -> None:
    log = Log()
    primed = 0
    for batch, visibility, action, count in steps:
        log.append(batch, visibility)
        if action == "retract":
            log.retract(count)
            continue
        if action == "move_on":
            log.move_on(count)
            continue
        who = BOB if action == "bob" else principal
        end = log.seed()
        want = whole(log.window, end, who, primed)
        got = seed_history(Span(log.window, end), who, primed)
        assert got.history == want.history
        assert [i is j for i, j in zip(got.history, want.history, strict=True)] == [True] * len(want.history)
        assert list(got.fresh_sequences) == list(want.fresh_sequences)
        assert list(got.fresh_tokens) == list(want.fresh_tokens)
        assert [id(i) for i in got.fresh_items] == [id(i) for i in want.fresh_items]
        primed = log.window.seqs[end - 1] - 1  # what prime_seed records


def test_seeds_in_a_row_continue_and_look_only_at_the_new_items() -> None:
    log = Log()
    log.append([("user", ""), ("pair", ""), ("assistant", "")], CLASSES[0])
    end = log.seed()
    first = seed_history(Span(log.window, end), ALICE, 0)
    view = log.window.view
    assert isinstance(view, View) and view.end == end - 1
    log.append([("pair", ""), ("assistant", "")], CLASSES[1])
    end = log.seed()
    second = seed_history(Span(log.window, end), ALICE, log.window.seqs[-1] - 4)
    assert log.window.view is view and view.end == end - 1  # continued, not rebuilt
    assert second.history[: len(first.history) + 1] == (*first.history, log.window.items[len(first.history)])
    assert len(second.history) == end - 1
    assert list(second.fresh_sequences) == log.window.seqs[end - 4 : end - 1]


def test_a_result_for_a_call_left_open_puts_the_call_back_where_it_was() -> None:
    log = Log()
    log.append([("user", ""), ("call", "x"), ("assistant", "")], CLASSES[0])
    end = log.seed()
    assert [type(i).__name__ for i in seed_history(Span(log.window, end), None, 0).history] == [
        "UserMessage",
        "AssistantMessage",
    ]
    log.append([("result", "x")], CLASSES[0])
    end = log.seed()
    history = seed_history(Span(log.window, end), None, 0).history
    assert [type(i).__name__ for i in history] == [
        "UserMessage",
        "ToolCall",
        "AssistantMessage",
        "UserMessage",
        "ToolResult",
    ]


def test_a_principal_that_decides_a_class_otherwise_starts_over() -> None:
    log = Log()
    log.append([("assistant", "")], Visibility.principal("alice"))
    end = log.seed()
    assert len(seed_history(Span(log.window, end), ALICE, 0).history) == 1
    log.append([("assistant", "")], CLASSES[0])
    end = log.seed()
    assert [i.content for i in seed_history(Span(log.window, end), BOB, 0).history] == ["u2", "a3"]
