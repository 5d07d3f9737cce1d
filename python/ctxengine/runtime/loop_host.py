"""What the parts of ``ContextLoop`` (``RunStarts``, ``StepWrites``) share: the loop's state
and the helpers every write block uses."""

from __future__ import annotations

from collections.abc import Sequence

from ..assembly.builder import ContextBuilder
from ..core.estimator import Estimator
from ..model import Checkpoint, ConversationItem, RunContext
from ..plan import ContextPlan, ContextPlanner
from ..stores.events import Event, ItemRow, Lease, RawCheckpoint, Store
from .checkpoints import write_checkpoint
from .commits import Commits
from .window import RunMemo
from .windows import Windows
from .working_state import WorkingStateManager


class LoopHost:
    """The loop's state, as its parts see it, and what they share: the plan lookup, the
    checkpoint write inside a caller's transaction, and the bookkeeping after a commit."""

    store: Store
    planner: ContextPlanner
    builder: ContextBuilder
    estimator: Estimator
    working_state: WorkingStateManager
    windows: Windows
    commits: Commits
    prune_finished: bool
    #: Fold a reference write from the window's last one (off: every write from scratch).
    _fold_refs: bool

    def _memo(self, run: RunContext) -> RunMemo:
        """What the run's session window keeps of the run."""
        return self.windows.window(run.session_id).run(run.run_id)

    async def _plan_or_none(self, session_id: str) -> ContextPlan | None:
        return self.planner.cached(session_id) or await self.planner.current(session_id)

    async def _write(
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
        window = self.windows.window(run.session_id)
        memo = window.run(run.run_id)
        if rows is None:
            known = memo.rows
            if known and known[-1]["version"] == checkpoint.version:
                rows = known  # what this loop wrote last: the store refuses it if stale
        written: list[RawCheckpoint] = []
        version = await write_checkpoint(
            self.store,
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
            memo=window if self._fold_refs else None,
            items=self.windows.item_sequences(
                run.session_id,
                [e.sequence for e in appended],
                [item.seq for item in appended_items if item.seq is not None],
            ),
        )
        return version, written

    def _next_version(self, run: RunContext, version: int) -> int | None:
        """The version after ``version`` when this loop wrote the run's last rows at it (so
        a write needs no read of them), else ``None``."""
        known = self._memo(run).rows
        return version + 1 if known and known[-1]["version"] == version else None

    def _committed(
        self,
        run: RunContext,
        rows: list[RawCheckpoint],
        events: Sequence[Event],
        item_rows: Sequence[ItemRow] = (),
        items: Sequence[ConversationItem] = (),
    ) -> None:
        """After a commit: remember the run's rows, and extend the session's window by what
        this worker just wrote (so the next seed need not read it back)."""
        self._memo(run).rows = rows
        self.windows.extend(run.session_id, events, item_rows, items)


__all__ = ["LoopHost"]
