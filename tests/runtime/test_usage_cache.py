"""Cache accounting (issue 39): ``report_usage`` takes the provider's cached-read and
cache-write token counts and stores them in a new shape of the usage event (ADR 0009:
format version 4, the write switch, an older-reader test; ADR 0020)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.assembly.builder import ContextBuilder
from ctxengine.errors import ArgumentError, UnsupportedFormat
from ctxengine.model import Checkpoint
from ctxengine.plan import ContextPlanner
from ctxengine.runtime.session import ITEM_APPENDED, item_payload
from ctxengine.runtime.usage import (
    USAGE_CACHE_FORMAT,
    USAGE_FORMAT,
    USAGE_REPORTED,
    report_usage,
    stored_usage,
)
from ctxengine.stores.events import NewEvent, Visibility
from ctxengine.stores.formats import WritePolicy
from storekit import older_reader

MODEL = ce.ResolvedModel("anthropic", "claude-y", 200_000, 16_384, 8_192)
AGENT = ce.AgentSpec("agent-1", "v1", "You help with reports.")
ALICE = ce.Principal("alice", "acme", frozenset({"files.read"}))
CLOCK = ce.FixedClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
RUN = ce.RunContext("r1", "s1", 1)


def request_and_estimator() -> tuple[ce.ModelRequest, Any]:
    estimator = ce.TokenEstimator()
    planner = ContextPlanner(None, estimator=estimator, clock=CLOCK)
    plan = planner.draft("s1", 1, AGENT, MODEL, (), policy_version="pv1")
    items = (ce.UserMessage("Summarize the quarterly numbers, please. " * 20, seq=1),)
    builder = ContextBuilder(planner, clock=CLOCK)
    built = builder.assemble(RUN, Checkpoint("r1", conversation=items), AGENT, ALICE, plan=plan)
    return built.request, estimator


async def usage_rows(store: Any) -> list[ce.Event]:
    return list(await store.events.read("s1", types={USAGE_REPORTED}))


async def test_cache_counts_are_stored_in_the_new_shape(store: Any, backend: str) -> None:
    request, estimator = request_and_estimator()
    await report_usage(store, estimator, RUN, request, 1_000, cached_read=700, cache_write=200)
    (event,) = await usage_rows(store)
    assert event.format_version == USAGE_CACHE_FORMAT == 4
    assert (event.payload["cached_read"], event.payload["cache_write"]) == (700, 200)
    usage = stored_usage(event)
    assert (usage.actual, usage.cached_read, usage.cache_write) == (1_000, 700, 200)
    assert usage.uncached == 100
    # The estimator reconciles with every input token, the cached ones included.
    assert estimator.snapshot()["corrections"] == {
        "anthropic:claude-y": [request.metadata["total_tokens"], 1_000]
    }


async def test_without_cache_counts_the_row_keeps_the_old_shape(store: Any, backend: str) -> None:
    request, estimator = request_and_estimator()
    await report_usage(store, estimator, RUN, request, 500)
    (event,) = await usage_rows(store)
    assert event.format_version == USAGE_FORMAT == 2
    assert "cached_read" not in event.payload and "cache_write" not in event.payload
    usage = stored_usage(event)
    assert (usage.cached_read, usage.cache_write, usage.uncached) == (None, None, 500)


async def test_a_zero_count_is_a_report_and_one_count_alone_is_enough(backend: str) -> None:
    store = await ce.open_store("memory://")
    request, estimator = request_and_estimator()
    await report_usage(store, estimator, RUN, request, 500, cached_read=0)
    (event,) = await usage_rows(store)
    assert event.format_version == USAGE_CACHE_FORMAT
    assert (event.payload["cached_read"], event.payload["cache_write"]) == (0, 0)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"cached_read": -1}, "cached_read"),
        ({"cached_read": 1.5}, "cached_read"),
        ({"cached_read": True}, "cached_read"),
        ({"cache_write": "3"}, "cache_write"),
        ({"cache_write": -4}, "cache_write"),
        ({"cached_read": 600, "cache_write": 500}, "cache_write"),  # more than the request's tokens
        ({"cached_read": 1_001}, "cached_read"),
    ],
)
async def test_bad_cache_counts_name_the_parameter_and_write_nothing(
    kwargs: dict[str, Any], named: str
) -> None:
    store = await ce.open_store("memory://")
    request, estimator = request_and_estimator()
    with pytest.raises(ArgumentError) as err:
        await report_usage(store, estimator, RUN, request, 1_000, **kwargs)
    assert err.value.argument == named and err.value.function == "report_usage"
    assert await usage_rows(store) == []
    assert estimator.snapshot()["corrections"] == {}  # refused before reconciling


@pytest.mark.parametrize("actual", [-1, 2.0, None, True])
async def test_a_bad_actual_is_an_argument_error_too(actual: Any) -> None:
    store = await ce.open_store("memory://")
    request, estimator = request_and_estimator()
    with pytest.raises(ArgumentError) as err:
        await report_usage(store, estimator, RUN, request, actual)
    assert err.value.argument == "actual"


@pytest.mark.parametrize("pin", [2, 3])
async def test_a_deployment_pinned_below_format_4_records_the_old_shape(pin: int, backend: str) -> None:
    """The write switch: until every reader knows format 4 the counts are left out, the
    request's usage is still recorded as format 2 and the estimator still reconciles."""
    store = await ce.open_store("memory://", write_policy=WritePolicy(max_version=pin))
    request, estimator = request_and_estimator()
    await report_usage(store, estimator, RUN, request, 1_000, cached_read=700, cache_write=200)
    (event,) = await usage_rows(store)
    assert event.format_version == USAGE_FORMAT
    assert "cached_read" not in event.payload
    assert estimator.snapshot()["corrections"] != {}


async def test_the_environment_switch_pins_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXENGINE_WRITE_FORMAT", "3")
    store = await ce.open_store("memory://")
    request, estimator = request_and_estimator()
    await report_usage(store, estimator, RUN, request, 1_000, cached_read=700)
    (event,) = await usage_rows(store)
    assert event.format_version == USAGE_FORMAT and "cached_read" not in event.payload


async def test_a_usage_row_of_the_release_before_reads_with_no_cache_counts(store: Any) -> None:
    """What 0.2.0 wrote (the payload ``test_plan_counting`` pins) reads back: counts absent."""
    old = {
        "run_id": "r1",
        "step": 0,
        "epoch": 1,
        "model_id": "openai:gpt-4o-mini",
        "counting": "o200k_base",
        "estimated": 120,
        "actual": 118,
    }
    await store.events.append(
        NewEvent("s1", USAGE_REPORTED, old, "context.usage.reported:r1:0", visibility=Visibility.session())
    )
    (event,) = await usage_rows(store)
    assert event.format_version == 2
    usage = stored_usage(event)
    assert (usage.actual, usage.cached_read, usage.cache_write, usage.uncached) == (118, None, None, 118)


async def test_a_format_4_row_without_its_counts_is_corrupt(backend: str) -> None:
    store = await ce.open_store("memory://")
    payload = {
        "run_id": "r1",
        "step": 0,
        "epoch": 1,
        "model_id": "m:x",
        "counting": "heuristic",
        "estimated": 1,
        "actual": 1,
    }
    await store.events.append(
        NewEvent("s1", USAGE_REPORTED, payload, "k:1", visibility=Visibility.session(), format_version=4)
    )
    (event,) = await usage_rows(store)
    with pytest.raises(ce.StoreCorruption, match="cached_read"):
        stored_usage(event)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_reader_of_format_3_refuses_a_usage_row_with_cache_counts(
    kind: str, store_case_factory: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = store_case_factory(kind)
    store = await case.open(clock)
    try:
        await store.events.append(
            NewEvent(
                "s1",
                ITEM_APPENDED,
                item_payload(ce.UserMessage("hi")),
                "u:1",
                visibility=Visibility.session(),
            )
        )
        request, estimator = request_and_estimator()
        await report_usage(store, estimator, RUN, request, 1_000, cached_read=700, cache_write=200)
        sequence = (await usage_rows(store))[0].sequence
        older_reader(monkeypatch, 3)
        for read in (
            lambda: store.events.read("s1"),
            lambda: store.events.read("s1", types={USAGE_REPORTED}),
            lambda: store.events.read("s1", types={ITEM_APPENDED}),
        ):
            with pytest.raises(UnsupportedFormat) as err:
                await read()
            assert err.value.needed_version == 4 and err.value.sequence == sequence
        # Below the newer row the session reads as before.
        assert len(await store.events.read("s1", before=sequence)) == 1
    finally:
        await case.close_all()
        await store.close()


async def test_the_loop_passes_the_counts_through(backend: str) -> None:
    from ctxengine.cli.turns import ScriptedWorker

    store = await ce.open_store("memory://")
    worker = ScriptedWorker(store)
    request, _ = request_and_estimator()
    await worker.loop.report_usage(RUN, request, 900, cached_read=512, cache_write=128)
    usage = stored_usage((await usage_rows(store))[0])
    assert (usage.actual, usage.cached_read, usage.cache_write) == (900, 512, 128)
