"""Spans and counters (issue 40): with OpenTelemetry's SDK and in-memory exporters, a build
records its session, run, step, tokens by region and cut, an overflow counts, and a store open
is a span; without a provider nothing is recorded and ``span`` is the shared no-op."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ctxengine as ce
from builder_fixtures import AGENT, ALICE, checkpoint_for, make_builder, make_plan, run_at, session
from ctxengine.core import telemetry
from hidden_imports import run_without


class Recorded:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        telemetry.configure(tracer_provider=tracer_provider, meter_provider=MeterProvider([self.metrics]))

    def finished(self, name: str) -> list[Any]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def counters(self) -> dict[str, list[tuple[dict[str, Any], int]]]:
        out: dict[str, list[tuple[dict[str, Any], int]]] = {}
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out[metric.name] = [(dict(p.attributes), p.value) for p in metric.data.data_points]
        return out


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    yield Recorded()
    telemetry.configure()


def test_a_build_is_a_span_with_its_run_tokens_by_region_and_cut(backend: str, recorded: Recorded) -> None:
    planner, plan = make_plan(128_000)
    builder = make_builder(planner)
    items = session(3)
    seed = len(items) - 4
    assembly = builder.assemble(run_at(items, seed, step=2), checkpoint_for(items), AGENT, ALICE, plan=plan)

    [span] = recorded.finished("ctxengine.build")
    a = dict(span.attributes)
    assert (a["ctxengine.session_id"], a["ctxengine.run_id"], a["ctxengine.step"]) == ("s1", "r1", 2)
    p = assembly.pressure
    assert a["ctxengine.fits"] is True and a["ctxengine.reason"] == "fits"
    assert a["ctxengine.history_cut"] == p.history_cut and a["ctxengine.total_tokens"] == p.total_tokens
    assert a["ctxengine.tokens.prefix"] == p.prefix_tokens == plan.prefix_tokens
    regions = {key.removeprefix("ctxengine.tokens.") for key in a if key.startswith("ctxengine.tokens.")}
    assert {"prefix", "history", "current_user"} <= regions
    assert {item.region_class for item in assembly.request.body} == regions - {"prefix"}
    assert all(a[f"ctxengine.tokens.{r}"] > 0 for r in regions)
    assert recorded.counters()["ctxengine.builds"] == [({}, 1)]


def test_an_overflow_counts_and_its_span_names_the_cut(backend: str, recorded: Recorded) -> None:
    planner, plan = make_plan(24_000)
    builder = make_builder(planner)
    items = session(60, result_size=600)
    p = builder.assemble(
        run_at(items, len(items) - 4), checkpoint_for(items), AGENT, ALICE, plan=plan
    ).pressure
    assert not p.fits and p.history_cut > 0
    [span] = recorded.finished("ctxengine.build")
    assert span.attributes["ctxengine.reason"] == "history_requires_compaction"
    assert span.attributes["ctxengine.history_cut"] == p.history_cut
    assert span.attributes["ctxengine.compactable"] is True
    overflows = recorded.counters()["ctxengine.overflows"]
    assert overflows == [
        ({"ctxengine.reason": "history_requires_compaction", "ctxengine.compactable": True}, 1)
    ]


async def test_a_store_open_is_a_span(tmp_path: Any, recorded: Recorded) -> None:
    store = await ce.open_store(f"sqlite:///{tmp_path / 't.db'}")
    await store.close()
    with pytest.raises(ce.StoreOpenError):
        await ce.open_store(f"sqlite:///{tmp_path / 'missing' / 't.db'}")
    opened, failed = recorded.finished("ctxengine.store.open")
    assert opened.attributes["ctxengine.store"] == "sqlite"
    assert opened.attributes["ctxengine.store.name"] == f"SQLiteStore({str(tmp_path / 't.db')!r})"
    assert opened.status.is_ok and not failed.status.is_ok
    assert failed.events[0].name == "exception"
    assert recorded.counters()["ctxengine.store.opens"] == [({"ctxengine.store": "sqlite"}, 1)]


def test_the_engine_spans_nest_under_the_application_span(recorded: Recorded) -> None:
    tracer = telemetry._live_tracer()
    planner, plan = make_plan(128_000)
    items = session(1)
    with tracer.start_as_current_span("agent.turn"):
        make_builder(planner).assemble(run_at(items, 0), checkpoint_for(items), AGENT, ALICE, plan=plan)
    [build] = recorded.finished("ctxengine.build")
    [turn] = recorded.finished("agent.turn")
    assert build.parent is not None and build.parent.span_id == turn.context.span_id


def test_without_a_provider_a_span_is_the_shared_no_op() -> None:
    telemetry.configure()
    # The test process imports OpenTelemetry's SDK but sets no global provider.
    assert not telemetry.enabled()
    assert telemetry.span("ctxengine.build", session_id="s") is telemetry.NOOP
    telemetry.add("ctxengine.builds")  # nothing to count into, nothing raised
    done = run_without(
        ("opentelemetry",),
        "from ctxengine.core import telemetry\n"
        "with telemetry.span('x', a=1) as s:\n"
        "    assert not s.is_recording()\n"
        "telemetry.add('ctxengine.builds')\n"
        "print(telemetry.enabled())",
    )
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def test_the_global_providers_of_an_application_are_used() -> None:
    """No ``configure``: the providers the application set through OpenTelemetry's globals."""
    code = """
import asyncio
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import ctxengine as ce

spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)
metrics.set_meter_provider(MeterProvider([reader]))

async def main():
    await (await ce.open_store("memory://")).close()

asyncio.run(main())
points = reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics[0].data.data_points
print([s.name for s in spans.get_finished_spans()], [dict(p.attributes) for p in points])
"""
    done = run_without((), code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['ctxengine.store.open'] [{'ctxengine.store': 'memory'}]"


async def test_a_turn_with_a_tool_round_trip_and_a_compaction_is_one_span_each(
    backend: str, recorded: Recorded
) -> None:
    """Issue 40, acceptance 5: the spans of one turn of the loop (seed, builds, the tool step's
    and the final record, the compaction) with their session, run, step and outcome."""
    from ctxengine.cli.turns import ScriptedWorker
    from sessionkit import SMALL

    store = await ce.open_store("memory://")
    worker = ScriptedWorker(store, model=SMALL, tool_every=1)
    for turn in range(1, 80):
        recorded.spans.clear()
        if (await worker.turn("otel", turn)).compactions:
            break
    else:
        raise AssertionError("no compaction in 80 turns")
    run_id = f"otel-run-{turn}"
    [seed] = recorded.finished("ctxengine.seed")
    assert dict(seed.attributes)["ctxengine.run_id"] == run_id
    assert dict(seed.attributes)["ctxengine.items"] >= 1
    builds = recorded.finished("ctxengine.build")
    assert len(builds) >= 3  # the step's builds, one before the compaction and one after
    [compaction] = recorded.finished("ctxengine.compaction")
    c = dict(compaction.attributes)
    assert (c["ctxengine.session_id"], c["ctxengine.run_id"]) == ("otel", run_id)
    assert c["ctxengine.reason"] == "history_requires_compaction" and c["ctxengine.depth"] >= 1
    assert c["ctxengine.replaced_through_sequence"] > 0 and c["ctxengine.version"] > 1
    records = recorded.finished("ctxengine.record")
    assert [dict(r.attributes)["ctxengine.items"] for r in records] == [2, 1]  # the pair, the answer
    assert all(dict(r.attributes)["ctxengine.version"] > c["ctxengine.version"] for r in records[1:])
    # The compaction counted a compaction. (Builder version 3 compacts before a build would
    # truncate history under pressure, so the build before it fitted: no overflow to count
    # here; the build-span test above counts one.)
    counters = recorded.counters()
    assert sum(v for _, v in counters["ctxengine.compactions"]) >= 1
    await store.close()
