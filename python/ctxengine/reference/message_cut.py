"""The reference half of ``ctxengine.interop.openai_chat.select_history``: the history cut
over converted foreign messages, as a message index. Cut with ``select_history``, move a cut
that fell inside a message to the next message, then past any tool pair that move split."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import OrphanedToolPair


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


def items_cut(
    items: Sequence[Any],
    owners: Sequence[int],
    n_messages: int,
    summary_floor: int,
    history_tokens: int,
    estimator: Any,
    model_id: str,
) -> int:
    """The reference definition of the message-index cut: ``items`` converted from
    ``n_messages`` messages (``owners[k]`` is the message of item ``k``) are cut with
    ``select_history``, and the cut moves to a message start (``message_cut``). A tool
    pair error names the message."""
    from .cut import select_history

    try:
        cut = select_history(items, summary_floor, history_tokens, estimator, model_id)
    except OrphanedToolPair as exc:
        index = owners[exc.index] if exc.index < len(owners) else n_messages
        raise OrphanedToolPair(exc.call_id, index, exc.reason) from None
    result_of: dict[int, int] = {}
    open_calls: dict[str, int] = {}
    for k, item in enumerate(items):
        call_id = getattr(item, "call_id", None)
        if call_id is None:
            continue
        if item.kind == "tool_call":
            open_calls[call_id] = k
        else:
            result_of[open_calls.pop(call_id)] = k
    return message_cut(cut, owners, result_of)


__all__ = ["items_cut", "message_cut"]
