"""BudgetPolicy shape and allocate(), under both backends (SPEC section 3)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.core import backends

MODEL = ce.ResolvedModel("p", "m", 128_000, 16_384, 8_192)


def test_defaults_match_spec() -> None:
    p = ce.BudgetPolicy()
    assert p.to_dict()["tool_definitions"] == {"max_items": 30, "max_tokens": 6000}
    assert p.to_dict()["history"] == {"floor_tokens": 8000}
    assert (p.output_reserve_tokens, p.safety_margin_ratio, p.tool_results_ratio) == (8192, 0.05, 0.25)
    assert (p.prefix_ceiling_tokens, p.working_state_tokens, p.recall_tokens) == (15000, 1000, 2000)


def test_allocate_reproduces_spec_arithmetic(backend: str) -> None:
    b = ce.allocate(MODEL, 5_000)
    reserve = min(8192, 8_192, 16_384)
    body = 128_000 - reserve - 5_000
    usable = body - math.floor(body * 0.05)
    tool_results = math.floor(usable * 0.25)
    assert b.reserve_output_tokens == reserve
    assert b.body_tokens == body and b.usable_body_tokens == usable
    assert b.tool_result_tokens == tool_results
    assert b.history_tokens == usable - 1000 - tool_results
    assert b.total_tokens == 128_000 and b.prefix_tokens == 5_000
    assert b.knowledge_tokens == 3000 and b.retrieved_context_tokens == 2000


def test_reserve_is_the_smallest_of_policy_model_default_and_max_output(backend: str) -> None:
    small = ce.ResolvedModel("p", "small-out", 64_000, 2_000, 4_000)
    assert ce.allocate(small, 1_000).reserve_output_tokens == 2_000
    policy = ce.BudgetPolicy.from_dict({"output": {"reserve_tokens": 1_500}})
    assert ce.allocate(MODEL, 1_000, policy).reserve_output_tokens == 1_500


@settings(max_examples=60, deadline=None)
@given(
    window=st.integers(20_000, 2_000_000),
    prefix=st.integers(0, 15_000),
    margin=st.floats(0.0, 0.5),
    ratio=st.floats(0.0, 0.6),
)
def test_only_history_scales_with_the_window(window: int, prefix: int, margin: float, ratio: float) -> None:
    policy = ce.BudgetPolicy.from_dict({"safety": {"margin_ratio": margin}, "tool_results": {"ratio": ratio}})
    model = ce.ResolvedModel("p", "m", window, 16_384, 8_192)
    results: dict[str, object] = {}
    previous = ce.backend()
    try:
        for name in backends.BACKENDS:
            ce.use_backend(name)
            try:
                results[name] = ce.allocate(model, prefix, policy)
            except ce.ContextOverflow as exc:
                results[name] = (exc.budget_class, exc.tokens, exc.cap)
    finally:
        ce.use_backend(previous)
    assert results["rust"] == results["python"]
    b = results["rust"]
    if isinstance(b, ce.ContextBudget):
        assert b.history_tokens >= policy.history_floor_tokens
        assert b.prefix_tokens + b.reserve_output_tokens + b.usable_body_tokens <= window
        assert b.working_state_tokens == policy.working_state_tokens  # absolute, not scaled


def test_window_exhausted_names_class_tokens_and_cap(backend: str) -> None:
    tiny = ce.ResolvedModel("p", "tiny", 10_000, 8_192, 8_192)
    with pytest.raises(ce.ContextOverflow) as info:
        ce.allocate(tiny, 2_000)
    assert (info.value.budget_class, info.value.tokens, info.value.cap) == ("context_window", 10_192, 10_000)


def test_history_below_floor(backend: str) -> None:
    small = ce.ResolvedModel("p", "small", 20_000, 4_096, 4_096)
    with pytest.raises(ce.ContextOverflow) as info:
        ce.allocate(small, 3_500)
    assert info.value.budget_class == "history" and info.value.cap == 8000
    assert info.value.tokens < 8000 and "history" in str(info.value)


def test_prefix_over_ceiling(backend: str) -> None:
    with pytest.raises(ce.ContextOverflow) as info:
        ce.allocate(MODEL, 15_001)
    assert (info.value.budget_class, info.value.tokens, info.value.cap) == ("prefix", 15_001, 15_000)


@pytest.mark.parametrize(
    ("klass", "tokens", "items", "cap"),
    [
        ("tool_definitions", 100, 31, 6000),
        ("tool_definitions", 6001, 3, 6000),
        ("agent_instructions", 4001, 1, 4000),
        ("platform_policy", 2001, 1, 2000),
        ("skill_catalog", 10, 21, 1500),
        ("memory_snapshot", 1501, 1, 1500),
    ],
)
def test_prefix_class_over_its_cap(klass: str, tokens: int, items: int, cap: int) -> None:
    with pytest.raises(ce.ContextOverflow) as info:
        ce.check_prefix_class(ce.BudgetPolicy(), klass, tokens, items)
    assert info.value.budget_class == klass and info.value.tokens == tokens and info.value.cap == cap


def test_prefix_class_at_its_cap_passes() -> None:
    ce.check_prefix_class(ce.BudgetPolicy(), "tool_definitions", 6000, 30)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"histroy": {"floor_tokens": 1}}, "histroy"),
        ({"history": {"floor": 1}}, "history.floor"),
        ({"history": {"floor_tokens": -1}}, "history.floor_tokens"),
        ({"history": {"floor_tokens": "8000"}}, "history.floor_tokens"),
        ({"history": {"floor_tokens": True}}, "history.floor_tokens"),
        ({"safety": {"margin_ratio": 1.5}}, "safety.margin_ratio"),
        ({"tool_results": 0.25}, "tool_results"),
    ],
)
def test_bad_policy_key_or_value_names_it(override: dict[str, object], key: str) -> None:
    with pytest.raises(ce.PolicyError) as info:
        ce.BudgetPolicy.from_dict(override)
    assert info.value.key == key and key in str(info.value)


def test_from_toml_overrides_key_by_key(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("[history]\nfloor_tokens = 9000\n[tool_definitions]\nmax_items = 12\n")
    p = ce.BudgetPolicy.from_toml(path)
    assert p.history_floor_tokens == 9000 and p.tool_definitions_items == 12
    assert p.tool_definitions_tokens == 6000
    assert ce.BudgetPolicy.from_dict(p.to_dict()) == p


def test_from_toml_rejects_bad_toml(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[history\n")
    with pytest.raises(ce.PolicyError):
        ce.BudgetPolicy.from_toml(path)
