"""Region B's fit (ADR 0001, "Assembly hot path"; the yield ladder of ADR 0003).

This is the specification the Rust backend implements: the same checks,
lookups, loops and steps, in the same order (``ctxengine.model.body``
describes the contract).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ..model.body import BodyFit
from .arguments import (
    RESULT,
    check_body_inputs,
    check_estimator,
    check_limits,
    check_str,
    estimator_int,
    estimator_raws,
)
from .canonical import item_canonical
from .cut import _pair_ends, cut_after_pairs

# The pressure reasons (``Pressure.reason``).
FITS = "fits"
HISTORY_REQUIRES_COMPACTION = "history_requires_compaction"


def _missing(indices: list[int]) -> BodyFit:
    return BodyFit(
        body=[],
        body_raw=0,
        reason=FITS,
        compactable=False,
        cut=0,
        history_budget=0,
        yield_steps=[],
        body_sha256="",
        missing=indices,
    )


def _line_held(
    history: list[Any], roles: list[tuple[int, Any]], line: tuple[list[Any], list[Any], list[Any]] | None
) -> list[tuple[Any, Any] | None]:
    """Per history item, its (render, pointer) from the line, or ``None``: held where
    the line's item is the very item and holds a render (and a tool result's pointer)."""
    if line is None:
        return [None] * len(history)
    items, renders, pointers = line
    held: list[tuple[Any, Any] | None] = []
    for i, item in enumerate(history):
        hit = None
        if i < len(items) and items[i] is item and renders[i] is not None:
            if roles[i][0] != RESULT or pointers[i] is not None:
                hit = (renders[i], pointers[i])
        held.append(hit)
    return held


def fit_body(*, inputs: Any, limits: Any, estimator: Any, model_id: str) -> BodyFit:
    """Region B measured, capped, yielded and cut (ADR 0003's ladder), in one call."""
    name = "fit_body"
    history, roles, renders, pointers, line, blocks = check_body_inputs(name, inputs)
    usable, history_cap, tool_cap, summary_floor, summary_compactable = check_limits(name, limits)
    check_estimator(name, estimator)
    check_str(name, "model_id", model_id)

    def c(raw_sum: int) -> int:
        return estimator_int(estimator.corrected(raw_sum, model_id), "corrected")

    def raws(values: Sequence[Any]) -> list[int]:
        return estimator_raws(estimator.raw_estimates(list(values), model_id), len(values)) if values else []

    # 1. The history's renders, from the line where it holds the very item (and its
    # pointer, for a tool result), else by item digest: the tables must hold the rest.
    held = _line_held(history, roles, line)
    digests = [None if hit else item_canonical(item)[1] for item, hit in zip(history, held, strict=True)]
    rendered = [hit[0] if hit else renders.get(digest) for hit, digest in zip(held, digests, strict=True)]
    missing = [i for i, render in enumerate(rendered) if render is None]
    if missing:
        return _missing(missing)
    history_raws = raws(rendered)

    # 2. Every block's items, in body order (a lines block: its whole block).
    block_raws: list[list[int]] = []
    for block in blocks:
        if block.kind == "lines":
            block_raws.append(raws(block.items[-1:]))
        else:
            block_raws.append(raws(block.items))
    steps: list[str] = []

    def total_of(kind: str) -> int:
        return sum(sum(r) for b, r in zip(blocks, block_raws, strict=True) if b.kind == kind)

    summary_raw = total_of("summary")
    ws_raw = total_of("working_state")
    skills_raw = total_of("skills")
    fixed_raw = ws_raw + skills_raw + total_of("fixed") + total_of("turn")
    reason = FITS
    compactable = False
    ws = next((b for b in blocks if b.kind == "working_state"), None)
    skills = next((b for b in blocks if b.kind == "skills"), None)
    if ws is not None and ws.max_tokens is not None and c(ws_raw) > ws.max_tokens:
        reason = "working_state_exceeds_cap"
    elif skills is not None and (
        (skills.max_items is not None and len(skills.items) > skills.max_items)
        or (skills.max_tokens is not None and c(skills_raw) > skills.max_tokens)
    ):
        reason = "skill_bodies_exceed_cap"
    elif c(fixed_raw) > usable:
        reason = "fixed_body_exceeds_context_window"
    elif c(fixed_raw + summary_raw) > usable:
        reason = "body_exceeds_context_window"
        compactable = summary_compactable

    # The yielding blocks: how many of their items (passages) or lines stay.
    kept = [len(b.items) for b in blocks]
    yield_raw = [sum(r) for r in block_raws]

    def shorten(at: int) -> None:
        """Drop the last line of lines block ``at``."""
        kept[at] -= 1
        yield_raw[at] = raws(blocks[at].items[kept[at] - 1 : kept[at]])[0] if kept[at] else 0

    # Class caps first (absolute, independent of pressure), block by block.
    for at, block in enumerate(blocks):
        if block.kind == "passages":
            while kept[at] and (
                (block.max_items is not None and kept[at] > block.max_items)
                or (block.max_tokens is not None and c(sum(block_raws[at][: kept[at]])) > block.max_tokens)
            ):
                kept[at] -= 1
                steps.append(f"{block.region_class}_over_cap:{block.ids[kept[at]]}")
            yield_raw[at] = sum(block_raws[at][: kept[at]])
        elif block.kind == "lines" and block.max_tokens is not None:
            over_cap = 0
            while kept[at] and c(yield_raw[at]) > block.max_tokens:
                shorten(at)
                over_cap += 1
            if over_cap:
                steps.append(f"{block.region_class}_lines_over_cap:{over_cap}")

    history_raw = sum(history_raws)
    base_raw = fixed_raw + summary_raw
    yielding = [at for at, b in enumerate(blocks) if b.kind in ("passages", "lines")]

    def over() -> bool:
        return c(base_raw + sum(yield_raw[at] for at in yielding) + history_raw) > usable

    # The ladder, each rung only while the body is still over.
    for at in yielding:
        block = blocks[at]
        if block.kind == "passages":
            while kept[at] and over():
                kept[at] -= 1
                yield_raw[at] -= block_raws[at][kept[at]]
                steps.append(f"{block.region_class}_dropped:{block.ids[kept[at]]}")
        else:
            dropped = 0
            while kept[at] and over():
                shorten(at)
                dropped += 1
            if dropped:
                steps.append(f"{block.region_class}_lines_dropped:{dropped}")

    # Tool results are part of history: while the whole history is within the
    # tool-result cap and nothing is over, no result needs looking at.
    results: list[int] = []
    result_raw = 0
    if c(history_raw) > tool_cap or over() or c(history_raw) > history_cap:
        results = [i for i, (role, _) in enumerate(roles) if role == RESULT]
        result_raw = sum(history_raws[i] for i in results)
    next_result = 0
    body_history = list(rendered)

    def pointer_of(i: int) -> Any:
        hit = held[i]
        return hit[1] if hit else pointers.get(digests[i])

    lacking: list[int] = []

    def truncate_next() -> bool:
        """Truncate the oldest untruncated history tool result; False when none is left."""
        nonlocal next_result, result_raw, history_raw
        while next_result < len(results):
            i = results[next_result]
            pointer = pointer_of(i)
            if pointer is None:  # every result the tables lack a pointer for, then stop
                lacking.extend(j for j in results if pointer_of(j) is None)
                return False
            next_result += 1
            new_raw = raws([pointer])[0]
            if new_raw < history_raws[i]:
                result_raw += new_raw - history_raws[i]
                history_raw += new_raw - history_raws[i]
                body_history[i] = pointer
                history_raws[i] = new_raw
                return True
        return False

    truncated = 0
    while c(result_raw) > tool_cap and truncate_next():
        truncated += 1
    if lacking:
        return _missing(lacking)
    if truncated:
        steps.append(f"tool_results_over_cap:{truncated}")
    truncated = 0
    while (over() or c(history_raw) > history_cap) and truncate_next():
        truncated += 1
    if lacking:
        return _missing(lacking)
    if truncated:
        steps.append(f"tool_results_truncated:{truncated}")

    other_raw = base_raw + sum(yield_raw[at] for at in yielding)
    history_budget = max(0, min(history_cap, usable - c(other_raw)))
    cut = 0
    if history:
        ends = _pair_ends(roles)
        cut = cut_after_pairs(history, ends, summary_floor, history_budget, history_raws, c)
    if cut > 0:
        steps.append(f"history_cut:{cut}")
        if reason == FITS:
            reason = HISTORY_REQUIRES_COMPACTION
            compactable = True

    # The body, in the blocks' (the region table's) order.
    body: list[Any] = []
    for at, block in enumerate(blocks):
        if block.kind == "history":
            body.extend(body_history[cut:])
        elif block.kind == "lines":
            body.extend(block.items[kept[at] - 1 : kept[at]] if kept[at] else ())
        else:
            body.extend(block.items[: kept[at]])
    digest = hashlib.sha256()
    for value in body:
        digest.update(item_canonical(value)[1])
    return BodyFit(
        body=body,
        body_raw=other_raw + history_raw - sum(history_raws[:cut]),
        reason=reason,
        compactable=compactable,
        cut=cut,
        history_budget=history_budget,
        yield_steps=steps,
        body_sha256=digest.hexdigest(),
        missing=[],
    )


__all__ = ["fit_body"]
