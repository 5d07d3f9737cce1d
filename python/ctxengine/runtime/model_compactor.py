"""Model-backed compaction (issue 43, ADR 0026): the extractive compactor decides what is
replaced and which untrusted items become pointers; a model writes the summary of what it
may read (``summary_input``'s trust rule); the summary is checked before it is adopted.

``ModelCompactor.compact_async`` makes at most one effect, the router call, and writes
nothing: the loop awaits it before any write block (which may run twice, ADR 0013) and
records its ``SummaryRecord`` in the ``context.compacted`` event. Given the runtime's
``RecordedSummaries``, a compaction of an input whose summary the log records adopts that
summary without a call, so a session rebuilt from its log needs no model; a deployment
that cannot record it (write policy below format 7) compacts extractively and calls
nothing. An error, a timeout or a failed check adopts the extractive result, and the
record says why.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from ..assembly.blocks import MODEL_SUMMARY_MARK
from ..assembly.request import ModelRequest
from ..assembly.router import Router, RouterReply
from ..core.budget import ContextBudget
from ..core.canonical import payload_hash
from ..core.estimator import Estimator
from ..core.slices import finish_async
from ..errors import ModelValidationError
from ..model import Checkpoint, ConversationItem, ReasoningItem
from ..model.checkpoint import MAX_COMPACTION_DEPTH
from .compaction import MIN_SUMMARY_TOKENS, SUMMARY_RATIO, StructuredCompactor
from .compaction_record import CompactionResult, RecordedSummaries, SummaryRecord
from .summary_input import DEFAULT_PROMPT, CompactionPrompt, summary_input_steps, summary_problem

log = logging.getLogger("ctxengine.runtime")

#: Seconds a router call may take before the extractive summary is adopted.
DEFAULT_TIMEOUT = 60.0


def _replaced(before: Checkpoint, after: Checkpoint) -> list[ConversationItem]:
    """The items the extractive compaction replaced: in ``before``, above its floor, not
    kept in ``after`` (by identity: the compactor keeps the very objects)."""
    kept = {id(item) for item in after.conversation}
    floor = before.replaced_through_sequence
    return [
        item
        for item in before.conversation
        if id(item) not in kept
        and not isinstance(item, ReasoningItem)
        and not (item.seq is not None and item.seq <= floor)
    ]


class ModelCompactor:
    """Compaction whose summary a model writes, through ``router`` (an async callable from a
    ``ModelRequest`` to a ``RouterReply``; ``ctxengine.providers.routers`` adapts the
    OpenAI and Anthropic async clients).

    ``model_id`` names the summarizing model in the record (default: the router's
    ``model_id`` attribute). ``assistant=False`` keeps the assistant's text out of the
    router too (a pointer, as the extractive compactor leaves it). ``fallback`` is the
    extractive compactor whose cut and pointers every compaction uses, and whose summary
    is adopted when the model's is not.
    """

    def __init__(
        self,
        estimator: Estimator,
        router: Router,
        *,
        model_id: str | None = None,
        prompt: CompactionPrompt = DEFAULT_PROMPT,
        timeout: float = DEFAULT_TIMEOUT,
        assistant: bool = True,
        max_depth: int = MAX_COMPACTION_DEPTH,
        fallback: StructuredCompactor | None = None,
    ) -> None:
        if not callable(router):
            raise ModelValidationError("ModelCompactor", "router", "expected an async callable")
        named = model_id if model_id is not None else getattr(router, "model_id", None)
        if not isinstance(named, str) or not named:
            raise ModelValidationError(
                "ModelCompactor", "model_id", "expected a non-empty str (or a router with a model_id)"
            )
        if not isinstance(prompt, CompactionPrompt):
            raise ModelValidationError("ModelCompactor", "prompt", "expected a CompactionPrompt")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ModelValidationError("ModelCompactor", "timeout", f"expected seconds > 0, got {timeout!r}")
        self.estimator = estimator
        self.router = router
        self.model_id = named
        self.prompt = prompt
        self.timeout = float(timeout)
        self.assistant = bool(assistant)
        if fallback is not None and fallback.max_depth != max_depth:
            raise ModelValidationError(
                "ModelCompactor", "max_depth", f"{max_depth} != the fallback's {fallback.max_depth}"
            )
        self.fallback = (
            fallback if fallback is not None else StructuredCompactor(estimator, max_depth=max_depth)
        )

    @property
    def max_depth(self) -> int:
        return self.fallback.max_depth

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
    ) -> tuple[Checkpoint, CompactionResult]:
        """The compacted checkpoint and what was done (the ``Compactor`` port). ``model_id``
        is the plan's counting key (the summary's cap is counted with it)."""
        extractive, result = await self.fallback.compact_async(
            checkpoint,
            budget,
            reason,
            model_id=model_id,
            seed_sequence=seed_sequence,
            history_budget_tokens=history_budget_tokens,
        )
        if summaries is not None and not summaries.records:
            return extractive, result  # nothing could record the model's summary: no call
        limit = budget.history_tokens
        if history_budget_tokens is not None:
            limit = min(limit, max(0, history_budget_tokens))
        cap = max(MIN_SUMMARY_TOKENS, int(limit * SUMMARY_RATIO))
        through = result.replaced_through_sequence
        header = (
            f"{MODEL_SUMMARY_MARK}{through} (depth {result.depth}; prompt {self.prompt.version}; "
            f"model {self.model_id}): written by a model from user, platform and assistant text; "
            "untrusted content appears solely as elided pointers."
        )
        budget_tokens = max(1, cap - self.estimator.corrected(self.estimator.raw(header, model_id), model_id))
        made = await finish_async(
            summary_input_steps(
                self.prompt,
                self.model_id,
                checkpoint.compacted_summary,
                _replaced(checkpoint, extractive),
                through=through,
                depth=result.depth,
                max_output_tokens=budget_tokens,
                assistant=self.assistant,
            )
        )
        usage_key = f"context.compaction.usage:{result.run_id}:{through}:{made.input_sha256[:16]}"
        record = SummaryRecord("fallback", self.prompt.version, self.model_id, made.input_sha256, usage_key)
        found = None
        if summaries is not None:
            found = await summaries.find(made.input_sha256, self.prompt.version, self.model_id)
        if found is not None:
            sequence, earlier = found
            record = replace(record, outcome="adopted", text=earlier.text, reused=sequence)
        else:
            record = await self._call(made.request, made.nonces, record, budget_tokens, model_id)
        if record.outcome != "adopted" or record.text is None:
            return extractive, replace(result, summarizer=record)
        summary = f"{header}\n{record.text}"
        compacted = replace(extractive, compacted_summary=summary)
        return compacted, replace(result, excerpts=0, summary_sha256=payload_hash(summary), summarizer=record)

    async def _call(
        self,
        request: ModelRequest,
        nonces: frozenset[str],
        record: SummaryRecord,
        cap: int,
        counting_key: str,
    ) -> SummaryRecord:
        """The router's answer as a record: adopted, or a fallback naming why."""
        try:
            reply = await asyncio.wait_for(self.router(request), self.timeout)
        except TimeoutError:
            log.warning("compaction router %s timed out after %.1fs", self.model_id, self.timeout)
            return replace(record, reason="timeout")
        except Exception as exc:  # any failure of the router falls back (recorded)
            log.warning("compaction router %s failed: %s", self.model_id, type(exc).__name__)
            return replace(record, reason=f"error:{type(exc).__name__}")
        if not isinstance(reply, RouterReply):
            return replace(record, reason=f"error:router returned {type(reply).__name__}")
        spent = replace(record, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)
        text = reply.text.strip()
        problem = summary_problem(
            text, nonces, cap_tokens=cap, estimator=self.estimator, counting_key=counting_key
        )
        if problem is not None:
            return replace(spent, reason=problem)
        return replace(spent, outcome="adopted", text=text)


__all__ = ["DEFAULT_TIMEOUT", "ModelCompactor"]
