"""The estimator's stored-count API (issue 13): ``counter_id`` names how it counts, and
``prime`` memoizes counts read from the store, alike on both backends.

A primed count must be used instead of a recount (priming a deliberately different
number shows which one ``raw`` returns), must not disturb the hit/miss statistics or an
entry already memoized, and bad input is an ``EstimatorError`` on both backends.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.core import backends
from ctxengine.errors import EstimatorError
from ctxengine.model import UserMessage

CORES = [backends.module(name) for name in backends.BACKENDS]


@settings(max_examples=60)
@given(
    st.floats(0.1, 1e22, allow_nan=False),
    st.integers(0, 100),
    st.text(max_size=8),
    st.sampled_from(["history", "compacted_summary", "x|y"]),
)
def test_counter_id_is_the_same_on_both_backends(bpt: float, framing: int, model: str, kind: str) -> None:
    made = [core.TokenEstimator(profiles={"m": (bpt, framing)}) for core in CORES]
    ids = {est.counter_id("m" + model, kind) for est in made}
    assert len(ids) == 1
    (cid,) = ids
    assert cid.startswith("heuristic:") and cid.endswith(f":{framing}|{kind}")
    assert CORES[0].TokenEstimator().counter_id("any", "history") == "heuristic:3:4|history"


@pytest.mark.parametrize("core", CORES, ids=backends.BACKENDS)
def test_a_primed_count_is_used_instead_of_a_recount(core: object) -> None:
    est = core.TokenEstimator()  # type: ignore[attr-defined]
    item = UserMessage("hello there", seq=3)
    digest = core.item_canonical(item)[1]  # type: ignore[attr-defined]
    computed = core.TokenEstimator().raw(item, "m")  # type: ignore[attr-defined]
    est.prime("m", "user_message", [digest], [computed + 1000])
    assert est.memo_stats()["hits"] == est.memo_stats()["misses"] == 0
    assert est.raw(item, "m") == computed + 1000  # read from the memo, not recounted
    assert est.memo_stats()["hits"] == 1
    # An entry already memoized is left as it is; another model's is separate.
    est.prime("m", "user_message", [digest], [7])
    assert est.raw(item, "m") == computed + 1000
    assert est.raw(item, "other") == computed


@pytest.mark.parametrize("core", CORES, ids=backends.BACKENDS)
def test_priming_respects_the_memo_capacity(core: object) -> None:
    est = core.TokenEstimator(memo_capacity=2)  # type: ignore[attr-defined]
    digests = [hashlib.sha256(bytes([i])).digest() for i in range(5)]
    est.prime("m", "k", digests, [1, 2, 3, 4, 5])
    assert est.memo_stats()["size"] == 2
    none = core.TokenEstimator(memo_capacity=0)  # type: ignore[attr-defined]
    none.prime("m", "k", digests[:1], [1])
    assert none.memo_stats()["size"] == 0


@pytest.mark.parametrize(
    ("digests", "raws", "words"),
    [
        ([b"short"], [1], "32-byte"),
        (["not bytes"], [1], "32-byte"),
        ([b"x" * 32], [-1], "negative"),
        ([b"x" * 32], [True], "int"),
        ([b"x" * 32], [2**63], "range"),
        ([b"x" * 32, b"y" * 32], [1], "2 digests for 1 counts"),
    ],
)
def test_bad_primes_are_refused_alike(digests: list[object], raws: list[object], words: str) -> None:
    messages = []
    for core in CORES:
        est = core.TokenEstimator()
        with pytest.raises(EstimatorError, match=words) as err:
            est.prime("m", "k", digests, raws)
        messages.append(str(err.value))
        assert est.memo_stats()["size"] == 0
    assert messages[0] == messages[1]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((1, "history"), "model_id: expected a str, got int"),
        (("m\ud800", "history"), "model_id: lone surrogate"),
        (("m", None), "kind: expected a str, got NoneType"),
        (("m", "k\udc00"), "kind: lone surrogate"),
    ],
)
def test_bad_counter_arguments_are_refused_alike(args: tuple[object, object], words: str) -> None:
    for core in CORES:
        est = core.TokenEstimator()
        with pytest.raises(EstimatorError, match=words):
            est.counter_id(*args)
        with pytest.raises(EstimatorError, match=words):
            est.prime(*args, [], [])
