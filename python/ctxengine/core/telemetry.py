"""Spans and counters through OpenTelemetry when the application uses it; no-ops otherwise.

The engine never imports OpenTelemetry itself (``import ctxengine`` stays without it). A span
records when ``opentelemetry-api`` is installed (the ``otel`` extra), the application has
imported it, and a tracer provider is set, globally (``trace.set_tracer_provider``, as the
SDK's setup and ``opentelemetry-instrument`` do) or here (``configure``); counters likewise
with a meter provider. Otherwise ``span`` returns one
shared no-op context manager and ``add`` returns at once (well under a microsecond).

Names are ``ctxengine.<what>`` (``ctxengine.build``, ``ctxengine.store.open``); attributes
are given without the prefix (``session_id=...``, ``{"tokens.history": ...}``) and recorded
as ``ctxengine.<key>``. Values must be what OpenTelemetry takes (str, bool, int, float or a
sequence of one of them); a ``None`` is left out. Work that only feeds attributes belongs
under ``if span.is_recording():``.

Logging is the standard library's: one logger per layer (``ctxengine.stores``,
``ctxengine.assembly``, ``ctxengine.runtime``, ...), below the package's ``ctxengine``
logger, which has a ``NullHandler``: quiet unless the application configures logging.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final, Protocol

#: The instrumentation scope's name (the tracer's and the meter's).
SCOPE: Final = "ctxengine"
_VERSION: Final = "0.2.0"


class SpanLike(Protocol):
    """What a ``span`` yields: an OpenTelemetry span, or the no-op."""

    def is_recording(self) -> bool: ...
    def set_attribute(self, key: str, value: Any) -> None: ...


class _NoopSpan:
    """The span of a process that records nothing: enters, sets and exits without work."""

    __slots__ = ()

    def __enter__(self) -> _NoopSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def is_recording(self) -> bool:
        return False

    def set_attribute(self, key: str, value: Any) -> None:
        return None


NOOP: Final = _NoopSpan()

_UNSET: Final = object()

# Providers given to ``configure`` (they win over the global ones), and what was made of them.
_tracer_provider: Any = None
_meter_provider: Any = None
_tracer: tuple[Any, Any] | None = None  # (provider, tracer)
_meter: tuple[Any, Any, dict[str, Any]] | None = None  # (provider, meter, counters by name)


def configure(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Record with these providers instead of OpenTelemetry's global ones (``None``: the
    global one again). For an application that keeps its providers out of the globals, and
    for tests."""
    global _tracer_provider, _meter_provider, _tracer, _meter
    _tracer_provider, _meter_provider = tracer_provider, meter_provider
    _tracer = _meter = None


def _live_tracer() -> Any:
    """The tracer to record with, or ``None`` when nothing would record."""
    global _tracer
    provider = _tracer_provider
    if provider is None:
        trace = sys.modules.get("opentelemetry.trace")
        if trace is None:
            return None
        # No global provider set: ``get_tracer_provider()`` would answer a proxy, after an
        # environment lookup that alone costs more than the rest of a disabled span.
        if getattr(trace, "_TRACER_PROVIDER", _UNSET) is None:
            return None
        provider = trace.get_tracer_provider()
        if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            return None
    cached = _tracer
    if cached is None or cached[0] is not provider:
        cached = _tracer = (provider, provider.get_tracer(SCOPE, _VERSION))
    return cached[1]


def enabled() -> bool:
    """Whether a span started now would record."""
    return _live_tracer() is not None


def span(name: str, **attributes: Any) -> Any:
    """A context manager around one operation: an OpenTelemetry span named ``name`` (made
    current, so the engine's spans nest under the application's), or ``NOOP``. Yields the
    span; ``set_attribute`` adds what is known only at the end. An exception leaving the
    block is recorded on the span and the span's status set to error."""
    tracer = _live_tracer()
    if tracer is None:
        return NOOP
    return tracer.start_as_current_span(name, attributes=_clean(attributes))


def set_attributes(target: SpanLike, attributes: Mapping[str, Any]) -> None:
    """``target.set_attribute("ctxengine." + key, value)`` for each value that is not ``None``."""
    for key, value in _clean(attributes).items():
        target.set_attribute(key, value)


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {f"{SCOPE}.{key}": value for key, value in attributes.items() if value is not None}


def _live_meter() -> tuple[Any, Any, dict[str, Any]] | None:
    global _meter
    provider = _meter_provider
    if provider is None:
        metrics = sys.modules.get("opentelemetry.metrics")
        if metrics is None:
            return None
        # No global provider set (as for spans: skip the proxy and its environment lookup).
        internal = sys.modules.get("opentelemetry.metrics._internal")
        if getattr(internal, "_METER_PROVIDER", _UNSET) is None:
            return None
        provider = metrics.get_meter_provider()
        if isinstance(provider, metrics.NoOpMeterProvider):
            return None
    cached = _meter
    if cached is None or cached[0] is not provider:
        cached = _meter = (provider, provider.get_meter(SCOPE, _VERSION), {})
    return cached


#: The engine's counters: name -> (unit, description).
COUNTERS: Final = {
    "ctxengine.builds": ("{build}", "Requests assembled (ContextBuilder.assemble)"),
    "ctxengine.overflows": ("{build}", "Assemblies that did not fit the window without compaction"),
    "ctxengine.compactions": ("{compaction}", "Compactions of a session's history"),
    "ctxengine.store.opens": ("{open}", "Stores opened, by kind"),
}


def add(counter: str, value: int = 1, **attributes: Any) -> None:
    """Add ``value`` to the counter ``counter`` (one of ``COUNTERS``); a no-op unless a meter
    provider is set."""
    live = _live_meter()
    if live is None:
        return
    _, meter, counters = live
    instrument = counters.get(counter)
    if instrument is None:
        unit, description = COUNTERS[counter]
        instrument = counters[counter] = meter.create_counter(counter, unit=unit, description=description)
    instrument.add(value, _clean(attributes))


__all__ = ["COUNTERS", "NOOP", "SCOPE", "SpanLike", "add", "configure", "enabled", "set_attributes", "span"]
