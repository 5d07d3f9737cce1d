"""Tokenizer throughput (ADR 0012, issue 14 acceptance 2): exact counting of each
content class of the accuracy corpus, about 1 MB a round, on one core.

``extra_info["bytes"]`` over the median gives MB/s per core; `benches/report.py`
prints it. The Rust backend counts with ``bpe-openai``, the reference with
``tiktoken`` (also compiled code: the ratio is a comparison of tokenizers, not of
Rust with Python).
"""

from __future__ import annotations

from typing import Any

import pytest

from ctxengine.cli.bench_counting import CLASSES, corpus_items
from ctxengine.core import backends

TARGET_BYTES = 1_000_000
ITEM_BYTES = 2_000


def items_of(name: str) -> list[str]:
    """About 1 MB of the class, as items of about 2 kB (cut on line ends)."""
    return corpus_items(name, TARGET_BYTES, ITEM_BYTES)


@pytest.mark.parametrize("content", list(CLASSES))
@pytest.mark.parametrize("name", backends.BACKENDS)
def bench_count_tokens_1mb(benchmark: Any, name: str, content: str) -> None:
    core = backends.module(name)
    items = items_of(content)
    encoding = "o200k_base"
    core.count_tokens(encoding, "warm up")

    def count() -> int:
        return sum(core.count_tokens(encoding, item) for item in items)

    total = benchmark(count)
    assert total == sum(backends.module("python").count_tokens(encoding, item) for item in items)
    benchmark.extra_info["bytes"] = sum(len(item.encode("utf-8")) for item in items)
    benchmark.extra_info["tokens"] = total
