"""The body's blocks of one build, kept per history line (the builder's ``_blocks``).

Every class of ``regions.BODY_CLASSES`` but history is rendered by its
``blocks.BODY_BLOCKS`` renderer into a ``BodyBlock`` with its caps. A line
(``SessionRenders.blocks``) keeps the blocks of its last build and what they
were made from, so a build with the same inputs hands the backend the very
same blocks; and the current turn's last view (ADR 0021), which a longer
turn starts from.
"""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter, is_
from typing import Any

from ..core.body import BodyBlock
from ..core.budget import BudgetPolicy, ContextBudget
from ..model import Checkpoint, ConversationItem, Principal
from .blocks import BODY_BLOCKS, BodyContext, clock_window
from .clearing import TurnRules, TurnView, view_turn
from .regions import BODY_CLASSES, body_order
from .render_cache import RenderCache
from .session_renders import SessionRenders

#: Per policy and budget: each class's renderer and its block with no items (caps fixed).
Rows = tuple[BudgetPolicy, ContextBudget, list[tuple[Any, BodyBlock]]]


class LineBlocks:
    """A history line's last body blocks and what they were rendered from."""

    __slots__ = (
        "end",
        "kept",
        "out",
        "out_view",
        "principal",
        "rows",
        "sources",
        "start",
        "surface",
        "turn",
        "view",
    )

    def __init__(self, rows: Rows, kept: list[BodyBlock], view: TurnView | None = None) -> None:
        self.rows = rows
        self.kept = kept
        self.out: tuple[BodyBlock, ...] | None = None
        self.sources: tuple[Any, ...] = ()
        self.turn: tuple[ConversationItem, ...] = ()
        self.principal: Principal | None = None
        self.surface: str | None = None
        self.start: Any = None
        self.end: Any = None
        #: The turn's last view (a function of the turn and its rules alone), and ``out``'s.
        self.view = view
        self.out_view: TurnView | None = None


# Every checkpoint field the blocks may read (all but the conversation, whose
# turn is ``BodyContext.turn``).
_SOURCES_OF = attrgetter(*(f.name for f in fields(Checkpoint) if f.name != "conversation"))

_SOURCES: dict[str, tuple[bool, str]] = {}


def _cap(source: str | None, policy: BudgetPolicy, budget: ContextBudget) -> int | None:
    """A cap named ``"policy.<field>"`` or ``"budget.<field>"`` (``regions.BODY_CLASSES``)."""
    if source is None:
        return None
    split = _SOURCES.get(source)
    if split is None:
        owner, _, field = source.partition(".")
        split = _SOURCES[source] = (owner == "policy", field)
    value: int = getattr(policy if split[0] else budget, split[1])
    return value


def body_rows(policy: BudgetPolicy, budget: ContextBudget, tail_last: bool = False) -> Rows:
    """Every class's renderer and empty block, with the caps of ``policy`` and ``budget``, in
    the order of ``regions.body_order(tail_last)``."""
    return (
        policy,
        budget,
        [
            (
                BODY_BLOCKS.get(name),
                BodyBlock(
                    name,
                    spec.kind,
                    max_items=_cap(spec.max_items, policy, budget),
                    max_tokens=_cap(spec.max_tokens, policy, budget),
                ),
            )
            for name, spec in ((name, BODY_CLASSES[name]) for name in body_order(tail_last))
        ],
    )


def line_blocks(
    ctx: BodyContext,
    rows: Rows,
    tables: SessionRenders,
    rules: TurnRules | None,
    renders: RenderCache,
    estimator: Any,
) -> tuple[tuple[BodyBlock, ...], TurnView | None]:
    """Every class of the body in order, rendered, with its caps, and the turn as the plan's
    ``rules`` show it (``None``: rendered whole)."""
    # The line's last blocks: the same renders again make the same blocks.
    last: LineBlocks | None = tables.blocks
    if last is None or last.rows is not rows:
        last = tables.blocks = LineBlocks(rows, [row[1] for row in rows[2]], last.view if last else None)
    turn, now = ctx.turn, ctx.now
    view: TurnView | None = None
    if rules is not None:
        # The last view while the turn is the same items under the same rules; a longer
        # turn starts from it (its items' renders and counts).
        view = last.view
        if (
            view is None
            or (view.rules is not rules and view.rules != rules)
            or len(turn) != len(view.items)
            or not all(map(is_, turn, view.items))
        ):
            view = last.view = view_turn(turn, rules, renders, estimator, view)
    # The same inputs as the line's last build (the checkpoint's fields but its
    # conversation, by identity; the turn and its view; the clock within its window):
    # its very blocks (which the backend then reads as before).
    sources = _SOURCES_OF(ctx.checkpoint)
    if (
        last.out is not None
        and last.out_view is view
        and last.principal is ctx.principal
        and last.surface == ctx.surface
        and last.start <= now < last.end
        and len(turn) == len(last.turn)
        and all(map(is_, sources, last.sources))
        and all(map(is_, turn, last.turn))
    ):
        return last.out, view
    if view is not None:
        ctx = ctx._replace(view=view)
    kept = last.kept
    changed = False
    at = 0
    for render, _ in rows[2]:
        if render is not None:
            block = kept[at]
            items, ids = render(ctx, renders)
            if (items is not block.items or ids is not block.ids) and not (
                len(items) == len(block.items) and all(map(is_, items, block.items)) and ids == block.ids
            ):
                kept[at] = BodyBlock(block.region_class, block.kind, items, ids, *block[4:])
                changed = True
        at += 1
    out = last.out
    if out is None or changed:
        out = last.out = tuple(kept)
    last.sources, last.turn, last.principal, last.surface = sources, turn, ctx.principal, ctx.surface
    last.out_view = view
    last.start, last.end = clock_window(now)
    return out, view


__all__ = ["LineBlocks", "Rows", "body_rows", "line_blocks"]
