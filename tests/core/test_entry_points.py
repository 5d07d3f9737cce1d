"""Every entry point of the backend seam checks its arguments (ADR 0010):
the same ``ContextError`` subclass and the same message on both backends,
naming the argument, before any work."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ctxengine.core import backends
from ctxengine.errors import (
    ArgumentError,
    ContextError,
    EstimatorError,
    ModelValidationError,
    OrphanedToolPair,
)
from ctxengine.model import Checkpoint, ToolCall, ToolResult, ToolSpec, UserMessage

MODEL = "test:model"


def session() -> list[Any]:
    return [
        UserMessage("hi", seq=1),
        ToolCall("c1", "f", {"q": 1}, seq=2),
        ToolResult("c1", "r", seq=3),
        UserMessage("again", seq=4),
    ]


def cut(**changes: Any) -> Callable[[Any], Any]:
    def call(core: Any) -> Any:
        args: dict[str, Any] = {
            "items": session(),
            "summary_floor": 0,
            "history_tokens": 1000,
            "estimator": core.TokenEstimator(),
            "model_id": MODEL,
        }
        args.update(changes)
        return core.select_history(**args)

    return call


def allocate(**changes: Any) -> Callable[[Any], Any]:
    def call(core: Any) -> Any:
        args: dict[str, Any] = {
            "context_window": 200_000,
            "max_output_tokens": 16_000,
            "default_output_reserve": 8_000,
            "prefix_tokens": 1_000,
            "reserve_tokens": 8_000,
            "margin_ratio": 0.05,
            "tool_results_ratio": 0.25,
            "working_state_tokens": 1_000,
            "history_floor": 100,
            "prefix_ceiling": 5_000,
        }
        args.update(changes)
        return core.allocate_tokens(**args)

    return call


def estimator(method: str, *args: Any) -> Callable[[Any], Any]:
    return lambda core: getattr(core.TokenEstimator(), method)(*args)


class Weird:
    """Looks like a conversation item except for its kind."""

    _cj = None
    kind = "weird"

    def to_dict(self) -> dict[str, Any]:
        return {}


class NumberedCall:
    """A tool call (by its kind) whose call id is not a string."""

    _cj = None
    kind = "tool_call"
    call_id = 7

    def to_dict(self) -> dict[str, Any]:
        return {"call_id": 7}


ARGUMENT_CASES: list[tuple[str, Callable[[Any], Any], str, str]] = [
    # select_history: the items first
    ("items None", cut(items=None), "items", "expected a sequence of conversation items, got NoneType"),
    ("items str", cut(items="abc"), "items", "expected a sequence of conversation items, got str"),
    ("items dict", cut(items={}), "items", "expected a sequence of conversation items, got dict"),
    ("item None", cut(items=[None]), "items[0]", "expected a conversation item, got NoneType"),
    ("item str", cut(items=["x"]), "items[0]", "expected a conversation item, got str"),
    ("item int", cut(items=[UserMessage("a"), 1]), "items[1]", "expected a conversation item, got int"),
    (
        "item spec",
        cut(items=[ToolSpec("t", "d", {})]),
        "items[0]",
        "expected a conversation item, got ToolSpec",
    ),
    ("item kind", cut(items=[Weird()]), "items[0]", "expected a conversation item, got Weird"),
    (
        "call id",
        cut(items=[NumberedCall()]),
        "items[0].call_id",
        "expected a str, got int",
    ),
    # then the rest, in order
    ("floor float", cut(summary_floor=1.5), "summary_floor", "expected an int or None, got float"),
    ("floor bool", cut(summary_floor=True), "summary_floor", "expected an int or None, got bool"),
    ("floor huge", cut(summary_floor=2**70), "summary_floor", f"out of range, got {2**70}"),
    ("tokens float", cut(history_tokens=1.5), "history_tokens", "expected an int, got float"),
    ("tokens None", cut(history_tokens=None), "history_tokens", "expected an int, got NoneType"),
    ("estimator", cut(estimator=object()), "estimator", "expected a token estimator, got object"),
    ("model id", cut(model_id=5), "model_id", "expected a str, got int"),
    ("raw length", cut(raw=[1, 2]), "raw", "2 estimates for 4 items"),
    ("raw type", cut(raw=[1, 2, 3.0, 4]), "raw[2]", "expected an int, got float"),
    ("raw negative", cut(raw=[1, 2, -3, 4]), "raw[2]", "must not be negative, got -3"),
    # an item error comes before any other argument's, a pairing error after them all
    (
        "order",
        cut(items=[ToolResult("x", "r"), None], model_id=5),
        "items[1]",
        "expected a conversation item",
    ),
    ("order 2", cut(items=[ToolResult("x", "r")], model_id=5), "model_id", "expected a str, got int"),
    # validate_tool_pairs
    (
        "pairs str",
        lambda core: core.validate_tool_pairs("abc"),
        "items",
        "expected a sequence of conversation items, got str",
    ),
    ("pairs None", lambda core: core.validate_tool_pairs([None]), "items[0]", "expected a conversation item"),
    # allocate_tokens
    ("window float", allocate(context_window=1.5), "context_window", "expected an int, got float"),
    ("window bool", allocate(context_window=True), "context_window", "expected an int, got bool"),
    ("window huge", allocate(context_window=2**70), "context_window", f"out of range, got {2**70}"),
    ("ratio str", allocate(margin_ratio="0.1"), "margin_ratio", "expected a number, got str"),
    ("ratio bool", allocate(tool_results_ratio=False), "tool_results_ratio", "expected a number, got bool"),
    ("ratio huge", allocate(margin_ratio=10**400), "margin_ratio", f"out of range, got {10**400}"),
]


@pytest.mark.parametrize(
    ("name", "call", "argument", "reason"), ARGUMENT_CASES, ids=[c[0] for c in ARGUMENT_CASES]
)
def test_arguments_are_checked_alike(
    name: str, call: Callable[[Any], Any], argument: str, reason: str
) -> None:
    messages = []
    for backend in backends.BACKENDS:
        with pytest.raises(ArgumentError) as info:
            call(backends.module(backend))
        error = info.value
        assert error.argument == argument, backend
        assert error.reason.startswith(reason), backend
        assert isinstance(error, TypeError) and isinstance(error, ValueError)
        messages.append(str(error))
    assert messages[0] == messages[1]


ESTIMATOR_CASES: list[tuple[str, Callable[[Any], Any], str]] = [
    ("raw", estimator("raw", "x", 5), "model_id: expected a str, got int"),
    ("raw_estimates", estimator("raw_estimates", ["x"], None), "model_id: expected a str, got NoneType"),
    (
        "raw_estimates str",
        estimator("raw_estimates", "abc", MODEL),
        "items: expected a sequence of values, got str",
    ),
    (
        "estimate None",
        estimator("estimate", None, MODEL),
        "items: expected a sequence of values, got NoneType",
    ),
    ("estimate model", estimator("estimate", [], 5), "model_id: expected a str, got int"),
    ("estimate_text", estimator("estimate_text", "t", b"m"), "model_id: expected a str, got bytes"),
    ("estimate_text text", estimator("estimate_text", 5, 5), "text: expected a str, got int"),
    (
        "estimate_tools",
        estimator("estimate_tools", {"a": 1}, MODEL),
        "tools: expected a sequence of values, got dict",
    ),
    ("corrected", estimator("corrected", 5, 5), "model_id: expected a str, got int"),
    ("corrected sum", estimator("corrected", 1.5, MODEL), "raw_sum: expected an int, got float"),
    ("correction", estimator("correction", 5), "model_id: expected a str, got int"),
    ("error_ratio", estimator("error_ratio", None), "model_id: expected a str, got NoneType"),
    ("reconcile", estimator("reconcile", 5, 1, 1), "model_id: expected a str, got int"),
]


@pytest.mark.parametrize(("name", "call", "message"), ESTIMATOR_CASES, ids=[c[0] for c in ESTIMATOR_CASES])
def test_estimator_arguments_are_checked_alike(name: str, call: Callable[[Any], Any], message: str) -> None:
    for backend in backends.BACKENDS:
        with pytest.raises(EstimatorError) as info:
            call(backends.module(backend))
        assert str(info.value) == message, backend


def test_no_summary_floor_means_no_floor(backend: str) -> None:
    import ctxengine

    est = ctxengine.TokenEstimator()
    items = session()
    assert ctxengine.select_history(items, None, 10**6, est, MODEL) == 0
    assert ctxengine.select_history(items, 2, 10**6, est, MODEL) == 3  # past the pair at 1-2


def test_a_pairing_error_comes_after_the_arguments(backend: str) -> None:
    import ctxengine

    orphan = [ToolResult("x", "r")]
    with pytest.raises(OrphanedToolPair):
        ctxengine.select_history(orphan, 0, 10, ctxengine.TokenEstimator(), MODEL)
    with pytest.raises(OrphanedToolPair):
        ctxengine.validate_tool_pairs(orphan)


def test_foreign_estimators_are_checked_alike() -> None:
    class Floaty:
        def raw_estimates(self, items: Any, model_id: str) -> list[float]:
            return [1.0 for _ in items]

        def corrected(self, raw_sum: int, model_id: str) -> int:
            return raw_sum

    class Short(Floaty):
        def raw_estimates(self, items: Any, model_id: str) -> list[float]:
            return [1]

    class FloatCorrection(Floaty):
        def raw_estimates(self, items: Any, model_id: str) -> list[float]:
            return [1 for _ in items]

        def corrected(self, raw_sum: int, model_id: str) -> Any:
            return raw_sum * 1.5

    for bad, message in (
        (Floaty(), "estimator.raw_estimates returned 1.0, not a count"),
        (Short(), "estimator.raw_estimates returned 1 estimates for 4 items"),
        (FloatCorrection(), "estimator.corrected returned float, not an int"),
    ):
        for name in backends.BACKENDS:
            with pytest.raises(EstimatorError) as info:
                backends.module(name).select_history(session(), 0, 10, bad, MODEL)
            assert str(info.value) == message


def test_checkpoint_names_the_bad_conversation_entry() -> None:
    with pytest.raises(ModelValidationError) as info:
        Checkpoint("r", conversation=({},))  # type: ignore[arg-type]
    assert info.value.field == "conversation[0]"
    assert "got dict" in info.value.reason
    assert isinstance(info.value, ContextError)
