"""What a foreign agent loop's next model call should carry, chosen by the engine's budget.

The Agents SDK session and the LangChain middleware hold their histories in their own
shapes (Responses items, LangChain messages). Both ask the same question: which of these
items does the next request carry? ``fit_items`` answers it with the engine's own parts, on
the items read into ctxengine items (``interop``): the session's plan (its budget, the
prefix the instructions and tools take), the builder (the yield ladder: tool results
truncated to pointers, oldest first, then the history cut, which never splits a tool call
from its result) and the compactor (a summary of what the cut left out, when compacting can
help). The answer names items by position, so each integration hands back its own objects:
the caller's items as they came, a pointer's text for a truncated tool result, and the
summary's text to put first.

Pure given the plan: no clock read is kept, nothing is stored (the summary is computed
again from the same items, with the same result).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..assembly.render_cache import render_item
from ..assembly.request import ModelRequest
from ..errors import ContextOverflow
from ..model import Checkpoint, ConversationItem, Principal, ReasoningItem, RunContext, ToolCall, ToolResult
from ..plan import ContextPlan
from ..runtime.compaction import StructuredCompactor
from ..runtime.loop import MAX_COMPACTIONS_PER_STEP

if TYPE_CHECKING:
    from ..engine import Engine

#: The region class of the compacted summary's blocks (``assembly.blocks.render_summary``).
SUMMARY = "compacted_summary"


@dataclass(frozen=True, slots=True)
class Fitted:
    """The positions of the items the next request carries, and what replaces what it drops."""

    #: Positions (into the items given) of the items kept, in order.
    kept: tuple[int, ...]
    #: Position -> the pointer a tool result was truncated to (the yield ladder's step 2).
    pointers: dict[int, str]
    #: The compacted summary of the items cut (``None``: nothing was cut).
    summary: str | None
    #: The request the choice was measured as (``metadata``: its token figures).
    request: ModelRequest

    @property
    def total_tokens(self) -> int:
        return int(self.request.metadata["total_tokens"])

    @property
    def capacity_tokens(self) -> int:
        return int(self.request.metadata["capacity_tokens"])


def fit_items(
    engine: Engine,
    plan: ContextPlan,
    principal: Principal,
    items: Sequence[ConversationItem],
    turn_start: int,
) -> Fitted:
    """Choose, from ``items`` (oldest first), what the next request carries.

    ``items[turn_start:]`` is the current turn (the user's last message and what followed),
    which never yields; everything before it is history, which may. Reasoning items ride
    with the item that follows them. A tool call without its result (or a result without its
    call) is kept where it stands only while nothing is cut, as the caller's own history would
    hold it; otherwise it is left out. ``ContextOverflow`` when even the current turn does
    not fit the window."""
    # Sequences by position (1-based), so that the request names what it kept.
    numbered = [replace(item, seq=i + 1) for i, item in enumerate(items)]
    loose = _unpaired(items)
    history = tuple(
        item for i, item in enumerate(numbered) if i not in loose and not isinstance(item, ReasoningItem)
    )
    seed = turn_start + 1
    run = RunContext(f"fit:{plan.session_id}", plan.session_id, seed)
    checkpoint = Checkpoint(run.run_id, conversation=history)
    builder, agent = engine.builder, engine.agent
    # A fit is stateless and records nothing, so it compacts extractively: a model's summary
    # could not be recorded, hence not replayed (ADR 0026).
    compactor = engine.loop.compactor
    if not isinstance(compactor, StructuredCompactor):
        compactor = StructuredCompactor(engine.estimator, max_depth=compactor.max_depth)
    for _ in range(MAX_COMPACTIONS_PER_STEP + 1):
        assembly = builder.assemble(run, checkpoint, agent, principal, plan=plan)
        pressure = assembly.pressure
        if pressure.fits or not pressure.compactable:
            break
        checkpoint, _ = compactor.compact(
            checkpoint,
            plan.budget,
            pressure.reason,
            model_id=plan.counting_key,
            seed_sequence=seed,
            history_budget_tokens=pressure.history_budget_tokens,
        )
    if not pressure.fits:
        raise ContextOverflow(
            pressure.reason,
            pressure.total_tokens,
            pressure.capacity_tokens,
            f"the current turn ({len(items) - turn_start} items) does not fit the window "
            "even with the whole history left out",
        )
    request = assembly.request
    kept: list[int] = []
    pointers: dict[int, str] = {}
    summary: list[str] = []
    for rendered in request.body:
        if rendered.seq is not None and 0 < rendered.seq <= len(items):
            at = rendered.seq - 1
            kept.append(at)
            item = numbered[at]
            # A tool result the yield ladder truncated renders as its pointer, not its text.
            if isinstance(item, ToolResult) and rendered.text != render_item(item, "history").text:
                pointers[at] = rendered.text or ""
        elif rendered.region_class == SUMMARY and rendered.text is not None:
            summary.append(rendered.text)
    if loose and not summary and len(kept) == len(history):
        kept += loose  # nothing was cut: the history as it stands, a loose call included
    return Fitted(_with_reasoning(items, kept), pointers, "\n\n".join(summary) or None, request)


def _unpaired(items: Sequence[ConversationItem]) -> list[int]:
    """Positions of the tool calls no later result answers and the results no earlier call
    asked for (a history whose tail was popped, say): no request can carry them pair-safe."""
    called: dict[str, int] = {}
    loose: list[int] = []
    for i, item in enumerate(items):
        if isinstance(item, ToolCall):
            called[item.call_id] = i
        elif isinstance(item, ToolResult):
            if called.pop(item.call_id, None) is None:
                loose.append(i)
    return sorted([*loose, *called.values()])


def _with_reasoning(items: Sequence[ConversationItem], kept: list[int]) -> tuple[int, ...]:
    """``kept`` with each reasoning item whose following item is kept, in order."""
    chosen = set(kept)
    following: int | None = None
    for i in range(len(items) - 1, -1, -1):
        if isinstance(items[i], ReasoningItem):
            if following is not None and following in chosen:
                chosen.add(i)
        else:
            following = i
    return tuple(sorted(chosen))


__all__ = ["SUMMARY", "Fitted", "fit_items"]
