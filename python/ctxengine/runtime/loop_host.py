"""What the parts of ``ContextLoop`` (``RunStarts``, ``StepWrites``) share: the loop's state
and the helpers every write block uses."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from ..assembly.builder import ContextBuilder
from ..core.estimator import Estimator
from ..model import Checkpoint, ConversationItem, Principal, RunContext
from ..plan import ContextPlan, ContextPlanner
from ..stores.events import Event, ItemRow, Lease, RawCheckpoint, Store
from .carry import Carry, CarryCache
from .checkpoint_memo import RefMemo
from .checkpoints import write_checkpoint
from .commits import Commits
from .history_reader import HistoryReader
from .recent import remember
from .seed_digest import SeedDigest
from .working_state import WorkingStateManager

#: Runs whose seed the loop remembers (their own carries need its lineage and view).
SEEDS_REMEMBERED = 4096


class LoopHost:
    """The loop's state, as its parts see it, and what they share: the plan lookup, the
    checkpoint write inside a caller's transaction, and the bookkeeping after a commit."""

    store: Store
    planner: ContextPlanner
    builder: ContextBuilder
    estimator: Estimator
    working_state: WorkingStateManager
    history: HistoryReader
    commits: Commits
    prune_finished: bool
    _carries: CarryCache
    _seed_digest: SeedDigest
    _seeded_from: OrderedDict[str, tuple[Carry | None, Principal | None]]
    _pending_counts: OrderedDict[str, list[tuple[int, int]]]
    _rows: OrderedDict[str, list[RawCheckpoint]]
    _refs: RefMemo

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
        if rows is None:
            known = self._rows.get(run.run_id)
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
            carry=self._seeded_from.get(run.run_id, (None, None))[0],
            memo=self._refs,
            items=self.history.item_sequences(
                run.session_id,
                [e.sequence for e in appended],
                [item.seq for item in appended_items if item.seq is not None],
            ),
        )
        return version, written

    def _next_version(self, run_id: str, version: int) -> int | None:
        """The version after ``version`` when this loop wrote the run's last rows at it (so
        a write needs no read of them), else ``None``."""
        known = self._rows.get(run_id)
        return version + 1 if known and known[-1]["version"] == version else None

    def _committed(
        self,
        run: RunContext,
        rows: list[RawCheckpoint],
        events: Sequence[Event],
        item_rows: Sequence[ItemRow] = (),
        items: Sequence[ConversationItem] = (),
    ) -> None:
        """After a commit: remember the run's rows, and hand the history reader what this
        worker just wrote (so the next seed need not read it back)."""
        remember(self._rows, run.run_id, rows, SEEDS_REMEMBERED)
        if events:
            self.history.extend(run.session_id, [e.sequence for e in events], item_rows, items)
            self.history.marks.committed(run.session_id, events)


__all__ = ["SEEDS_REMEMBERED", "LoopHost"]
