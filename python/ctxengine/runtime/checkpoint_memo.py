"""What a worker's last reference checkpoints were, so the next one folds only what is new.

A reference checkpoint (``checkpoint_refs``) lists its conversation as log
sequences. Written from scratch, every version walks the whole window three
times in Python: one entry per item, the entries folded into ranges, and, for
a delta, the base chain unfolded again to diff against. A turn's conversations
grow at their end: a run's next version is its last one plus the step's items,
and a session's next seed is its last one plus what was logged since, the
same objects. ``RefMemo`` keeps, per run, the dict its last version
materializes to (as ``materialize_refs`` would build it) and the conversation
it encodes, and per session the last full snapshot's conversation, entries and
ranges; a write whose conversation starts with those same objects computes
only the rest. Anything else (another row list, another conversation) takes
the full computation: the payloads are the same either way.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ..core.history import shared_prefix
from ..model import ConversationItem
from ..stores.events import RawCheckpoint
from . import checkpoint_refs as refs
from .checkpoint_refs import Entry
from .recent import remember

Conversation = tuple[ConversationItem, ...]


def _extends(known: Conversation, conversation: Sequence[ConversationItem]) -> bool:
    return len(known) <= len(conversation) and shared_prefix(known, conversation) == len(known)


class RefMemo:
    """Per process, bounded: the last reference write of each run and session."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        #: Per run: the last row written, the dict it materializes to, its conversation.
        self._runs: OrderedDict[str, tuple[RawCheckpoint, dict[str, Any], Conversation]] = OrderedDict()
        #: Per session: the last full snapshot's conversation, entries, segments, and
        #: whether they were folded into spans.
        self._full: OrderedDict[str, tuple[Conversation, list[Entry], list[Any], bool]] = OrderedDict()

    def full(
        self, session_id: str, conversation: Conversation, items: Sequence[int] | None = None
    ) -> tuple[list[Entry], list[Any]]:
        """``entries_of`` and ``to_segments`` of a full snapshot's conversation (``items``: the
        session's item sequences, for spans; see ``to_segments``)."""
        spans = items is not None
        known = self._full.get(session_id)
        if known is not None and known[3] == spans and _extends(known[0], conversation):
            tail = refs.entries_of(conversation[len(known[0]) :], session_id)
            entries = known[1] + tail
            segments = refs.to_segments(tail, known[2], items)
        else:
            entries = refs.entries_of(conversation, session_id)
            segments = refs.to_segments(entries, items=items)
        remember(self._full, session_id, (conversation, entries, segments, spans), self.capacity)
        return entries, segments

    def base(self, run_id: str, rows: list[RawCheckpoint]) -> tuple[dict[str, Any], Conversation] | None:
        """The materialized dict of ``rows`` and its conversation, when ``rows`` ends with the
        row this memo saw written last (the same object)."""
        known = self._runs.get(run_id)
        if known is None or not rows or rows[-1] is not known[0]:
            return None
        return known[1], known[2]

    def entries(
        self, session_id: str, base: dict[str, Any], known: Conversation, conversation: Conversation
    ) -> list[Entry]:
        """``entries_of(conversation)``, from the base's entries where it extends ``known``."""
        if _extends(known, conversation):
            old: list[Entry] = base["conversation"]
            return old + refs.entries_of(conversation[len(known) :], session_id)
        return refs.entries_of(conversation, session_id)

    def wrote(
        self, run_id: str, row: RawCheckpoint, data: dict[str, Any], conversation: Conversation
    ) -> None:
        """``row`` was written; it materializes to ``data`` and holds ``conversation``."""
        remember(self._runs, run_id, (row, data, conversation), self.capacity)

    def forget_session(self, session_id: str) -> None:
        """Drop the session's last full snapshot (its items will not be these objects again)."""
        self._full.pop(session_id, None)

    def forget(self, run_id: str) -> None:
        self._runs.pop(run_id, None)


__all__ = ["RefMemo"]
