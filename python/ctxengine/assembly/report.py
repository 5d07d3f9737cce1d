"""What a build tells the outside: its span's attributes, the build and overflow counters, and
a debug line on the ``ctxengine.assembly`` logger for a build that does not fit (ADR 0017)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..core import telemetry
from ..core.estimator import Estimator
from ..model import RunContext
from ..plan import ContextPlan
from .request import RenderedItem

if TYPE_CHECKING:
    from .builder import Assembly

log = logging.getLogger("ctxengine.assembly")


def report_build(
    span: telemetry.SpanLike, run: RunContext, plan: ContextPlan, assembly: Assembly, estimator: Estimator
) -> None:
    """Record one build: attributes on ``span`` when it records, the counters, the log line."""
    pressure = assembly.pressure
    if span.is_recording():
        telemetry.set_attributes(span, build_attributes(assembly, plan, estimator))
    telemetry.add("ctxengine.builds")
    if not pressure.fits:
        telemetry.add("ctxengine.overflows", reason=pressure.reason, compactable=pressure.compactable)
        log.debug(
            "session %r run %r step %d does not fit: %s (%d body tokens)",
            run.session_id,
            run.run_id,
            run.step,
            pressure.reason,
            pressure.body_tokens,
        )


def build_attributes(assembly: Assembly, plan: ContextPlan, estimator: Estimator) -> dict[str, Any]:
    """A build span's outcome: the fit, the cut, and the tokens of each region class (the
    prefix as the plan counted it; each body class estimated apart, uncorrected)."""
    p = assembly.pressure
    by_class: dict[str, list[RenderedItem]] = {}
    for item in assembly.request.body:
        by_class.setdefault(item.region_class, []).append(item)
    counted = {
        f"tokens.{region}": estimator.estimate(items, plan.counting_key) for region, items in by_class.items()
    }
    return {
        "model_id": plan.model_id,
        "fits": p.fits,
        "reason": p.reason,
        "compactable": p.compactable,
        "history_cut": p.history_cut,
        "history_budget_tokens": p.history_budget_tokens,
        "total_tokens": p.total_tokens,
        "capacity_tokens": p.capacity_tokens,
        "reserve_tokens": p.reserve_tokens,
        "body_tokens": p.body_tokens,
        "tokens.prefix": p.prefix_tokens,
        **counted,
        "yield_steps": list(p.yield_steps),
        "counting": p.counting,
    }


__all__ = ["build_attributes", "report_build"]
