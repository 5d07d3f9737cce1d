"""The write side every part of ``ContextLoop`` shares: the plan lookup, a run's next
checkpoint version written inside the caller's transaction, and what a worker notes after a
commit (the run's rows, the session window extended by what it wrote)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..model import Checkpoint, ConversationItem, RunContext
from ..plan import ContextPlan
from ..stores.events import Event, ItemRow, Lease, RawCheckpoint
from .checkpoints import write_checkpoint
from .window import RunMemo

if TYPE_CHECKING:
    from .loop import ContextLoop


class RunWrites:
    """A loop's checkpoint writes and the bookkeeping after a commit."""

    def __init__(self, loop: ContextLoop) -> None:
        self.loop = loop
        #: Fold a reference write from the window's last one (off: every write from scratch).
        self.fold_refs = True

    def memo(self, run: RunContext) -> RunMemo:
        """What the run's session window keeps of the run."""
        return self.loop.windows.window(run.session_id).run(run.run_id)

    async def plan_or_none(self, session_id: str) -> ContextPlan | None:
        planner = self.loop.planner
        return planner.cached(session_id) or await planner.current(session_id)

    async def write(
        self,
        run: RunContext,
        checkpoint: Checkpoint,
        trigger: str,
        lease: Lease,
        *,
        rows: list[RawCheckpoint] | None = None,
        prune: bool = False,
        appended: Sequence[Event] = (),
        appended_items: Sequence[ConversationItem] = (),
    ) -> tuple[int, list[RawCheckpoint]]:
        """Write the run's next checkpoint version inside the caller's transaction
        (``appended``: the events the transaction appended, ``appended_items`` the items
        among them: the checkpoint's spans may reach into them)."""
        loop = self.loop
        window = loop.windows.window(run.session_id)
        memo = window.run(run.run_id)
        if rows is None:
            known = memo.rows
            if known and known[-1]["version"] == checkpoint.version:
                rows = known  # what this loop wrote last: the store refuses it if stale
        written: list[RawCheckpoint] = []
        version = await write_checkpoint(
            loop.store,
            run.run_id,
            checkpoint,
            trigger=trigger,
            lease=lease,
            session_id=run.session_id,
            prune=prune,
            rows=rows,
            joined=True,
            into=written,
            carry=memo.seeded[0] if memo.seeded is not None else None,
            memo=window if self.fold_refs else None,
            items=loop.windows.item_sequences(
                run.session_id,
                [e.sequence for e in appended],
                [item.seq for item in appended_items if item.seq is not None],
            ),
        )
        return version, written

    def next_version(self, run: RunContext, version: int) -> int | None:
        """The version after ``version`` when this loop wrote the run's last rows at it (so
        a write needs no read of them), else ``None``."""
        known = self.memo(run).rows
        return version + 1 if known and known[-1]["version"] == version else None

    def committed(
        self,
        run: RunContext,
        rows: list[RawCheckpoint],
        events: Sequence[Event],
        item_rows: Sequence[ItemRow] = (),
        items: Sequence[ConversationItem] = (),
    ) -> None:
        """After a commit: remember the run's rows, and extend the session's window by what
        this worker just wrote (so the next seed need not read it back)."""
        self.memo(run).rows = rows
        self.loop.windows.extend(run.session_id, events, item_rows, items)


__all__ = ["RunWrites"]
