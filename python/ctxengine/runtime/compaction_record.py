"""What a compaction did, as the ``context.compacted`` event records it, and the compaction
port the loop awaits (SPEC section 6, seed ADR-0043 decision 6, ADR 0026).

``CompactionResult.to_dict()`` is the event's payload. A compaction by a model-backed
compactor also carries a ``SummaryRecord`` (format 7, ``SUMMARY_FORMAT``): the summary text,
the prompt version, the model, the hash of the exact request the model was sent and the
call's usage, or why the extractive summary was adopted instead. A later compaction of the
same input adopts a recorded summary rather than calling the model again, so a session
rebuilt from its log needs no model (``RecordedSummaries``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..core.budget import ContextBudget
from ..errors import ModelValidationError
from ..model import Checkpoint, ElidedSpan

#: The format version of a ``context.compacted`` event that carries a ``SummaryRecord``.
SUMMARY_FORMAT = 7
#: ``adopted``: the model's summary is in force; ``fallback``: the extractive one is.
Outcome = Literal["adopted", "fallback"]


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """A model-backed compaction's record (no item text but the model's own summary).

    ``input_sha256`` is ``payload_hash`` of the request the model was (or would have been)
    sent; with ``prompt_version`` and ``model_id`` it names the input a recorded summary may
    be adopted for. ``usage_key`` identifies the call's usage in the books (never the step's
    usage key, ``context.usage.reported:{run}:{step}``); ``input_tokens``/``output_tokens``
    are ``None`` when no call was answered (an error, a timeout, a recorded summary reused).
    ``reason`` says why a fallback happened (``error:ValueError``, ``timeout``, ``empty``,
    ``too_long``, ``envelope_marker``, ``nonce``); ``reused`` is the sequence of the event
    whose summary was adopted without a call.
    """

    outcome: Outcome
    prompt_version: str
    model_id: str
    input_sha256: str
    usage_key: str
    text: str | None = None
    reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    reused: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "prompt_version": self.prompt_version,
            "model_id": self.model_id,
            "input_sha256": self.input_sha256,
            "usage_key": self.usage_key,
            "text": self.text,
            "reason": self.reason,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "reused": self.reused,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SummaryRecord:
        n = "SummaryRecord"
        try:
            record = cls(
                outcome=d["outcome"],
                prompt_version=d["prompt_version"],
                model_id=d["model_id"],
                input_sha256=d["input_sha256"],
                usage_key=d["usage_key"],
                text=d["text"],
                reason=d["reason"],
                input_tokens=d["input_tokens"],
                output_tokens=d["output_tokens"],
                reused=d["reused"],
            )
        except KeyError as exc:
            raise ModelValidationError(n, str(exc.args[0]), "missing") from None
        if record.outcome not in ("adopted", "fallback"):
            raise ModelValidationError(
                n, "outcome", f"expected 'adopted' or 'fallback', got {record.outcome!r}"
            )
        if record.outcome == "adopted" and not isinstance(record.text, str):
            raise ModelValidationError(n, "text", "an adopted summary records its text")
        for name in ("prompt_version", "model_id", "input_sha256", "usage_key"):
            if not isinstance(getattr(record, name), str):
                raise ModelValidationError(n, name, "expected a str")
        for name in ("input_tokens", "output_tokens", "reused"):
            value = getattr(record, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ModelValidationError(n, name, f"expected an int >= 0 or null, got {value!r}")
        return record


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction did; ``to_dict()`` is the ``context.compacted`` payload.

    ``source_event_ids`` is the union the new summary carries (previous
    summary's ids and every item replaced now). ``elided`` has one pointer per
    untrusted item replaced by *this* compaction. No field holds item text; ``summarizer``
    (a model-backed compaction's record, format 7) holds the model's summary.
    """

    run_id: str
    reason: str
    depth: int
    previous_replaced_through_sequence: int
    replaced_through_sequence: int
    replaced_items: int
    excerpts: int
    source_event_ids: tuple[int, ...]
    elided: tuple[ElidedSpan, ...]
    tokens_before: int
    tokens_after: int
    summary_sha256: str
    summarizer: SummaryRecord | None = None

    @property
    def format_version(self) -> int:
        """The event format that expresses this result (ADR 0009: the lowest that can)."""
        return 1 if self.summarizer is None else SUMMARY_FORMAT

    def to_dict(self) -> dict[str, Any]:
        out = {
            "run_id": self.run_id,
            "reason": self.reason,
            "depth": self.depth,
            "previous_replaced_through_sequence": self.previous_replaced_through_sequence,
            "replaced_through_sequence": self.replaced_through_sequence,
            "replaced_items": self.replaced_items,
            "excerpts": self.excerpts,
            "source_event_ids": list(self.source_event_ids),
            "elided": [span.to_dict() for span in self.elided],
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summary_sha256": self.summary_sha256,
        }
        if self.summarizer is not None:
            out["summarizer"] = self.summarizer.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CompactionResult:
        try:
            summarizer = d.get("summarizer")
            return cls(
                run_id=d["run_id"],
                reason=d["reason"],
                depth=d["depth"],
                previous_replaced_through_sequence=d["previous_replaced_through_sequence"],
                replaced_through_sequence=d["replaced_through_sequence"],
                replaced_items=d["replaced_items"],
                excerpts=d["excerpts"],
                source_event_ids=tuple(d["source_event_ids"]),
                elided=tuple(ElidedSpan.from_dict(s) for s in d["elided"]),
                tokens_before=d["tokens_before"],
                tokens_after=d["tokens_after"],
                summary_sha256=d["summary_sha256"],
                summarizer=None if summarizer is None else SummaryRecord.from_dict(summarizer),
            )
        except KeyError as exc:
            raise ModelValidationError("CompactionResult", str(exc.args[0]), "missing") from None


class RecordedSummaries(Protocol):
    """What the runtime tells a model-backed compactor about the log (the compactor itself
    reads and writes nothing): whether this deployment records a summary at all (its write
    policy allows format 7), and the summary recorded for an input, if any."""

    @property
    def records(self) -> bool: ...

    async def find(
        self, input_sha256: str, prompt_version: str, model_id: str
    ) -> tuple[int, SummaryRecord] | None:
        """The sequence and record of an adopted summary of exactly this input, or ``None``."""
        ...


class Compactor(Protocol):
    """The compaction port the loop awaits. ``compact_async`` returns the compacted
    checkpoint and what was done, and writes nothing (the runtime adopts the checkpoint and
    records the result, seed decision 6). ``max_depth`` must equal the builder's."""

    @property
    def max_depth(self) -> int: ...

    async def compact_async(
        self,
        checkpoint: Checkpoint,
        budget: ContextBudget,
        reason: str,
        *,
        model_id: str,
        seed_sequence: int,
        history_budget_tokens: int | None = None,
        summaries: RecordedSummaries | None = None,
    ) -> tuple[Checkpoint, CompactionResult]: ...


__all__ = [
    "SUMMARY_FORMAT",
    "CompactionResult",
    "Compactor",
    "Outcome",
    "RecordedSummaries",
    "SummaryRecord",
]
