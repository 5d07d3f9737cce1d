"""Model-backed compaction (issue 43): what a ``ModelCompactor`` adds to the extractive
compaction of a 10,000-item history, with a router that answers at once (the request's
trust filtering, fencing and hashing, and the check of the reply; the model's own latency
is the provider's). Compare with ``bench_runtime.bench_compaction_10k_warm``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import ctxengine as ce
from bench_runtime import MODEL, _checkpoint
from ctxengine.core import backends
from ctxengine.core.budget import allocate


@pytest.fixture
def use(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = backends.backend()
    ce.use_backend(request.param)
    try:
        yield request.param
    finally:
        ce.use_backend(previous)


async def _instant(request: ce.ModelRequest) -> ce.RouterReply:
    return ce.RouterReply("The user asked for a series of look-ups; each was answered.", 10, 10)


@pytest.mark.parametrize("use", backends.BACKENDS, indirect=True)
def bench_model_compaction_10k_warm(benchmark: Any, use: str) -> None:
    cp, seed = _checkpoint(f"model-compact-{use}")
    compactor = ce.ModelCompactor(ce.TokenEstimator(), _instant, model_id="bench:instant")
    budget = allocate(MODEL, 2_000)

    def run() -> Any:
        return asyncio.run(
            compactor.compact_async(
                cp, budget, "history_requires_compaction", model_id=MODEL.model_id, seed_sequence=seed
            )
        )

    new, result = benchmark(run)
    assert result.summarizer is not None and result.summarizer.outcome == "adopted"
    assert new.compacted_summary is not None and result.replaced_items > 1_000
