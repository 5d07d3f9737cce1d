"""How the loop commits a run's writes: in one call where the store can take a prediction
(ADR 0013), else in an ordinary transaction.

A worker that wrote a session's last event knows what the store would answer
to its next writes: the next sequence is one past the last one it holds, a
run it wrote the last checkpoint of is at the version after it, a new run's
lease is its first. A store with ``_predicted(...)`` (PostgreSQL) then takes
the block's writes in one call that checks those predictions and writes all
or nothing. When the worker cannot predict (a session it has not read, a run
whose rows it does not know) or the store refuses (another writer moved the
session on, the run was claimed, a read inside the block), the same block
runs again in ``store.transaction()``: the outcome is the ordinary path's,
byte for byte; only the number of round trips differs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeVar, cast

from ..errors import StorePredictionMissed
from ..stores.events import Store

T = TypeVar("T")


class Predicting(Protocol):
    def __call__(
        self,
        session_id: str,
        next_sequence: int,
        run_id: str,
        version: int,
        *,
        sent: Callable[[], None] | None = None,
    ) -> AbstractAsyncContextManager[None]: ...


class Commits:
    """Runs write blocks for one loop, counting the one-call commits and the misses."""

    def __init__(self, store: Store) -> None:
        self.store = store
        found = getattr(store, "_predicted", None)
        self._predicted = cast(Predicting, found) if callable(found) else None
        known = getattr(store.events, "last_known", None)
        self._last_known = cast(Callable[[str], "int | None"], known) if callable(known) else None
        #: Blocks committed in one call, and predictions the store refused.
        self.one_call = 0
        self.missed = 0

    async def run(
        self,
        body: Callable[[bool], Awaitable[T]],
        *,
        session_id: str,
        run_id: str,
        next_sequence: int | None,
        version: int | None,
        on_miss: Callable[[], None] | None = None,
        on_sent: Callable[[], None] | None = None,
    ) -> T:
        """``body(predicted)`` in one transaction (``predicted``: inside a predicted commit,
        where a read misses). ``next_sequence``/``version``: the predictions
        (``None``: unknown, no attempt). ``on_miss`` undoes what a refused body changed
        outside the store, before the body runs again. A body that raises on the predicted
        path runs again on the ordinary one (whose error, if any, is the caller's); a call
        that fails once sent (a lost connection) raises, as a failed commit does. ``on_sent`` is
        called on the event loop once a predicted write set is on its way (the caller may
        then do work of its own while the store commits it)."""
        if self._predicted is not None and next_sequence is not None and self._last_known is not None:
            # What this process appended to the session last, by any path (a plan, a usage
            # report), is a better guess than what the loop's reader holds.
            last = self._last_known(session_id)
            if last is not None and last >= next_sequence:
                next_sequence = last + 1
        if self._predicted is not None and next_sequence is not None and version is not None:
            sent = False
            try:
                async with self._predicted(session_id, next_sequence, run_id, version, sent=on_sent):
                    result = await body(True)
                    sent = True  # the block's exit sends it
            except StorePredictionMissed:
                pass  # refused, before or by the store: nothing was written
            except Exception:
                if sent:
                    raise  # the call itself failed (a lost connection): as the ordinary commit would
                # A wrong prediction can fail the body itself (a sequence that does not follow
                # the checkpoint's): nothing was sent, and the ordinary path gives the outcome.
            else:
                self.one_call += 1
                return result
            self.missed += 1
            if on_miss is not None:
                on_miss()
        async with self.store.transaction():
            return await body(False)


__all__ = ["Commits", "Predicting"]
