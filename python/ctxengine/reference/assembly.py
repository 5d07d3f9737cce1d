"""The builder's batched per-item work (ADR 0001, "Assembly hot path")."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ArgumentError
from .arguments import check_estimator, check_int, check_items, check_optional_int, check_sequence, check_str
from .canonical import item_canonical
from .cut import select_history


def render_measure(
    items: Sequence[Any],
    region_class: str,
    render: Callable[[Any, str], Any],
    estimator: Any,
    model_id: str,
) -> tuple[list[Any], list[int]]:
    """Each item's cached rendered form for ``region_class`` (rendering on a miss) and its raw estimate."""
    rendered = []
    for item in items:
        cache = item._rc
        hit = cache.get(region_class) if cache is not None else None
        rendered.append(hit if hit is not None else render(item, region_class))
    return rendered, estimator.raw_estimates(rendered, model_id)


def digest_list(values: Sequence[Any]) -> str:
    """SHA-256 over the values' canonical digests, in order."""
    h = hashlib.sha256()
    for value in values:
        h.update(item_canonical(value)[1])
    return h.hexdigest()


# limits: the absolute numbers fit_body needs, in this order.
LIMITS = (
    "usable",
    "history_cap",
    "tool_cap",
    "working_state_cap",
    "skill_items_cap",
    "skill_tokens_cap",
    "knowledge_items_cap",
    "knowledge_tokens_cap",
    "recall_cap",
    "summary_floor",
    "summary_compactable",
)


def _check_limits(function: str, limits: object) -> list[Any]:
    values = check_sequence(function, "limits", limits, "limits")
    if len(values) != len(LIMITS):
        raise ArgumentError(function, "limits", f"expected {len(LIMITS)} values, got {len(values)}")
    for index, key in enumerate(LIMITS):
        if key == "summary_floor":
            check_optional_int(function, f"limits.{key}", values[index])
        elif key != "summary_compactable":
            value = check_int(function, f"limits.{key}", values[index])
            if key.endswith("_items_cap") and value < 0:
                raise ArgumentError(function, f"limits.{key}", f"must not be negative, got {value}")
    return values


def fit_body(
    history_items: Sequence[Any],
    turn_items: Sequence[Any],
    first_user: bool,
    summary: Sequence[Any],
    skills: Sequence[Any],
    working_state: Sequence[Any],
    knowledge: Sequence[tuple[str, Any]],
    recall_lines: Sequence[str],
    recall: Sequence[Any],
    corrections: Sequence[Any],
    metadata: Sequence[Any],
    limits: Sequence[int],
    render: Callable[[Any, str], Any],
    render_recall: Callable[[list[str]], Any],
    pointer: Callable[[Any], Any],
    estimator: Any,
    model_id: str,
) -> tuple[list[Any], int, str, bool, int, int, list[str], str]:
    """Region B measured, capped, yielded and cut (ADR 0003's ladder), in one call.

    Returns ``(body, body_raw, reason, compactable, cut, history_budget,
    yield_steps, body_sha256)``; ``body`` is in the region table's order.
    """
    name = "fit_body"
    history_items = check_items(name, history_items, "history_items")[0]
    turn_items = check_items(name, turn_items, "turn_items")[0]
    limits = _check_limits(name, limits)
    check_estimator(name, estimator)
    check_str(name, "model_id", model_id)
    (
        usable,
        history_cap,
        tool_cap,
        ws_cap,
        skill_items_cap,
        skill_tokens_cap,
        knowledge_items_cap,
        knowledge_tokens_cap,
        recall_cap,
        summary_floor,
        summary_compactable,
    ) = limits

    def c(raw_sum: int) -> int:
        return int(estimator.corrected(raw_sum, model_id))

    def raw_of(items: Sequence[Any]) -> int:
        return sum(estimator.raw_estimates(list(items), model_id)) if items else 0

    history, history_raws = render_measure(history_items, "history", render, estimator, model_id)
    if first_user:
        head, head_raws = render_measure(turn_items[:1], "current_user", render, estimator, model_id)
        rest, rest_raws = render_measure(turn_items[1:], "current_turn", render, estimator, model_id)
        turn = head + rest
        turn_raw = sum(head_raws) + sum(rest_raws)
    else:
        turn, turn_raws = render_measure(turn_items, "current_turn", render, estimator, model_id)
        turn_raw = sum(turn_raws)
    summary_raw = raw_of(summary)
    skills_raw = raw_of(skills)
    ws_raw = raw_of(working_state)
    corr_raw = raw_of(corrections)
    meta_raw = raw_of(metadata)
    kept = [(pid, item, raw_of([item])) for pid, item in knowledge]
    lines = list(recall_lines)
    recall_items = list(recall)
    recall_raw = raw_of(recall_items)
    steps: list[str] = []

    reason = "fits"
    compactable = False
    fixed_raw = skills_raw + ws_raw + corr_raw + meta_raw + turn_raw
    if c(ws_raw) > ws_cap:
        reason = "working_state_exceeds_cap"
    elif len(skills) > skill_items_cap or c(skills_raw) > skill_tokens_cap:
        reason = "skill_bodies_exceed_cap"
    elif c(fixed_raw) > usable:
        reason = "fixed_body_exceeds_context_window"
    elif c(fixed_raw + summary_raw) > usable:
        reason = "body_exceeds_context_window"
        compactable = bool(summary_compactable)

    def drop_recall_line() -> None:
        nonlocal recall_items, recall_raw
        lines.pop()
        recall_items = [render_recall(list(lines))] if lines else []
        recall_raw = raw_of(recall_items)

    # Class caps first (absolute, independent of pressure).
    while len(kept) > knowledge_items_cap or (kept and c(sum(n for _, _, n in kept)) > knowledge_tokens_cap):
        steps.append(f"knowledge_over_cap:{kept.pop()[0]}")
    over_cap = 0
    while lines and c(recall_raw) > recall_cap:
        drop_recall_line()
        over_cap += 1
    if over_cap:
        steps.append(f"recall_lines_over_cap:{over_cap}")

    knowledge_raw = sum(n for _, _, n in kept)
    history_raw = sum(history_raws)
    base_raw = fixed_raw + summary_raw

    def over() -> bool:
        return bool(c(base_raw + knowledge_raw + recall_raw + history_raw) > usable)

    # The ladder, each rung only while the body is still over.
    while kept and over():
        pid, _, n = kept.pop()
        knowledge_raw -= n
        steps.append(f"knowledge_dropped:{pid}")
    dropped = 0
    while lines and over():
        drop_recall_line()
        dropped += 1
    if dropped:
        steps.append(f"recall_lines_dropped:{dropped}")

    # Tool results are part of history: while the whole history is within the
    # tool-result cap and nothing is over, no result needs looking at.
    results: list[int] = []
    result_raw = 0
    if c(history_raw) > tool_cap or over() or c(history_raw) > history_cap:
        results = [i for i, item in enumerate(history_items) if item.kind == "tool_result"]
        result_raw = sum(history_raws[i] for i in results)
    next_result = 0

    def truncate_next() -> bool:
        """Truncate the oldest untruncated history tool result; False when none is left."""
        nonlocal next_result, result_raw, history_raw
        while next_result < len(results):
            i = results[next_result]
            next_result += 1
            short = pointer(history_items[i])
            new_raw = raw_of([short])
            if new_raw < history_raws[i]:
                result_raw += new_raw - history_raws[i]
                history_raw += new_raw - history_raws[i]
                history[i] = short
                history_raws[i] = new_raw
                return True
        return False

    truncated = 0
    while c(result_raw) > tool_cap and truncate_next():
        truncated += 1
    if truncated:
        steps.append(f"tool_results_over_cap:{truncated}")
    truncated = 0
    while (over() or c(history_raw) > history_cap) and truncate_next():
        truncated += 1
    if truncated:
        steps.append(f"tool_results_truncated:{truncated}")

    other_raw = base_raw + knowledge_raw + recall_raw
    history_budget = max(0, min(history_cap, usable - c(other_raw)))
    cut = 0
    if history_items:
        cut = select_history(history_items, summary_floor, history_budget, estimator, model_id, history_raws)
    if cut > 0:
        steps.append(f"history_cut:{cut}")
        if reason == "fits":
            reason = "history_requires_compaction"
            compactable = True

    body = [
        *summary,
        *history[cut:],
        *skills,
        *working_state,
        *(item for _, item, _ in kept),
        *recall_items,
        *corrections,
        *metadata,
        *turn,
    ]
    body_raw = other_raw + history_raw - sum(history_raws[:cut])
    return body, body_raw, reason, compactable, cut, history_budget, steps, digest_list(body)


__all__ = ["LIMITS", "digest_list", "fit_body", "render_measure"]
