"""Provider usage against the engine's estimate, per request (ADR 0012).

``report_usage`` reconciles the estimator with what the provider counted for a
request, through the request's counting key (so a plan's method calibrates
itself), and records both figures as a ``context.usage.reported`` event, which
``ctxengine inspect`` shows per request. The event is format 2: a deployment
pinned to format 1 (ADR 0009) still reconciles, and records nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..assembly.request import ModelRequest
from ..core.estimator import Estimator
from ..errors import ModelValidationError, StoreCorruption
from ..model import Principal, RunContext
from ..plan.context_plan import HEURISTIC
from ..stores.events import Event, NewEvent, Store, Visibility

USAGE_REPORTED = "context.usage.reported"
USAGE_FORMAT = 2


def counting_key(request: ModelRequest) -> str:
    """The estimator key a request was counted with (its plan's ``counting_key``)."""
    meta = request.metadata
    return f"{meta['model_id']}#{meta.get('counting', HEURISTIC)}"


@dataclass(frozen=True, slots=True)
class Usage:
    """One request: what the engine estimated and what the provider counted."""

    sequence: int
    run_id: str
    step: int
    epoch: int
    model_id: str
    counting: str
    estimated: int
    actual: int

    @property
    def ratio(self) -> float:
        return self.actual / self.estimated if self.estimated else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "run_id": self.run_id,
            "step": self.step,
            "epoch": self.epoch,
            "model_id": self.model_id,
            "counting": self.counting,
            "estimated": self.estimated,
            "actual": self.actual,
        }


async def report_usage(
    store: Store,
    estimator: Estimator,
    run: RunContext,
    request: ModelRequest,
    actual: int,
    *,
    principal: Principal | None = None,
) -> None:
    """Reconcile ``estimator`` with the provider's count of ``request`` and record both."""
    if isinstance(actual, bool) or not isinstance(actual, int) or actual < 0:
        raise ModelValidationError("report_usage", "actual", f"expected a non-negative int, got {actual!r}")
    meta = request.metadata
    estimated = int(meta["total_tokens"])
    estimator.reconcile(counting_key(request), estimated, actual)
    policy = getattr(store, "write_policy", None)
    if policy is not None and not policy.allows(USAGE_REPORTED, USAGE_FORMAT):
        return
    payload = {
        "run_id": run.run_id,
        "step": run.step,
        "epoch": meta["epoch"],
        "model_id": meta["model_id"],
        "counting": meta.get("counting", HEURISTIC),
        "estimated": estimated,
        "actual": actual,
    }
    await store.events.append(
        NewEvent(
            session_id=run.session_id,
            type=USAGE_REPORTED,
            payload=payload,
            derivation_key=f"{USAGE_REPORTED}:{run.run_id}:{run.step}",
            run_id=run.run_id,
            visibility=Visibility.session()
            if principal is None
            else Visibility.principal(principal.principal_id),
        )
    )


def stored_usage(event: Event) -> Usage:
    """The usage a ``context.usage.reported`` event records; ``StoreCorruption`` if it does not decode."""
    p = event.payload
    try:
        fields = (
            p["run_id"],
            p["step"],
            p["epoch"],
            p["model_id"],
            p["counting"],
            p["estimated"],
            p["actual"],
        )
        run_id, step, epoch, model_id, counting, estimated, actual = fields
        return Usage(
            event.sequence,
            str(run_id),
            int(step),
            int(epoch),
            str(model_id),
            str(counting),
            int(estimated),
            int(actual),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreCorruption(
            event.session_id, event.sequence, f"usage event does not decode: {exc}"
        ) from None


__all__ = ["USAGE_REPORTED", "Usage", "counting_key", "report_usage", "stored_usage"]
