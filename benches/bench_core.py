"""SPEC section 11, core rows: payload hash of 1 MB, history cut warm and cold.

Each benchmark runs once per backend; `benches/report.py` turns the medians
into the ratios the targets are written in.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from ctxengine.cli.synthetic import chat_payload, synthetic_session
from ctxengine.core import backends
from ctxengine.model import ConversationItem, ResolvedModel

MODEL = ResolvedModel("bench", "model-200k", 200_000, 16_384, 8_192)
CUT_ITEMS = 10_000
# A history budget that retains roughly half of the session, so the cut does real work.
HISTORY_TOKENS = 600_000


@pytest.fixture(scope="module")
def payload() -> dict[str, object]:
    return chat_payload(1_000_000)


@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_payload_hash_1mb(benchmark: Any, name: str, payload: dict[str, object]) -> None:
    core = backends.module(name)
    digest = benchmark(core.payload_hash, payload)
    assert digest == hashlib.sha256(core.canonical_json(payload)).hexdigest()
    benchmark.extra_info["bytes"] = len(core.canonical_json(payload))


def bench_sha256_of_canonical_bytes_1mb(benchmark: Any, payload: dict[str, object]) -> None:
    data = backends.module("python").canonical_json(payload)
    benchmark(lambda: hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_select_history_warm_10k(benchmark: Any, name: str) -> None:
    core = backends.module(name)
    items = synthetic_session(CUT_ITEMS, tag="warm")
    estimator = core.TokenEstimator()
    expected = core.select_history(items, 0, HISTORY_TOKENS, estimator, MODEL.model_id)
    cut = benchmark(core.select_history, items, 0, HISTORY_TOKENS, estimator, MODEL.model_id)
    assert cut == expected and 0 < cut < len(items)


@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_select_history_cold_10k(benchmark: Any, name: str) -> None:
    core = backends.module(name)
    rounds = 0

    def fresh() -> tuple[tuple[list[ConversationItem], int, int, Any, str], dict[str, Any]]:
        nonlocal rounds
        rounds += 1
        items = synthetic_session(CUT_ITEMS, tag=f"cold-{name}-{rounds}")
        return (items, 0, HISTORY_TOKENS, core.TokenEstimator(), MODEL.model_id), {}

    cut = benchmark.pedantic(core.select_history, setup=fresh, rounds=15 if name == "rust" else 3)
    assert 0 < cut < CUT_ITEMS
