"""Structured, extractive compaction (SPEC section 6, seed ADR-0043 decisions 6-7).

``StructuredCompactor.compact`` is a pure function of a checkpoint: it
returns a new checkpoint and a ``CompactionResult`` and writes nothing (the
runtime adopts the checkpoint and records the result, decision 6). It makes
no model call and is deterministic: same input, same output, on either
backend.

What it reads and what it never reads:

* Input is the run's *history*: conversation items with ``seq`` below the
  run's seed sequence (``assembly.turn.split_turn``). The current turn (the seeding
  user message, this run's tool pairs) and ``checkpoint.reasoning`` are never
  read. A ``ReasoningItem`` found in the history belongs to an earlier run and
  is never carried across runs, so it is dropped without contributing.
* The replaced part is a prefix of the history chosen with ``select_history``
  so it never ends inside a tool pair; the retained suffix is the largest one
  whose estimate is at most half the history budget (``RETAIN_RATIO``), so the
  request fits with room for the summary and for the turn to grow.
* Trusted text (``TRUSTED_TEXT``: platform, trusted_configuration, user)
  becomes bounded, single-line excerpts tagged with their event id. The
  user's own words are kept because they carry the user's requests and
  constraints; structured constraints live in the working state, which
  compaction never touches.
* Everything else (assistant text, tool calls, tool results, memory,
  knowledge) is untrusted: it becomes an ``ElidedSpan`` pointer (item id,
  trust, byte length, artifact reference, event id) and contributes no text.
  Item ids are built from the item kind and event id only, never from
  content or model-chosen identifiers.
* The new summary merges the previous one (depth + 1; beyond ``max_depth``
  is ``CompactionDepthExceeded``) and carries the union of all source event
  ids. ``CompactionResult.elided`` lists a pointer for every untrusted item
  this compaction replaced; the checkpoint lists the newest
  ``max_listed_spans`` of them and folds older ones into one span per trust
  level, so the rendered summary stays bounded however long the session.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..assembly.blocks import is_model_summary, render_summary
from ..assembly.render import render_items
from ..assembly.request import RenderedItem
from ..assembly.turn import split_turn
from ..core import slices
from ..core.budget import ContextBudget
from ..core.canonical import canonical_json, payload_hash
from ..core.estimator import Estimator
from ..core.history import select_history
from ..core.slices import Steps, batches, finish, finish_async
from ..errors import CompactionDepthExceeded, ModelValidationError
from ..model import (
    Checkpoint,
    ConversationItem,
    ElidedSpan,
    FileRef,
    ReasoningItem,
    TextPart,
    ToolCall,
    TrustLevel,
    content_text,
)
from ..model.checkpoint import MAX_COMPACTION_DEPTH, check_compaction_depth
from .compaction_record import CompactionResult, RecordedSummaries

#: Trust levels whose text may be quoted (as bounded excerpts) in a summary.
TRUSTED_TEXT: frozenset[TrustLevel] = frozenset(
    {TrustLevel.PLATFORM, TrustLevel.TRUSTED_CONFIGURATION, TrustLevel.USER}
)
#: The retained history is at most this share of the history budget.
RETAIN_RATIO = 0.5
#: Longest excerpt of one item, in characters (whitespace collapsed first).
EXCERPT_CHARS = 280
#: The summary's excerpt lines are at most this share of the history budget.
SUMMARY_RATIO = 0.125
MIN_SUMMARY_TOKENS = 128

_EXCERPT_LINE = re.compile(r"^- \[event \d+ [a-z_]+\] ")
_OMITTED_LINE = re.compile(r"^- \[(\d+) earlier excerpts? omitted; see the summary source event ids\]$")
_FOLDED_ID = re.compile(r"^folded:(\d+)@(\d+)\.\.(\d+)$")


class _FixedRaw:
    """Hands ``select_history`` raw estimates measured once on the rendered items."""

    __slots__ = ("_estimator", "_raw")

    def __init__(self, estimator: Estimator, raw: list[int]) -> None:
        self._estimator = estimator
        self._raw = raw

    def raw_estimates(self, items: Sequence[object], model_id: str) -> list[int]:
        return self._raw

    def corrected(self, raw_sum: int, model_id: str) -> int:
        return self._estimator.corrected(raw_sum, model_id)


def item_id(item: ConversationItem) -> str:
    """A pointer's item id: kind and event id only (content and call ids are untrusted)."""
    return f"{item.kind}:{item.seq}"


def item_trust(item: ConversationItem) -> TrustLevel:
    """Tool calls carry no trust field: the model wrote them, so they are external_untrusted."""
    if isinstance(item, ToolCall):
        return TrustLevel.EXTERNAL_UNTRUSTED
    trust: TrustLevel = getattr(item, "trust", TrustLevel.EXTERNAL_UNTRUSTED)
    return trust


def _span(item: ConversationItem, trust: TrustLevel) -> ElidedSpan:
    artifact_ref: str | None = None
    if isinstance(item, ToolCall):
        size = len(canonical_json({"name": item.name, "arguments": item.arguments}))
    else:
        content = item.content  # type: ignore[union-attr]
        if isinstance(content, str):
            size = len(content.encode("utf-8"))
        else:
            size = sum(len(p.text.encode("utf-8")) for p in content if isinstance(p, TextPart))
            refs = [p.artifact_id for p in content if isinstance(p, FileRef)]
            artifact_ref = ",".join(refs) if refs else None
    return ElidedSpan(item_id(item), trust, size, item.seq, artifact_ref)


def _history_renders(items: Sequence[ConversationItem]) -> list[RenderedItem]:
    """The history renders of ``items``, in one backend call (not entered in the process's
    render cache: a long history's renders would evict everything it holds)."""
    return render_items(items, "history")


def _pointers(items: Sequence[ConversationItem]) -> list[str | ElidedSpan]:
    """What each replaced item leaves in the summary: an excerpt line (trusted text) or an
    elided pointer."""
    out: list[str | ElidedSpan] = []
    for it in items:
        trust = item_trust(it)
        out.append(_excerpt(it, trust) if trust in TRUSTED_TEXT else _span(it, trust))
    return out


def _excerpt(item: ConversationItem, trust: TrustLevel) -> str:
    text = " ".join(content_text(item.content).split())  # type: ignore[union-attr]
    if len(text) > EXCERPT_CHARS:
        text = text[: EXCERPT_CHARS - 1] + "…"
    return f"- [event {item.seq} {trust.value}] {text}"


def _previous_lines(summary: str | None) -> tuple[list[str], int]:
    """Excerpt lines and the omitted-excerpt count of a summary this module wrote. A model's
    summary (``is_model_summary``) is model output: none of its lines is read as a trusted
    excerpt; it counts as one omitted excerpt (its source ids stay in the lineage)."""
    lines: list[str] = []
    omitted = 0
    if summary is not None and is_model_summary(summary):
        return lines, 1
    for line in (summary or "").splitlines():
        match = _OMITTED_LINE.match(line)
        if match:
            omitted += int(match.group(1))
        elif _EXCERPT_LINE.match(line):
            lines.append(line)
    return lines, omitted


class StructuredCompactor:
    """Deterministic, extractive compaction; pure (see the module docstring)."""

    def __init__(
        self, estimator: Estimator, *, max_depth: int = MAX_COMPACTION_DEPTH, max_listed_spans: int = 64
    ) -> None:
        check_compaction_depth("StructuredCompactor", "max_depth", max_depth)
        if (
            isinstance(max_listed_spans, bool)
            or not isinstance(max_listed_spans, int)
            or max_listed_spans < 0
        ):
            raise ModelValidationError(
                "StructuredCompactor", "max_listed_spans", f"expected int >= 0, got {max_listed_spans!r}"
            )
        self.estimator = estimator
        self.max_depth = max_depth
        self.max_listed_spans = max_listed_spans

    def compact(
        self,
        checkpoint: Checkpoint,
        budget: ContextBudget,
        reason: str,
        *,
        model_id: str,
        seed_sequence: int,
        history_budget_tokens: int | None = None,
    ) -> tuple[Checkpoint, CompactionResult]:
        """The compacted checkpoint and what was done.

        ``history_budget_tokens`` (a ``Pressure``'s figure) tightens the target
        when the turn has grown into the history budget.
        """
        return finish(
            self.compact_steps(
                checkpoint,
                budget,
                reason,
                model_id=model_id,
                seed_sequence=seed_sequence,
                history_budget_tokens=history_budget_tokens,
            )
        )

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
        """``compact``, giving the event loop back between slices of a long history
        (``core.slices``): the same result (the ``Compactor`` port; ``summaries`` is not
        read: an extractive summary needs no record)."""
        return await finish_async(
            self.compact_steps(
                checkpoint,
                budget,
                reason,
                model_id=model_id,
                seed_sequence=seed_sequence,
                history_budget_tokens=history_budget_tokens,
            )
        )

    def compact_steps(
        self,
        checkpoint: Checkpoint,
        budget: ContextBudget,
        reason: str,
        *,
        model_id: str,
        seed_sequence: int,
        history_budget_tokens: int | None = None,
    ) -> Steps[tuple[Checkpoint, CompactionResult]]:
        """``compact`` as steps that yield between slices of the history (``core.slices``)."""
        cp = checkpoint
        depth = cp.summary_depth + 1
        if depth > self.max_depth:
            raise CompactionDepthExceeded(
                f"run {cp.run_id!r}: compacting a depth-{cp.summary_depth} summary would reach depth "
                f"{depth}, above the maximum of {self.max_depth}"
            )
        est = self.estimator
        boundary = split_turn(cp.conversation, seed_sequence)
        history = cp.conversation[:boundary]
        turn = cp.conversation[boundary:]
        floor = cp.replaced_through_sequence
        # Items at or below the floor were summarized before; they are never
        # read twice. Reasoning from an earlier run is never input.
        yield
        stale = [it for it in history if it.seq is not None and it.seq <= floor]
        live = [it for it in history if not (it.seq is not None and it.seq <= floor)]
        yield
        positions = [i for i, it in enumerate(live) if not isinstance(it, ReasoningItem)]
        candidates = [live[i] for i in positions]
        yield

        rendered = yield from batches(_history_renders, candidates)
        raw = yield from batches(lambda part: est.raw_estimates(part, model_id), rendered)
        limit = budget.history_tokens
        if history_budget_tokens is not None:
            limit = min(limit, max(0, history_budget_tokens))
        cut = 0
        if candidates:
            cut = select_history(candidates, floor, int(limit * RETAIN_RATIO), _FixedRaw(est, raw), model_id)  # type: ignore[arg-type]
        yield
        replaced = candidates[:cut]
        # Everything after the last replaced item stays, reasoning included;
        # reasoning before it belongs to an earlier run and is dropped unread.
        keep_from = positions[cut - 1] + 1 if cut else 0
        retained = live[keep_from:]

        pointed = yield from batches(_pointers, replaced)
        new_lines = [line for line in pointed if isinstance(line, str)]
        new_spans = tuple(span for span in pointed if isinstance(span, ElidedSpan))
        through = max([floor, *(it.seq for it in replaced if it.seq is not None)])
        yield
        source_ids = tuple(
            sorted({*cp.summary_source_event_ids, *(it.seq for it in replaced if it.seq is not None)})
        )
        yield
        old_lines, omitted = _previous_lines(cp.compacted_summary)
        lines = [*old_lines, *new_lines]
        line_raws = yield from batches(lambda part: est.raw_estimates(part, model_id), lines)
        summary = self._summary(lines, line_raws, omitted, through, depth, limit, model_id)
        yield
        listed = yield from self._listed_spans(cp.summary_elided, new_spans)
        compacted = replace(
            cp,
            conversation=(*retained, *turn),
            compacted_summary=summary,
            summary_source_event_ids=source_ids,
            summary_elided=listed,
            replaced_through_sequence=through,
            summary_depth=depth,
        )
        yield

        before_blocks: list[RenderedItem] = []
        if cp.compacted_summary is not None or cp.summary_elided:
            before_blocks = render_summary(cp.compacted_summary or "", cp.summary_elided)
        stale_live = [it for it in stale if not isinstance(it, ReasoningItem)]
        before_history = yield from batches(_history_renders, stale_live)
        before_raw = yield from batches(
            lambda part: est.raw_estimates(part, model_id), [*before_blocks, *before_history]
        )
        tokens_before = est.corrected(sum(before_raw) + sum(raw), model_id)
        after_blocks = render_summary(summary, listed)
        tokens_after = est.corrected(
            sum(est.raw_estimates(after_blocks, model_id)) + sum(raw[cut:]), model_id
        )
        result = CompactionResult(
            run_id=cp.run_id,
            reason=reason,
            depth=depth,
            previous_replaced_through_sequence=floor,
            replaced_through_sequence=through,
            replaced_items=len(replaced),
            excerpts=len(new_lines),
            source_event_ids=source_ids,
            elided=new_spans,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            summary_sha256=payload_hash(summary),
        )
        return compacted, result

    # -- the summary ---------------------------------------------------------------

    def _summary(
        self,
        lines: list[str],
        raw: list[int],
        omitted: int,
        through: int,
        depth: int,
        limit: int,
        model_id: str,
    ) -> str:
        """Header, then the oldest excerpt, then as many of the newest as fit the cap
        (``lines``: the previous summary's excerpts, ``omitted`` before them, then the new
        ones; ``raw``: their raw counts).

        The first excerpt usually states the task, so it is kept; the rest
        are dropped oldest first, counted in one "omitted" line.
        """
        est = self.estimator
        header = (
            f"Compacted conversation through event {through} (depth {depth}): excerpts of user and "
            "platform text only; untrusted content appears solely as elided pointers."
        )
        cap = max(MIN_SUMMARY_TOKENS, int(limit * SUMMARY_RATIO))
        kept_tail: list[str] = []
        if lines:
            used = est.raw(header, model_id) + raw[0]
            for i in range(len(lines) - 1, 0, -1):
                if est.corrected(used + raw[i], model_id) > cap:
                    break
                used += raw[i]
                kept_tail.append(lines[i])
            kept_tail.reverse()
            omitted += len(lines) - 1 - len(kept_tail)
        out = [header]
        if lines:
            out.append(lines[0])
        if omitted:
            noun = "excerpt" if omitted == 1 else "excerpts"
            out.append(f"- [{omitted} earlier {noun} omitted; see the summary source event ids]")
        out.extend(kept_tail)
        return "\n".join(out)

    def _listed_spans(
        self, previous: Sequence[ElidedSpan], new: Sequence[ElidedSpan]
    ) -> Steps[tuple[ElidedSpan, ...]]:
        """The newest ``max_listed_spans`` pointers; older ones folded into one span per trust level."""
        folded: dict[TrustLevel, tuple[int, int, int, int]] = {}  # trust -> (count, first, last, bytes)

        def fold(trust: TrustLevel, count: int, first: int, last: int, size: int) -> None:
            c, f, la, s = folded.get(trust, (0, first, last, 0))
            folded[trust] = (c + count, min(f, first), max(la, last), s + size)

        singles: list[ElidedSpan] = []
        for i, span in enumerate((*previous, *new)):
            if i and not i % slices.SLICE_ITEMS:
                yield
            match = _FOLDED_ID.match(span.item_id)
            if match and span.event_id is None:
                fold(
                    span.trust,
                    int(match.group(1)),
                    int(match.group(2)),
                    int(match.group(3)),
                    span.byte_length,
                )
            else:
                singles.append(span)
        keep = len(singles) - self.max_listed_spans
        for i, span in enumerate(singles[: max(keep, 0)]):
            if i and not i % slices.SLICE_ITEMS:
                yield
            seq = span.event_id if span.event_id is not None else 0
            fold(span.trust, 1, seq, seq, span.byte_length)
        listed = singles[max(keep, 0) :]
        folded_spans = [
            ElidedSpan(f"folded:{c}@{f}..{la}", trust, size, None, None)
            for trust, (c, f, la, size) in sorted(folded.items(), key=lambda kv: kv[0].rank)
        ]
        return (*folded_spans, *listed)


__all__ = [
    "EXCERPT_CHARS",
    "RETAIN_RATIO",
    "SUMMARY_RATIO",
    "TRUSTED_TEXT",
    "CompactionResult",
    "StructuredCompactor",
    "item_id",
    "item_trust",
]
