"""The reference half of ``ctxengine.interop.openai_chat.select_history``: the history cut
over converted foreign messages, as a message index. Pair the items by position with
orphans allowed (the cut falls after the last one, ADR 0019), cut as ``select_history``
does, move a cut that fell inside a message to the next message, then past any tool pair
that move split."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import OrphanedToolPair
from .arguments import CALL, RESULT, check_cut_arguments, check_items, estimator_int, estimator_raws
from .cut import _pair_ends, cut_after_pairs, select_history


def message_cut(cut: int, owners: Sequence[int], result_of: dict[int, int]) -> int:
    """An item cut as a message index: moved to the next message boundary, then past the
    result of any call that the move dropped (a result is one whole message)."""
    n = len(owners)
    while 0 < cut < n and owners[cut] == owners[cut - 1]:
        cut += 1
    reach = -1
    for index in range(n):
        if index == cut:
            if reach < cut:
                break
            cut = reach + 1
        end = result_of.get(index)
        if end is not None and end > reach:
            reach = end
    if cut >= n:
        return owners[-1] + 1 if owners else 0
    return owners[cut]


def foreign_pairs(roles: Sequence[tuple[int, Any]], owners: Sequence[int]) -> tuple[dict[int, int], int]:
    """A foreign history's items paired by position, orphans allowed (ADR 0019): each
    answered call's index -> its result's index, and the index after the last orphan (0
    if none). Orphans: a result without an open call for its id, a call superseded by a
    later call with its id while open, and a call never answered, except in the last
    message holding calls when only tool results follow that message (the open pair).
    ``owners[k]`` is the message of item ``k``."""
    open_calls: dict[str, int] = {}
    ends: dict[int, int] = {}
    bound = 0
    last_call = -1
    for index, (role, call_id) in enumerate(roles):
        if role == CALL:
            earlier = open_calls.get(call_id)
            if earlier is not None:
                bound = max(bound, earlier + 1)
            open_calls[call_id] = index
            last_call = index
        elif role == RESULT:
            call_index = open_calls.pop(call_id, None)
            if call_index is None:
                bound = index + 1
            else:
                ends[call_index] = index
    if open_calls:
        last = owners[last_call]
        tail_ok = all(role == RESULT for (role, _), owner in zip(roles, owners, strict=True) if owner > last)
        for index in open_calls.values():
            if not (tail_ok and owners[index] == last):
                bound = max(bound, index + 1)
    return ends, bound


def items_cut(
    items: Sequence[Any],
    owners: Sequence[int],
    n_messages: int,
    summary_floor: int,
    history_tokens: int,
    estimator: Any,
    model_id: str,
    *,
    strict: bool = False,
) -> int:
    """The reference definition of the message-index cut: ``items`` converted from
    ``n_messages`` messages (``owners[k]`` is the message of item ``k``) are cut as
    ``select_history`` cuts, after the last orphan (``foreign_pairs``), and the cut moves
    to a message start (``message_cut``). ``strict``: an orphan raises ``OrphanedToolPair``
    naming its message instead."""
    if strict:
        try:
            cut = select_history(items, summary_floor, history_tokens, estimator, model_id)
        except OrphanedToolPair as exc:
            index = owners[exc.index] if exc.index < len(owners) else n_messages
            raise OrphanedToolPair(exc.call_id, index, exc.reason) from None
        return message_cut(cut, owners, _pair_ends(check_items("select_history", items)[1]))
    values, roles = check_items("select_history", items)
    floor, tokens, model = check_cut_arguments(
        "select_history", summary_floor, history_tokens, estimator, model_id
    )
    ends, bound = foreign_pairs(roles, owners)
    measured = estimator_raws(estimator.raw_estimates(values, model), len(values))

    def corrected(raw_sum: int) -> int:
        return estimator_int(estimator.corrected(raw_sum, model), "corrected")

    cut = cut_after_pairs(values, ends, floor, tokens, measured, corrected, bound)
    return message_cut(cut, owners, ends)


__all__ = ["foreign_pairs", "items_cut", "message_cut"]
