"""The current turn: where it starts in a checkpoint's conversation, and where this run's
reasoning items replay inside it. Shared by the builder and the compactor (which must
agree on what is history and never compact the current turn).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ContextError
from ..model import ConversationItem, ReasoningItem


def split_turn(conversation: Sequence[ConversationItem], seed_sequence: int) -> int:
    """Index of the first current-turn item: history is everything with ``seq < seed_sequence``.

    Scans back from the end (the turn is short); ``Checkpoint`` guarantees
    that sequences increase, so everything before the boundary is history.
    """
    boundary = 0
    for i in range(len(conversation) - 1, -1, -1):
        seq = conversation[i].seq
        if seq is not None and seq < seed_sequence:
            boundary = i + 1
            break
    for item in conversation[boundary:]:
        if item.seq is not None and item.seq < seed_sequence:
            raise ContextError(
                f"checkpoint conversation is out of order: item seq {item.seq} below the seed "
                f"sequence {seed_sequence} follows the current turn"
            )
    return boundary


def merge_reasoning(
    turn: Sequence[ConversationItem], reasoning: Sequence[ReasoningItem]
) -> list[ConversationItem]:
    """Replay each reasoning item just before the first turn item that came after it."""
    if not reasoning:
        return list(turn)
    pending = sorted(reasoning, key=lambda r: r.seq if r.seq is not None else -1)
    out: list[ConversationItem] = []
    j = 0
    for item in turn:
        while j < len(pending) and item.seq is not None and (pending[j].seq or -1) < item.seq:
            out.append(pending[j])
            j += 1
        out.append(item)
    out.extend(pending[j:])
    return out


__all__ = ["merge_reasoning", "split_turn"]
