"""``ctxengine inspect`` shows a session's cached fraction and effective input cost
(issue 39, ADR 0020), with a configurable price table."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from ctxengine.cli import main
from ctxengine.cli.console import Console
from ctxengine.cli.inspection import inspect_session, print_summary
from ctxengine.core.prompt_cache import PriceTable
from ctxengine.runtime.usage import USAGE_REPORTED
from ctxengine.stores import open_store
from ctxengine.stores.events import NewEvent, Visibility

BASE = {"run_id": "r1", "epoch": 1, "model_id": "anthropic:claude-y", "counting": "heuristic", "estimated": 1}


async def write_usage(url: str) -> None:
    store = await open_store(url)
    try:
        rows = [
            ({**BASE, "step": 0, "actual": 1_000}, 2),  # written before cache counts existed
            ({**BASE, "step": 1, "actual": 2_000, "cached_read": 1_500, "cache_write": 300}, 4),
            ({**BASE, "step": 2, "actual": 3_000, "cached_read": 2_700, "cache_write": 0}, 4),
        ]
        for payload, version in rows:
            await store.events.append(
                NewEvent(
                    "s1",
                    USAGE_REPORTED,
                    payload,
                    f"u:{payload['step']}",
                    visibility=Visibility.session(),
                    format_version=version,
                )
            )
    finally:
        await store.close()


EXPECTED = {
    "requests": 3,
    "reported": 2,
    "input_tokens": 6_000,
    "cached_read": 4_200,
    "cache_write": 300,
    # of the input of the requests that reported cache counts
    "cached_fraction": 4_200 / 5_000,
    # 1,000 uncached + (200 + 150 + 375) + (300 + 270)
    "effective_input_cost": 1_000 + 200 + 150 + 375 + 300 + 270,
    "uncached_input_cost": 6_000,
}


def test_the_summary_has_the_cached_fraction_and_effective_cost(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    asyncio.run(write_usage(url))

    async def read(prices: PriceTable) -> dict[str, object]:
        store = await open_store(url, read_only=True)
        try:
            summary = await inspect_session(store, "s1", prices=prices)
        finally:
            await store.close()
        out = io.StringIO()
        print_summary(summary, Console(file=out))
        text = out.getvalue()
        assert "84.0%" in text and "effective input cost" in text
        expected = f"{prices.cost(1_000) + prices.cost(2_000, 1_500, 300) + prices.cost(3_000, 2_700):,.2f}"
        assert expected in text
        return summary.to_dict()

    data = asyncio.run(read(PriceTable()))
    cache = data["cache"]
    assert isinstance(cache, dict)
    assert cache["prices"] == {"input": 1.0, "cached_read": 0.1, "cache_write": 1.25}
    for key, value in EXPECTED.items():
        assert cache[key] == pytest.approx(value), key
    assert [u["cached_read"] for u in data["usage"]] == [None, 1_500, 2_700]  # type: ignore[index]
    other = asyncio.run(read(PriceTable(input=2.0, cached_read=0.5, cache_write=1.0)))["cache"]
    assert other["effective_input_cost"] == pytest.approx(2 * (1_000 + 200 + 750 + 300 + 300 + 1_350))  # type: ignore[index]


def test_the_price_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    asyncio.run(write_usage(url))
    flags = ["--input-price", "3", "--cached-read-price", "0.5", "--cache-write-price", "2"]
    assert main(["inspect", "--store", url, "s1", "--json", *flags]) == 0
    cache = json.loads(capsys.readouterr().out)["cache"]
    assert cache["prices"] == {"input": 3.0, "cached_read": 0.5, "cache_write": 2.0}
    assert cache["effective_input_cost"] == pytest.approx(3 * (1_000 + 200 + 750 + 600 + 300 + 1_350))
    with pytest.raises(SystemExit):
        main(["inspect", "--store", url, "s1", "--cached-read-price", "-1"])
    assert "--cached-read-price" in capsys.readouterr().err
