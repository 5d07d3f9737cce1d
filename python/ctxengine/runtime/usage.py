"""Provider usage against the engine's estimate, per request (ADR 0012).

``report_usage`` reconciles the estimator with what the provider counted for a
request, through the request's counting key (so a plan's method calibrates
itself), and records both figures as a ``context.usage.reported`` event, which
``ctxengine inspect`` shows per request. The event is format 2: a deployment
pinned to format 1 (ADR 0009) still reconciles, and records nothing.

With the provider's prompt-cache counts (``cached_read``, ``cache_write``; ADR
0020) the event takes its second shape, format 4: the same keys and the two
counts. A reader of format 3 would show such a request as all uncached input,
so it refuses the row (``UnsupportedFormat``) instead; a deployment pinned below
format 4 records the format-2 shape without the counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..assembly.request import ModelRequest
from ..core.estimator import Estimator
from ..errors import ArgumentError, StoreCorruption
from ..model import Principal, RunContext
from ..plan.context_plan import HEURISTIC
from ..stores.events import Event, NewEvent, Store, Visibility

USAGE_REPORTED = "context.usage.reported"
USAGE_FORMAT = 2
#: The shape with the provider's cache counts (``cached_read``, ``cache_write``).
USAGE_CACHE_FORMAT = 4


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
    #: Every input token of the request as the provider counted it, cached ones included.
    actual: int
    #: Input tokens served from the provider's prompt cache; ``None``: not reported.
    cached_read: int | None = None
    #: Input tokens written to the provider's prompt cache (Anthropic); ``None``: not reported.
    cache_write: int | None = None

    @property
    def ratio(self) -> float:
        return self.actual / self.estimated if self.estimated else 0.0

    @property
    def uncached(self) -> int:
        """Input tokens neither read from nor written to the cache (all of them when unreported)."""
        return self.actual - (self.cached_read or 0) - (self.cache_write or 0)

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
            "cached_read": self.cached_read,
            "cache_write": self.cache_write,
        }


async def report_usage(
    store: Store,
    estimator: Estimator,
    run: RunContext,
    request: ModelRequest,
    actual: int,
    *,
    principal: Principal | None = None,
    cached_read: int | None = None,
    cache_write: int | None = None,
) -> None:
    """Reconcile ``estimator`` with the provider's count of ``request`` and record both.

    ``actual`` is every input token of the request, the cached ones included (OpenAI's
    ``prompt_tokens``; Anthropic's ``input_tokens + cache_read_input_tokens +
    cache_creation_input_tokens``). ``cached_read`` (OpenAI
    ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``) and
    ``cache_write`` (Anthropic ``cache_creation_input_tokens``) are the parts of it the
    provider's prompt cache served and wrote; either alone records the other as 0.
    """
    _check_count("actual", actual)
    for name, value in (("cached_read", cached_read), ("cache_write", cache_write)):
        if value is not None:
            _check_count(name, value)
    if (cached_read or 0) > actual:
        raise ArgumentError("report_usage", "cached_read", f"{cached_read} is more than actual ({actual})")
    if (cached_read or 0) + (cache_write or 0) > actual:
        raise ArgumentError(
            "report_usage",
            "cache_write",
            f"cached_read + cache_write = {(cached_read or 0) + (cache_write or 0)} is more than actual "
            f"({actual}): actual counts every input token, the cached ones included",
        )
    meta = request.metadata
    estimated = int(meta["total_tokens"])
    estimator.reconcile(counting_key(request), estimated, actual)
    policy = getattr(store, "write_policy", None)
    if policy is not None and not policy.allows(USAGE_REPORTED, USAGE_FORMAT):
        return
    cached = cached_read is not None or cache_write is not None
    # The write switch (ADR 0009): below format 4 the counts are left out, the usage kept.
    writes_counts = policy is None or policy.allows(USAGE_REPORTED, USAGE_CACHE_FORMAT)
    version = USAGE_CACHE_FORMAT if cached and writes_counts else USAGE_FORMAT
    payload: dict[str, Any] = {
        "run_id": run.run_id,
        "step": run.step,
        "epoch": meta["epoch"],
        "model_id": meta["model_id"],
        "counting": meta.get("counting", HEURISTIC),
        "estimated": estimated,
        "actual": actual,
    }
    if version == USAGE_CACHE_FORMAT:
        payload["cached_read"] = cached_read or 0
        payload["cache_write"] = cache_write or 0
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
            format_version=version,
        )
    )


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ArgumentError("report_usage", name, f"expected a non-negative int, got {value!r}")


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
        cached_read = cache_write = None
        if event.format_version >= USAGE_CACHE_FORMAT:
            cached_read, cache_write = int(p["cached_read"]), int(p["cache_write"])
        return Usage(
            event.sequence,
            str(run_id),
            int(step),
            int(epoch),
            str(model_id),
            str(counting),
            int(estimated),
            int(actual),
            cached_read,
            cache_write,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreCorruption(
            event.session_id, event.sequence, f"usage event does not decode: {exc}"
        ) from None


@dataclass(frozen=True, slots=True)
class CompactionUsage:
    """A model-backed compaction's call, as its ``context.compacted`` event records it (ADR
    0026): under its own key (``usage_key``), never the step's usage key, so it neither
    replaces nor is replaced by the step's ``context.usage.reported``."""

    sequence: int
    run_id: str
    usage_key: str
    model_id: str
    input_tokens: int
    output_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "run_id": self.run_id,
            "usage_key": self.usage_key,
            "model_id": self.model_id,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


def compaction_usage(event: Event) -> CompactionUsage | None:
    """The call a ``context.compacted`` event records, or ``None`` (no model call was answered:
    an extractive compaction, an error, a timeout, a recorded summary reused)."""
    record = event.payload.get("summarizer") if event.format_version >= 7 else None
    if record is None:
        return None
    try:
        tokens_in, tokens_out = record["input_tokens"], record["output_tokens"]
        if tokens_in is None or tokens_out is None:
            return None
        return CompactionUsage(
            event.sequence,
            str(event.payload["run_id"]),
            str(record["usage_key"]),
            str(record["model_id"]),
            int(tokens_in),
            int(tokens_out),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreCorruption(
            event.session_id, event.sequence, f"compaction usage does not decode: {exc}"
        ) from None


__all__ = [
    "CompactionUsage",
    "compaction_usage",
    "USAGE_CACHE_FORMAT",
    "USAGE_FORMAT",
    "USAGE_REPORTED",
    "Usage",
    "counting_key",
    "report_usage",
    "stored_usage",
]
