"""A write set predicted and queued inside ``store._predicted(...)`` (issue 13, ADR 0013).

Inside a predicted block the store's write operations answer as the store
would (the next sequence, the run's next checkpoint version, a first lease)
and only queue the write; the block's exit commits the queue in one call
(PostgreSQL: ``postgres_predicted``, one statement; SQLite:
``sqlite_predicted``, one trip to the store's worker thread), which writes
all of it or, when a prediction does not hold, nothing
(``StorePredictionMissed``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import StorePredictionMissed
from . import _rows
from .events import Lease, NewEvent


@dataclass(slots=True)
class Prediction:
    """What the block predicted and queued: one session's events and one run's writes
    (timestamps as the adapter stores them)."""

    session_id: str
    next_sequence: int
    run_id: str
    version: int
    events: list[tuple[NewEvent, str, Any]] = field(default_factory=list)
    counts: list[tuple[int, str, int]] = field(default_factory=list)
    claim_owner: str | None = None
    checkpoint: tuple[Lease, str, str, str, Any, int] | None = None
    prune_before: int | None = None

    def answer(
        self, operations: Mapping[Callable[..., Any], Callable[..., Any]], fn: Callable[..., Any], args: Any
    ) -> Any:
        """What the store would answer to its operation ``fn(*args)``, the write queued
        (``operations``: the adapter's write operations, each to its method here); a miss for
        any other operation (it needs the store's own answer)."""
        take = operations.get(fn)
        if take is None:
            raise self.miss("the block needs an answer from the store")
        return take(self, *args)

    def miss(self, why: str) -> StorePredictionMissed:
        return StorePredictionMissed(f"session {self.session_id!r}, run {self.run_id!r}: {why}")

    def append_all(self, news: list[NewEvent], texts: list[str], created_at: Any) -> list[tuple[Any, bool]]:
        """Queue the batch; each event stored new at the next predicted sequence."""
        keys = {new.derivation_key for new in news} | {e[0].derivation_key for e in self.events}
        if len(keys) != len(news) + len(self.events):
            raise self.miss("a derivation key repeats in the write set")
        if news[0].session_id != self.session_id:
            raise self.miss(f"an append to another session {news[0].session_id!r}")
        first = self.next_sequence + len(self.events)
        self.events.extend((new, text, created_at) for new, text in zip(news, texts, strict=True))
        return [((self.session_id, first + i), True) for i in range(len(news))]

    def append(self, new: NewEvent, text: str, created_at: Any) -> tuple[Any, bool]:
        [result] = self.append_all([new], [text], created_at)
        return result

    def put_counts(self, session_id: str, counter: str, counts: list[tuple[int, int]]) -> None:
        if session_id != self.session_id:
            raise self.miss(f"counts of another session {session_id!r}")
        self.counts.extend((seq, counter, n) for seq, n in counts)

    def claim(self, run_id: str, owner: str) -> int:
        """The run's first lease (the call refuses a run claimed before)."""
        if run_id != self.run_id or self.claim_owner is not None or self.checkpoint is not None:
            raise self.miss(f"a claim of {run_id!r} that is not the run's first write")
        self.claim_owner = owner
        return 1

    def write_checkpoint(
        self, run_id: str, lease: Lease, kind: str, trigger: str, text: str, created_at: Any, fmt: int
    ) -> int:
        _rows.check_lease(run_id, lease, (lease.owner, lease.epoch))  # as the ordinary write: the run id
        if run_id != self.run_id or self.checkpoint is not None:
            raise self.miss(f"a checkpoint of {run_id!r} beyond the one predicted")
        self.checkpoint = (lease, kind, trigger, text, created_at, fmt)
        return self.version

    def prune(self, run_id: str, before_version: int) -> int:
        """Queued; the rows it deletes are not counted (the one caller, a terminal checkpoint
        write, does not ask)."""
        if run_id != self.run_id or self.checkpoint is None or self.prune_before is not None:
            raise self.miss(f"a prune of {run_id!r} without its checkpoint")
        self.prune_before = before_version
        return 0

    @property
    def empty(self) -> bool:
        return not (self.events or self.counts or self.claim_owner is not None or self.checkpoint is not None)


__all__ = ["Prediction"]
