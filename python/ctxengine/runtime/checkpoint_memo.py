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

Bounded by the memory its entries are estimated to hold (``memo_bytes``: the
items they keep alive, with their entries), by default the process's
``MemoryLimits.checkpoint_bytes`` (``ctxengine.set_memory_limits``), and by
``capacity`` runs and sessions; the least recently written go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any

from ..core.history import shared_prefix
from ..core.memory import memory_limits
from ..errors import ArgumentError
from ..model import ConversationItem
from ..stores.events import RawCheckpoint
from . import checkpoint_refs as refs
from .checkpoint_refs import Entry

Conversation = tuple[ConversationItem, ...]

#: An entry's estimated memory beside its items: the row, dicts and tuples that hold them.
MEMO_OBJECTS = 1024
#: Per item of an entry's conversation: the item's objects beside its canonical bytes (the
#: bytes count once more for its content), and its entry and segment.
ITEM_OBJECTS = 320

_cached = attrgetter("_cj")
_first = itemgetter(0)


def memo_bytes(conversation: Sequence[ConversationItem], start: int = 0) -> int:
    """The estimated memory of ``conversation[start:]`` held by a memo entry: per item
    ``ITEM_OBJECTS`` and twice its canonical bytes (an item not yet canonicalized: 512)."""
    tail = islice(conversation, start, None)
    held = [cj for cj in map(_cached, tail) if cj is not None]
    missing = len(conversation) - start - len(held)
    return (len(conversation) - start) * ITEM_OBJECTS + 2 * sum(map(len, map(_first, held))) + 512 * missing


def _grown(known: Conversation, conversation: Sequence[ConversationItem]) -> bool:
    """Cheaply: whether ``conversation`` starts with ``known`` (its last item, the same object)."""
    n = len(known)
    return n <= len(conversation) and (n == 0 or conversation[n - 1] is known[-1])


def _extends(known: Conversation, conversation: Sequence[ConversationItem]) -> bool:
    return len(known) <= len(conversation) and shared_prefix(known, conversation) == len(known)


class RefMemo:
    """Per process, bounded: the last reference write of each run and session."""

    def __init__(self, capacity: int = 4096, *, max_bytes: int | None = None) -> None:
        for name, value in (("capacity", capacity), ("max_bytes", 0 if max_bytes is None else max_bytes)):
            if type(value) is not int or value < 0:
                raise ArgumentError("RefMemo", name, f"a non-negative int, got {value!r}")
        self.capacity = capacity
        #: The bound given, or ``None``: the process's ``MemoryLimits.checkpoint_bytes``.
        self._max_bytes = max_bytes
        #: Per run: the last row written, the dict it materializes to, its conversation.
        self._runs: OrderedDict[str, tuple[RawCheckpoint, dict[str, Any], Conversation]] = OrderedDict()
        #: Per session: the last full snapshot's conversation, entries, segments, and
        #: whether they were folded into spans.
        self._full: OrderedDict[str, tuple[Conversation, list[Entry], list[Any], bool]] = OrderedDict()
        #: ``memo_bytes`` of each entry (by ``("run", id)`` / ``("session", id)``), least recently
        #: written first, and their sum.
        self._sizes: dict[tuple[str, str], int] = {}
        self.nbytes = 0

    @property
    def max_bytes(self) -> int:
        """The bound of the entries' ``memo_bytes``."""
        given = self._max_bytes
        return memory_limits().checkpoint_bytes if given is None else given

    def _keep(
        self, table: OrderedDict[str, Any], kind: str, key: str, value: Any, old: Conversation | None
    ) -> None:
        """``table[key] = value`` (its conversation first) as the most recent entry, sized from
        the entry it replaces when that conversation grew from ``old``; then back within the
        bounds, least recently written first (runs and sessions alike)."""
        conversation: Conversation = value[0] if kind == "session" else value[2]
        size_key = (kind, key)
        before = self._sizes.pop(size_key, 0)
        self.nbytes -= before
        if old is not None and before and _grown(old, conversation):
            size = before + memo_bytes(conversation, len(old))
        else:
            size = MEMO_OBJECTS + memo_bytes(conversation)
        table.pop(key, None)
        limit = self.max_bytes
        if size > limit:
            return  # an entry over the whole bound is not kept
        table[key] = value
        self._sizes[size_key] = size
        self.nbytes += size
        while self.nbytes > limit or len(table) > self.capacity:
            self._drop_oldest(table if len(table) > self.capacity else None)

    def _drop_oldest(self, table: OrderedDict[str, Any] | None) -> None:
        """Drop the least recently written entry (of ``table``, or of both: ``_sizes`` is in
        the order entries were written)."""
        if table is None:
            kind, key = next(iter(self._sizes))
        else:
            kind, key = ("run" if table is self._runs else "session"), next(iter(table))
        (self._runs if kind == "run" else self._full).pop(key)
        self.nbytes -= self._sizes.pop((kind, key))

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
        self._keep(
            self._full,
            "session",
            session_id,
            (conversation, entries, segments, spans),
            known[0] if known is not None else None,
        )
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
        known = self._runs.get(run_id)
        self._keep(
            self._runs, "run", run_id, (row, data, conversation), known[2] if known is not None else None
        )

    def forget_session(self, session_id: str) -> None:
        """Drop the session's last full snapshot (its items will not be these objects again)."""
        if self._full.pop(session_id, None) is not None:
            self.nbytes -= self._sizes.pop(("session", session_id))

    def forget(self, run_id: str) -> None:
        if self._runs.pop(run_id, None) is not None:
            self.nbytes -= self._sizes.pop(("run", run_id))


__all__ = ["ITEM_OBJECTS", "MEMO_OBJECTS", "RefMemo", "memo_bytes"]
