"""A span where nothing records (issue 40: at most 1 µs each): the cost every build pays in a
process without an OpenTelemetry provider. One round is 10,000 spans with three attributes."""

from __future__ import annotations

from typing import Any

from ctxengine.core import telemetry

SPANS = 10_000


def bench_disabled_span(benchmark: Any) -> None:
    telemetry.configure()
    assert not telemetry.enabled()

    def spans() -> None:
        span = telemetry.span
        for step in range(SPANS):
            with span("ctxengine.build", session_id="s", run_id="r", step=step) as s:
                if s.is_recording():
                    raise AssertionError("nothing should record")

    benchmark(spans)
    benchmark.extra_info["spans"] = SPANS


def bench_disabled_counter(benchmark: Any) -> None:
    telemetry.configure()

    def counts() -> None:
        add = telemetry.add
        for _ in range(SPANS):
            add("ctxengine.builds")

    benchmark(counts)
    benchmark.extra_info["adds"] = SPANS
