"""A run's version 1, built from the latest usable carry and only the items after it (ADR 0011).

``read_seed`` reads the carry (``carry.find_carry``), the working-state carry,
and the item events in ``(carry.through, seed]`` into the session's window
(``Windows.span``: one range read, one native decode; a warm worker reads only
what is new). History is filtered by the run principal's visibility; halves of
tool pairs and earlier runs' reasoning are left out, as before.

Token counts travel with the items: the rows carry the raw count stored under
the estimator's ``counter_id`` for the plan's model (``history``), and the
memo is primed with them, so the first build renders the items but does not
count them again. Items without a stored count are counted here and returned
for the seed's transaction to store (the first worker to count an item
records it for every later one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from ..assembly.blocks import render_summary
from ..assembly.builder import ContextBuilder
from ..assembly.render import digest_of, render_items
from ..assembly.request import RenderedItem
from ..core import backends
from ..core.estimator import Estimator
from ..core.slices import SLICE_ITEMS, Steps, batches, finish, pause
from ..errors import ModelValidationError
from ..model import (
    Checkpoint,
    ConversationItem,
    ElidedSpan,
    Principal,
    RunContext,
    ToolResult,
    UserMessage,
    WorkingState,
)
from ..plan import ContextPlan
from ..stores.events import Store
from .carry import Carry, find_carry
from .checkpoints import evolve
from .seed_history import seed_history, whole_pairs
from .session import HISTORY_REGION
from .window import SessionWindow
from .windows import Windows
from .working_state import carried, carry_working_state, stored_state

#: The region class history items render as: the ``kind`` of their stored counts.
HISTORY = HISTORY_REGION
#: The estimator memo kind of a rendered item.
RENDERED = "rendered_item"
#: The counter kinds of a carry's summary blocks (``render_summary``), in order.
SUMMARY_KINDS = ("compacted_summary", "compacted_summary_elided")


@dataclass(frozen=True, slots=True)
class Seed:
    """Version 1 of a run, the carry it started from, and the counts to store."""

    checkpoint: Checkpoint
    carry: Carry | None
    counter: str | None
    backfill: tuple[tuple[int, int], ...]
    #: The checkpoint's hash (``SessionWindow.seed_digest``), when made before the write.
    digest: str | None = None


@dataclass(frozen=True, slots=True)
class SeedRead:
    """Version 1 as read from the log (``read_seed``), and what priming it takes
    (``prime_seed``): the plan, the history and its items not primed yet, with their
    sequences and stored counts."""

    checkpoint: Checkpoint
    carry: Carry | None
    counter: str | None
    plan: ContextPlan | None
    history: tuple[ConversationItem, ...]
    fresh_sequences: Sequence[int]
    fresh_tokens: Sequence[int | None]
    fresh_items: Sequence[ConversationItem]
    window: SessionWindow

    @property
    def counted(self) -> bool:
        """Every item to prime has a stored count: priming stores nothing (it may then run
        while version 1 is being written)."""
        return self.plan is None or None not in self.fresh_tokens


async def read_seed(
    store: Store,
    windows: Windows,
    estimator: Estimator,
    plan: ContextPlan | None,
    run: RunContext,
    principal: Principal | None,
) -> SeedRead:
    """Version 1 of ``run`` read from the log into the session's window, not primed yet
    (``prime_seed``)."""
    window = windows.window(run.session_id)
    if principal is None:
        carry = await find_carry(store, run.session_id, run.seed_sequence, principal, window.carry)
        state = await carry_working_state(store, run.session_id, run.seed_sequence, principal)
    else:
        carry_event, state_event = await windows.marks(run.session_id, run.seed_sequence, principal)
        carry = None if carry_event is None else window.carry(carry_event)
        state = WorkingState() if state_event is None else carried(stored_state(state_event))
    counter = estimator.counter_id(plan.counting_key, HISTORY) if plan is not None else None
    after = carry.through if carry is not None else 0
    span = await windows.span(run.session_id, after, run.seed_sequence, counter)
    await pause(span.end)  # the window grew by a long read: seed_history passes over it again
    seed = span.items[span.end - 1] if span.end else None
    if not isinstance(seed, UserMessage) or seed.seq != run.seed_sequence:
        found = "nothing" if seed is None or seed.seq != run.seed_sequence else type(seed).__name__
        raise ModelValidationError(
            "RunContext",
            "seed_sequence",
            f"session {run.session_id!r} holds {found} at sequence {run.seed_sequence}, not a UserMessage",
        )
    # A warm worker primed the rows it seeded from before: only the new ones are left.
    seeded = seed_history(span, principal, span.window.primed)
    history = seeded.history
    # Items read from the log in sequence order, the seed last: nothing to check again.
    base = carry.seed(run.run_id) if carry is not None else Checkpoint(run.run_id)
    checkpoint = evolve(base, conversation=(*history, seed), working_state=state)
    fresh_sequences: Sequence[int] = ()
    fresh_tokens: Sequence[int | None] = ()
    fresh_items: Sequence[ConversationItem] = ()
    if plan is not None:
        fresh_sequences, fresh_tokens = seeded.fresh_sequences, seeded.fresh_tokens
        fresh_items = seeded.fresh_items
    return SeedRead(
        checkpoint, carry, counter, plan, history, fresh_sequences, fresh_tokens, fresh_items, span.window
    )


def prime_seed(builder: ContextBuilder, run: RunContext, read: SeedRead) -> Seed:
    """Render the seed's history into its window's line and prime the memo with the stored
    counts; the counts it had to make are the seed's ``backfill`` (to store with it)."""
    return finish(prime_seed_steps(builder, run, read))


def prime_seed_steps(builder: ContextBuilder, run: RunContext, read: SeedRead) -> Steps[Seed]:
    """``prime_seed`` as steps (``core.slices``): a long history renders and counts in slices."""
    backfill: tuple[tuple[int, int], ...] = ()
    plan = read.plan
    if plan is not None:
        window = read.window
        renders = yield from builder.prerender_steps(window.line, read.history, read.fresh_items)
        backfill = yield from prime_history_steps(
            builder.estimator, plan.counting_key, read.fresh_sequences, read.fresh_tokens, renders
        )
        yield from count_pointers_steps(
            builder.estimator, plan.counting_key, window.line.pointers, read.fresh_items
        )
        window.primed = max(window.primed, run.seed_sequence - 1)
        if read.carry is not None:
            prime_summary(builder.estimator, plan.counting_key, read.carry, builder)
    return Seed(read.checkpoint, read.carry, read.counter, backfill)


def _digest(rendered: object) -> bytes:
    cached = getattr(rendered, "_cj", None)  # filled by the native renderer
    digest: bytes = cached[1] if cached is not None else backends.active().item_canonical(rendered)[1]
    return digest


def _digests(renders: Sequence[object]) -> list[bytes]:
    return [cj[1] if (cj := getattr(r, "_cj", None)) is not None else _digest(r) for r in renders]


def prime_history(
    estimator: Estimator,
    model_id: str,
    sequences: Sequence[int],
    counts: Sequence[int | None],
    renders: Sequence[RenderedItem],
) -> tuple[tuple[int, int], ...]:
    """Prime the memo with the stored ``counts`` of history items (``renders``: their history
    renders; ``sequences``: their log sequences); count those without one (``None``) and
    return ``(sequence, raw)`` for them (to be stored)."""
    return finish(prime_history_steps(estimator, model_id, sequences, counts, renders))


def prime_history_steps(
    estimator: Estimator,
    model_id: str,
    sequences: Sequence[int],
    counts: Sequence[int | None],
    renders: Sequence[RenderedItem],
) -> Steps[tuple[tuple[int, int], ...]]:
    """``prime_history`` as steps (``core.slices``): the counts made in slices."""
    if not len(sequences) == len(counts) == len(renders):
        raise ValueError(
            f"prime_history: {len(sequences)} sequences, {len(counts)} counts, {len(renders)} renders"
        )
    tokens = list(counts)
    missing: list[tuple[int, object]] = []
    if None in tokens:  # some were never counted: count those, prime the rest
        yield
        missing = [(seq, r) for seq, r, raw in zip(sequences, renders, tokens, strict=True) if raw is None]
        yield
        renders = [r for r, raw in zip(renders, tokens, strict=True) if raw is not None]
        tokens = [raw for raw in tokens if raw is not None]
    if tokens:
        yield
        # The native renderer fills each render's canonical cache: its digest is read, not made.
        digests = yield from batches(_digests, renders)
        estimator.prime(model_id, RENDERED, digests, cast(list[int], tokens))
    if not missing:
        return ()
    yield
    counted = yield from batches(
        lambda part: estimator.raw_estimates(part, model_id), [rendered for _, rendered in missing]
    )
    return tuple((seq, raw) for (seq, _), raw in zip(missing, counted, strict=True))


def count_pointers_steps(
    estimator: Estimator,
    model_id: str,
    pointers: Mapping[bytes, RenderedItem],
    items: Sequence[ConversationItem],
) -> Steps[None]:
    """Count the pointers (``pointers``: the line's, by item digest) of the tool results
    among ``items`` (the rows this seed read fresh) into the memo, in slices, when they are
    many: a fit over budget measures the pointer of every tool result it elides, in its one
    native call (500 pointers counted exactly: a few milliseconds of the first build's
    stretch). A few are left to the fit."""
    results = [item for item in items if isinstance(item, ToolResult)]
    if len(results) <= SLICE_ITEMS:
        return
    yield
    made = [p for item in results if (p := pointers.get(digest_of(item))) is not None]
    yield from batches(lambda part: estimator.raw_estimates(part, model_id), made)


def summary_counts(
    estimator: Estimator, model_id: str, summary: str, elided: Sequence[ElidedSpan]
) -> dict[str, int]:
    """Raw counts of a summary's rendered blocks, by counter id (stored in the carry)."""
    blocks = render_summary(summary, elided)
    raws = estimator.raw_estimates(blocks, model_id)
    return {estimator.counter_id(model_id, kind): raw for kind, raw in zip(SUMMARY_KINDS, raws, strict=False)}


def prime_summary(estimator: Estimator, model_id: str, carry: Carry, builder: ContextBuilder) -> None:
    """Prime the memo with a carry's stored summary counts (when they are this estimator's)."""
    blocks = builder.summary_blocks(carry.summary, carry.elided)
    for kind, block in zip(SUMMARY_KINDS, blocks, strict=False):
        raw = carry.tokens.get(estimator.counter_id(model_id, kind))
        if raw is not None:
            estimator.prime(model_id, RENDERED, [_digest(block)], [raw])


def history_counts(
    estimator: Estimator, model_id: str, items: Sequence[ConversationItem]
) -> list[tuple[int, int]]:
    """``(sequence, raw)`` of logged items as they will render in a later run's history."""
    logged = [item for item in items if item.seq is not None]
    raws = estimator.raw_estimates(render_items(logged, HISTORY), model_id)
    return [(item.seq, raw) for item, raw in zip(logged, raws, strict=True) if item.seq is not None]


__all__ = [
    "HISTORY",
    "RENDERED",
    "SUMMARY_KINDS",
    "Seed",
    "SeedRead",
    "count_pointers_steps",
    "history_counts",
    "prime_history",
    "prime_history_steps",
    "prime_seed",
    "prime_seed_steps",
    "prime_summary",
    "read_seed",
    "summary_counts",
    "whole_pairs",
]
