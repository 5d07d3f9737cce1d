"""The estimator's settings, counts and snapshots are checked by the Rust
core and by the reference alike: the same ``EstimatorError``, word for word,
on both backends (the checks live in ``rust/core/src/estimate/config.rs``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from test_estimator import MALFORMED, _snapshot

from ctxengine.core import backends

Check = Callable[[Any], Any]


class Pairs(Mapping[Any, Any]):
    """A mapping that is not a dict."""

    def __init__(self, *pairs: tuple[Any, Any]) -> None:
        self._pairs = dict(pairs)

    def __getitem__(self, key: Any) -> Any:
        return self._pairs[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)


def _new(**kwargs: Any) -> Check:
    return lambda m: m.TokenEstimator(**kwargs)


def _restore(snap: Any) -> Check:
    return lambda m: m.TokenEstimator.restore(snap)


CHECKS: list[tuple[str, Check]] = [
    ("bpt huge int", _new(bytes_per_token=10**400)),
    ("bpt big int ok", _new(bytes_per_token=10**30)),
    ("bpt negative huge", _new(bytes_per_token=-(10**400))),
    ("bpt bool", _new(bytes_per_token=True)),
    ("bpt str", _new(bytes_per_token="3")),
    ("bpt nan", _new(bytes_per_token=float("nan"))),
    ("bpt None", _new(bytes_per_token=None)),
    ("framing None", _new(framing_tokens=None)),
    ("memo None", _new(memo_capacity=None)),
    ("profiles and encodings None", _new(profiles=None, encodings=None)),
    ("framing huge", _new(framing_tokens=2**63)),
    ("framing huge negative", _new(framing_tokens=-(2**70))),
    ("framing float", _new(framing_tokens=4.0)),
    ("memo bool", _new(memo_capacity=False)),
    ("profiles list", _new(profiles=[("a", (1.0, 1))])),
    ("profiles non-str prefix", _new(profiles={1: (1.0, 1)})),
    ("profiles surrogate prefix", _new(profiles={"a\ud800": "not a pair"})),
    ("profiles bad pair", _new(profiles={"a": (1.0,)})),
    ("profiles pair str", _new(profiles={"a": "xy"})),
    ("profiles mapping", _new(profiles=Pairs(("a", [2.0, 1]), ("b", (0.0, 1))))),
    ("profiles ok mapping", _new(profiles=Pairs(("a", [2.0, 1])))),
    ("reconcile zero", lambda m: m.TokenEstimator().reconcile("m", 0, 1)),
    ("reconcile huge", lambda m: m.TokenEstimator().reconcile("m", 2**64, 1)),
    ("reconcile actual bool", lambda m: m.TokenEstimator().reconcile("m", 1, True)),
    ("reconcile actual huge", lambda m: m.TokenEstimator().reconcile("m", 1, 2**63)),
    ("corrected float", lambda m: m.TokenEstimator().corrected(1.0, "m")),
    ("corrected huge", lambda m: m.TokenEstimator().corrected(-(2**63) - 1, "m")),
    ("corrected min", lambda m: m.TokenEstimator().corrected(-(2**63), "m")),
    ("snapshot non-str key", _restore({**_snapshot(), 7: 1})),
    ("snapshot unknown keys", _restore({**_snapshot(), "zz": 1, "aa": 2})),
    ("snapshot missing and unknown", _restore({"zz": 1})),
    ("snapshot version bool", _restore(_snapshot(version=True))),
    ("snapshot corrections key", _restore(_snapshot(corrections={5: [1, 2]}))),
    ("snapshot corrections surrogate", _restore(_snapshot(corrections={"m\udc00": [1, 2]}))),
    ("snapshot corrections huge", _restore(_snapshot(corrections={"m": [2**64, 2]}))),
    ("snapshot as a Mapping", _restore(Pairs(*_snapshot().items()))),
    *[(f"malformed {i}", _restore(snap)) for i, snap in enumerate(MALFORMED)],
]


def _outcome(module: Any, check: Check) -> tuple[str, str]:
    try:
        result = check(module)
    except Exception as exc:  # the comparison is the point
        return type(exc).__name__, str(exc)
    snap = result.snapshot() if hasattr(result, "snapshot") else result
    return "ok", repr(snap)


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[name for name, _ in CHECKS])
def test_the_same_words_on_both_backends(name: str, check: Check) -> None:
    rust = _outcome(backends.module("rust"), check)
    python = _outcome(backends.module("python"), check)
    assert rust == python
    assert rust[0] in {"ok", "EstimatorError", "ArgumentError"}, rust


@pytest.mark.parametrize("name", ["rust", "python"])
def test_an_unknown_or_positional_argument_is_a_type_error(name: str) -> None:
    module = backends.module(name)
    with pytest.raises(TypeError, match="bytes_per_tokens"):
        module.TokenEstimator(bytes_per_tokens=3.0)
    with pytest.raises(TypeError):
        module.TokenEstimator(3.0)
