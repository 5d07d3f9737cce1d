"""Any value in any numeric or string argument gets the same result on both backends: the
same value, or an ``ArgumentError`` worded the same (issue 38: the Rust wording lives in
``ctxengine_core::arguments``, the reference's in ``reference/arguments.py``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.core import backends
from ctxengine.errors import ContextError
from ctxengine.model import UserMessage


class MyInt(int):
    pass


class MyFloat(float):
    pass


class MyStr(str):
    pass


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**400, -(10**400)]),
    st.integers(-5, 5).map(MyInt),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-10, 10).map(MyFloat),
    st.text(max_size=3),
    st.sampled_from(["\ud800", MyStr("m"), b"x", [1], {"a": 1}, object()]),
)

ALLOCATE = {
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


def outcome(call: Any, core: Any) -> tuple[str, Any]:
    try:
        return "value", call(core)
    except ContextError as error:
        return type(error).__name__, str(error)


def alike(call: Any) -> None:
    results = [outcome(call, backends.module(name)) for name in backends.BACKENDS]
    assert results[0] == results[1]


@settings(max_examples=300)
@given(st.sampled_from(sorted(ALLOCATE)), values)
def test_allocate_tokens_arguments(name: str, value: Any) -> None:
    alike(lambda core: core.allocate_tokens(**{**ALLOCATE, name: value}))


@settings(max_examples=300)
@given(st.sampled_from(["summary_floor", "history_tokens", "model_id", "raw"]), values)
def test_select_history_arguments(name: str, value: Any) -> None:
    def call(core: Any) -> Any:
        args = {
            "items": [UserMessage("hi", seq=1)],
            "summary_floor": 0,
            "history_tokens": 1000,
            "estimator": core.TokenEstimator(),
            "model_id": "m",
            "raw": None,
            name: [value] if name == "raw" else value,
        }
        return core.select_history(**args)

    alike(call)


@settings(max_examples=200)
@given(values)
def test_estimator_model_id(value: Any) -> None:
    alike(lambda core: core.TokenEstimator().raw("x", value))
