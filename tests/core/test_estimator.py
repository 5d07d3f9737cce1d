"""The token estimator: raw estimates, the memo, reconciliation, snapshots,
under both backends and Rust == reference differentially."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine
from ctxengine.core import backends
from ctxengine.errors import EstimatorError
from ctxengine.model import ToolSpec, UserMessage
from strategies import fresh, items, json_values, reconciles, strings

FIXTURE_OK = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# A model without a public tokenizer: counted with the byte heuristic (ADR 0012).
MODEL = "acme:gpt-4o"


def expected_raw(value: Any, bytes_per_token: float = 3.0, framing: int = 4) -> int:
    data = rfc8785.dumps(value.to_dict() if hasattr(value, "to_dict") else value)
    return math.ceil(len(data) / bytes_per_token) + framing


def expected_corrected(raw_sum: int, estimated: int, actual: int) -> int:
    if estimated == 0 or actual <= estimated:
        return raw_sum
    return -(-raw_sum * actual // estimated)


def other_backend(name: str) -> Any:
    return backends.module("python" if name == "rust" else "rust")


# --------------------------------------------------------------------------
# raw estimates


def test_raw_is_ceil_bytes_over_rate_plus_framing(backend: str) -> None:
    est = ctxengine.TokenEstimator()
    item = UserMessage("hello there", seq=1)
    assert est.raw(item, MODEL) == expected_raw(item)
    assert est.estimate_text("hello", MODEL) == math.ceil(len(b'"hello"') / 3.0) + 4 == 7
    assert est.estimate_text("", MODEL) == 1 + 4
    assert est.raw({"a": 1}, MODEL) == math.ceil(7 / 3.0) + 4
    assert est.estimate([], MODEL) == 0
    spec = ToolSpec("search", "find things", {"type": "object"})
    assert est.estimate_tools([spec, spec], MODEL) == 2 * expected_raw(spec)


@FIXTURE_OK
@given(values=st.lists(st.one_of(items, json_values, strings), max_size=8))
def test_raw_estimates_match_formula(backend: str, values: list[Any]) -> None:
    est = ctxengine.TokenEstimator(bytes_per_token=2.5, framing_tokens=3)
    expected = [expected_raw(v, 2.5, 3) for v in values]
    assert est.raw_estimates(values, MODEL) == expected
    assert est.estimate(values, MODEL) == sum(expected)


@FIXTURE_OK
@given(values=st.lists(items, max_size=8), capacity=st.integers(0, 4))
def test_memo_never_changes_a_number(backend: str, values: list[Any], capacity: int) -> None:
    warm = ctxengine.TokenEstimator(memo_capacity=capacity)
    first = warm.raw_estimates(values, MODEL)
    assert warm.raw_estimates(values, MODEL) == first
    assert warm.raw_estimates(list(reversed(values)), MODEL) == list(reversed(first))
    assert warm.estimate(values, MODEL) == sum(first)
    cold = ctxengine.TokenEstimator()
    assert cold.raw_estimates([fresh(v) for v in values], MODEL) == first
    stats = warm.memo_stats()
    assert stats["size"] <= capacity
    assert stats["capacity"] == capacity


def test_memo_stats_count_hits_and_misses(backend: str) -> None:
    est = ctxengine.TokenEstimator(memo_capacity=2)
    a, b, c = UserMessage("a"), UserMessage("b"), UserMessage("c")
    assert est.memo_stats() == {"hits": 0, "misses": 0, "size": 0, "capacity": 2}
    est.raw_estimates([a, b, a], MODEL)
    assert est.memo_stats() == {"hits": 1, "misses": 2, "size": 2, "capacity": 2}
    est.raw(a, "other:model")  # the model id is part of the key
    assert est.memo_stats()["misses"] == 3
    assert est.memo_stats()["size"] == 2
    est.raw(c, MODEL)
    assert est.memo_stats()["size"] == 2


def test_memo_is_least_recently_used(backend: str) -> None:
    est = ctxengine.TokenEstimator(memo_capacity=2)
    a, b, c = UserMessage("a"), UserMessage("b"), UserMessage("c")
    est.raw(a, MODEL)
    est.raw(b, MODEL)
    est.raw(a, MODEL)  # a is now the most recent
    est.raw(c, MODEL)  # evicts b
    hits = est.memo_stats()["hits"]
    est.raw(a, MODEL)
    assert est.memo_stats()["hits"] == hits + 1
    est.raw(b, MODEL)
    assert est.memo_stats()["hits"] == hits + 1


def test_profiles_by_longest_prefix(backend: str) -> None:
    est = ctxengine.TokenEstimator(
        bytes_per_token=3.0,
        framing_tokens=4,
        profiles={"acme:": (4.0, 3), "acme:gpt-4": (2.0, 5), "anthropic:claude": (3.5, 6)},
    )
    item = UserMessage("x" * 100)
    assert est.raw(item, "acme:gpt-4o") == expected_raw(item, 2.0, 5)
    assert est.raw(item, "acme:o1") == expected_raw(item, 4.0, 3)
    assert est.raw(item, "anthropic:claude-3") == expected_raw(item, 3.5, 6)
    assert est.raw(item, "anthropic:other") == expected_raw(item, 3.0, 4)
    assert est.raw(item, "mistral:large") == expected_raw(item, 3.0, 4)
    # the same bytes under another model are estimated with that model's profile
    assert est.raw(item, "acme:gpt-4o") == expected_raw(item, 2.0, 5)


def test_empty_prefix_profile_matches_everything(backend: str) -> None:
    est = ctxengine.TokenEstimator(profiles={"": (1.0, 0), "a": (2.0, 0)})
    assert est.estimate_text("xyz", "zzz") == 5
    assert est.estimate_text("xyz", "abc") == 3


# --------------------------------------------------------------------------
# reconciliation


def test_reconcile_scales_later_estimates(backend: str) -> None:
    est = ctxengine.TokenEstimator()
    item = UserMessage("y" * 300)
    raw = est.estimate([item], MODEL)
    assert est.correction(MODEL) == 1.0
    assert est.error_ratio(MODEL) == 1.0
    est.reconcile(MODEL, 100, 150)
    assert est.estimate([item], MODEL) == math.ceil(raw * 1.5)
    assert est.correction(MODEL) == 1.5
    assert est.error_ratio(MODEL) == 1.5
    est.reconcile(MODEL, 100, 50)  # cumulative: 200 estimated, 200 actual
    assert est.estimate([item], MODEL) == raw
    assert est.correction(MODEL) == 1.0
    assert est.error_ratio(MODEL) == 1.0
    # another model is unaffected
    est.reconcile(MODEL, 10, 40)
    assert est.estimate([item], "other:model") == raw
    assert est.correction("other:model") == 1.0


def test_correction_never_below_one(backend: str) -> None:
    est = ctxengine.TokenEstimator()
    raw = est.estimate_text("z" * 99, MODEL)
    est.reconcile(MODEL, 1000, 10)
    assert est.estimate_text("z" * 99, MODEL) == raw
    assert est.correction(MODEL) == 1.0
    assert est.error_ratio(MODEL) == 0.01
    assert est.corrected(raw, MODEL) == raw


def test_corrected_is_exact_integer_ceiling(backend: str) -> None:
    est = ctxengine.TokenEstimator()
    est.reconcile(MODEL, 3, 10)
    assert est.corrected(3, MODEL) == 10
    assert est.corrected(1, MODEL) == 4
    assert est.corrected(0, MODEL) == 0
    est.reconcile("m:b", 10, 11)
    # 10**15 * 11 / 10 is exact in integers; a float factor would round it
    assert est.corrected(10**15 + 1, "m:b") == (11 * (10**15 + 1) + 9) // 10


@FIXTURE_OK
@given(steps=reconciles, values=st.lists(items, min_size=1, max_size=5))
def test_reconcile_is_cumulative_per_model(
    backend: str, steps: list[tuple[str, int, int]], values: list[Any]
) -> None:
    est = ctxengine.TokenEstimator()
    raw = sum(est.raw_estimates(values, MODEL))
    sums: dict[str, list[int]] = {}
    for model_id, estimated, actual in steps:
        est.reconcile(model_id, estimated, actual)
        s = sums.setdefault(model_id, [0, 0])
        s[0] += estimated
        s[1] += actual
    for model_id in ("m:a", "m:b", "m:c"):
        e, a = sums.get(model_id, [0, 0])
        raw_model = sum(est.raw_estimates(values, model_id))
        assert raw_model == raw
        assert est.estimate(values, model_id) == expected_corrected(raw, e, a)
        assert est.estimate(values, model_id) >= raw
        assert est.correction(model_id) == (max(1.0, a / e) if e else 1.0)
        assert est.error_ratio(model_id) == (a / e if e else 1.0)


@pytest.mark.parametrize(
    ("estimated", "actual"),
    [
        (0, 5),
        (-1, 5),
        (True, 5),
        (1.5, 5),
        ("3", 5),
        (None, 5),
        (5, -1),
        (5, True),
        (5, False),
        (5, 2.0),
        (5, None),
    ],
)
def test_bad_reconcile_args(backend: str, estimated: Any, actual: Any) -> None:
    est = ctxengine.TokenEstimator()
    with pytest.raises(EstimatorError):
        est.reconcile(MODEL, estimated, actual)
    assert est.correction(MODEL) == 1.0
    assert est.snapshot()["corrections"] == {}


def test_reconcile_accepts_zero_actual(backend: str) -> None:
    est = ctxengine.TokenEstimator()
    est.reconcile(MODEL, 5, 0)
    assert est.error_ratio(MODEL) == 0.0
    assert est.correction(MODEL) == 1.0


# --------------------------------------------------------------------------
# snapshot / restore


def populated(module: Any) -> Any:
    est = module.TokenEstimator(
        bytes_per_token=2.75, framing_tokens=5, profiles={"acme:": (4.0, 3)}, memo_capacity=77
    )
    est.reconcile("acme:gpt-4o", 1000, 1333)
    est.reconcile("m:b", 50, 20)
    return est


def test_snapshot_shape(backend: str) -> None:
    est = populated(backends.active())
    # Reconciles leave calibration samples: the snapshot needs version 2 (ADR 0012).
    assert est.snapshot() == {
        "version": 2,
        "bytes_per_token": 2.75,
        "framing_tokens": 5,
        "profiles": {"acme:": [4.0, 3]},
        "memo_capacity": 77,
        "corrections": {"acme:gpt-4o": [1000, 1333], "m:b": [50, 20]},
        "encodings": {},
        "samples": {"acme:gpt-4o": [[1000, 1333]], "m:b": [[50, 20]]},
    }
    snap = est.snapshot()
    assert type(snap["bytes_per_token"]) is float
    assert type(snap["profiles"]["acme:"][0]) is float
    # Nothing version 2 holds: version 1, as before.
    assert ctxengine.TokenEstimator().snapshot() == {
        "version": 1,
        "bytes_per_token": 3.0,
        "framing_tokens": 4,
        "profiles": {},
        "memo_capacity": 100_000,
        "corrections": {},
    }


@FIXTURE_OK
@given(values=st.lists(items, max_size=6))
def test_restore_reproduces_estimates(backend: str, values: list[Any]) -> None:
    est = populated(backends.active())
    snap = est.snapshot()
    for restored in (
        ctxengine.TokenEstimator.restore(snap),
        ctxengine.TokenEstimator.restore(json.loads(json.dumps(snap))),
        other_backend(backend).TokenEstimator.restore(snap),
    ):
        assert restored.snapshot() == snap
        for model_id in ("acme:gpt-4o", "m:b", "x:y"):
            assert restored.raw_estimates(values, model_id) == est.raw_estimates(values, model_id)
            assert restored.estimate(values, model_id) == est.estimate(values, model_id)
            assert restored.correction(model_id) == est.correction(model_id)


def test_restore_from_canonical_json(backend: str) -> None:
    # a snapshot stored as canonical JSON comes back with 3.0 written as 3
    est = ctxengine.TokenEstimator(profiles={"a": (2.0, 1)})
    est.reconcile("a:b", 3, 4)
    snap = json.loads(ctxengine.canonical_json(est.snapshot()))
    assert snap["bytes_per_token"] == 3 and type(snap["bytes_per_token"]) is int
    restored = ctxengine.TokenEstimator.restore(snap)
    assert restored.snapshot() == est.snapshot()
    assert type(restored.snapshot()["bytes_per_token"]) is float


def test_snapshot_crosses_backends(backend: str) -> None:
    est = populated(backends.active())
    there = other_backend(backend).TokenEstimator.restore(est.snapshot())
    back = backends.active().TokenEstimator.restore(there.snapshot())
    assert back.snapshot() == est.snapshot()
    item = UserMessage("w" * 500)
    assert there.estimate([item], "acme:gpt-4o") == est.estimate([item], "acme:gpt-4o")


def _snapshot(**changes: Any) -> dict[str, Any]:
    snap: dict[str, Any] = {
        "version": 1,
        "bytes_per_token": 3.0,
        "framing_tokens": 4,
        "profiles": {},
        "memo_capacity": 100,
        "corrections": {"m": [10, 12]},
    }
    for key, value in changes.items():
        if value is _DROP:
            del snap[key]
        else:
            snap[key] = value
    return snap


_DROP = object()

MALFORMED = [
    _snapshot(version=2),
    _snapshot(version="1"),
    _snapshot(version=_DROP),
    _snapshot(bytes_per_token=_DROP),
    _snapshot(bytes_per_token="3"),
    _snapshot(bytes_per_token=0.0),
    _snapshot(bytes_per_token=-1.0),
    _snapshot(bytes_per_token=float("nan")),
    _snapshot(bytes_per_token=float("inf")),
    _snapshot(framing_tokens=-1),
    _snapshot(framing_tokens=1.5),
    _snapshot(framing_tokens=_DROP),
    _snapshot(memo_capacity=-5),
    _snapshot(memo_capacity="big"),
    _snapshot(profiles=[["a", 1.0, 1]]),
    _snapshot(profiles={"a": [1.0]}),
    _snapshot(profiles={"a": [0.0, 1]}),
    _snapshot(profiles={"a": [1.0, -1]}),
    _snapshot(profiles={"a": "x"}),
    _snapshot(corrections=[["m", 1, 2]]),
    _snapshot(corrections={"m": [1]}),
    _snapshot(corrections={"m": [-1, 2]}),
    _snapshot(corrections={"m": [1, -2]}),
    _snapshot(corrections={"m": [1.5, 2]}),
    _snapshot(corrections={"m": "x"}),
    _snapshot(corrections=_DROP),
    [],
    None,
    "snapshot",
]


@pytest.mark.parametrize("snap", MALFORMED)
def test_malformed_snapshot(backend: str, snap: Any) -> None:
    with pytest.raises(EstimatorError):
        backends.active().TokenEstimator.restore(snap)


def test_wellformed_snapshot_helper_restores(backend: str) -> None:
    est = ctxengine.TokenEstimator.restore(_snapshot())
    assert est.correction("m") == 1.2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bytes_per_token": 0.0},
        {"bytes_per_token": -2.0},
        {"bytes_per_token": float("nan")},
        {"framing_tokens": -1},
        {"memo_capacity": -1},
        {"profiles": {"a": (0.0, 1)}},
        {"profiles": {"a": (1.0, -1)}},
    ],
)
def test_bad_construction(backend: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(EstimatorError):
        backends.active().TokenEstimator(**kwargs)


# --------------------------------------------------------------------------
# differential: Rust == reference

DIFF = settings(max_examples=100, deadline=None)


@DIFF
@given(
    values=st.lists(st.one_of(items, json_values, strings), max_size=8),
    steps=reconciles,
    bytes_per_token=st.sampled_from((1.0, 2.5, 3.0, 3.7, 4.0)),
    framing=st.integers(0, 6),
)
def test_differential_estimates(
    values: list[Any], steps: list[tuple[str, int, int]], bytes_per_token: float, framing: int
) -> None:
    made = []
    for name in ("rust", "python"):
        est = backends.module(name).TokenEstimator(
            bytes_per_token=bytes_per_token, framing_tokens=framing, profiles={"m:b": (2.0, 1)}
        )
        for step in steps:
            est.reconcile(*step)
        made.append(est)
    rust, ref = made
    for model_id in ("m:a", "m:b", "m:bb", "z"):
        ours = [fresh(v) if hasattr(v, "_cj") else v for v in values]
        assert rust.raw_estimates(values, model_id) == ref.raw_estimates(ours, model_id)
        assert rust.estimate(values, model_id) == ref.estimate(values, model_id)
        assert rust.correction(model_id) == ref.correction(model_id)
        assert rust.error_ratio(model_id) == ref.error_ratio(model_id)
        for v in values:
            if isinstance(v, str):
                assert rust.estimate_text(v, model_id) == ref.estimate_text(v, model_id)
    assert rust.snapshot() == ref.snapshot()


def test_counts_are_64_bit(backend: str) -> None:
    est = backends.active().TokenEstimator()
    with pytest.raises(EstimatorError):
        est.reconcile(MODEL, 2**63, 1)
    with pytest.raises(EstimatorError):
        est.reconcile(MODEL, 1, 2**63)
    est.reconcile(MODEL, 3, 7)
    assert est.corrected(2**63 - 1, MODEL) == (7 * (2**63 - 1) + 2) // 3
    with pytest.raises(EstimatorError):
        est.corrected(2**63, MODEL)
    with pytest.raises(EstimatorError):
        est.corrected(1.0, MODEL)
    # the cumulative sums may not pass 2**64 - 1
    est.reconcile("m:big", 2**63 - 1, 0)
    est.reconcile("m:big", 2**63 - 1, 0)
    with pytest.raises(EstimatorError):
        est.reconcile("m:big", 2, 0)
    assert est.snapshot()["corrections"]["m:big"] == [2**64 - 2, 0]
