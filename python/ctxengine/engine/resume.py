"""A run found again from its id alone (issue 41): its session, seed, next step and latest
checkpoint, all read from the store, for a worker that never saw the run.

- The session: a reference checkpoint (format version 3, what the loop writes) names it.
- The seed: the run's ``run.checkpoint.seeded`` event (``start_run``, ``pick_up``).
- The next step: one past the greatest step in the run's event keys
  (``conversation.item:{run}:{step}:{i}``, ``context.working_state:{run}:{step}:{i}``), so a
  resumed run never reuses a step number another worker recorded.
- The checkpoint: the latest version, read after the new lease is claimed (every older
  lease is fenced from then on).

Nothing new is stored to make this possible.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RunNotFound
from ..model import Checkpoint, RunContext, ToolCall, ToolResult
from ..runtime.checkpoints import checkpoint_from_rows, is_ref_chain
from ..runtime.loop import CHECKPOINT_SEEDED
from ..runtime.session import ITEM_APPENDED
from ..runtime.working_state import WORKING_STATE_UPDATED
from ..stores.events import Lease, Store

#: The prefixes of the keys a step's events carry (``runtime/steps.py``).
_STEP_KEYS = ("conversation.item:", "context.working_state:")


@dataclass(frozen=True, slots=True)
class FoundRun:
    """A run picked up again: the run at its next step, the new lease, the latest checkpoint
    and the trigger it was written with."""

    run: RunContext
    lease: Lease
    checkpoint: Checkpoint
    trigger: str


async def find_run(store: Store, run_id: str, owner: str, *, session_id: str | None = None) -> FoundRun:
    """Claim ``run_id`` for ``owner`` and read where it stands (``RunNotFound`` when the store
    holds no run of that id that ``start_run`` or ``pick_up`` began)."""
    rows = await store.checkpoints.latest_raw(run_id)
    if not rows:
        raise RunNotFound(run_id, "the store holds no checkpoint of it")
    if is_ref_chain(rows):
        named = rows[0]["payload"].get("session_id")
        session_id = named if isinstance(named, str) else session_id
    if session_id is None:
        raise RunNotFound(
            run_id,
            "its checkpoints were written below format 3 and do not name the session: pass session_id=",
        )
    seeded = [
        e for e in await store.events.read(session_id, types=(CHECKPOINT_SEEDED,)) if e.run_id == run_id
    ]
    if not seeded:
        raise RunNotFound(run_id, f"session {session_id!r} holds no {CHECKPOINT_SEEDED} event of it")
    seed = seeded[0]
    step = -1
    for event in await store.events.read(session_id, seed.sequence, (ITEM_APPENDED, WORKING_STATE_UPDATED)):
        if event.run_id != run_id:
            continue
        for prefix in _STEP_KEYS:
            head = f"{prefix}{run_id}:"
            if event.derivation_key.startswith(head):
                step = max(step, int(event.derivation_key[len(head) :].split(":")[0]))
    run = RunContext(run_id, session_id, int(seed.payload["seed_sequence"]), step=step + 1)
    lease = await store.checkpoints.claim(run_id, owner)
    rows = await store.checkpoints.latest_raw(run_id)  # what the lease now fences
    checkpoint = await checkpoint_from_rows(store, run_id, rows)
    if checkpoint is None:  # pragma: no cover - rows were there before the claim
        raise RunNotFound(run_id, "its checkpoints went away while it was claimed")
    return FoundRun(run, lease, checkpoint, rows[-1]["trigger"])


def open_calls(checkpoint: Checkpoint, after: int) -> tuple[ToolCall, ...]:
    """The tool calls logged after sequence ``after`` that no result answers, in order."""
    answered = {i.call_id for i in checkpoint.conversation if isinstance(i, ToolResult)}
    return tuple(
        i
        for i in checkpoint.conversation
        if isinstance(i, ToolCall) and (i.seq is None or i.seq > after) and i.call_id not in answered
    )


__all__ = ["FoundRun", "find_run", "open_calls"]
