"""Sessions with compaction carries, built by the scripted worker of ``ctxengine.cli.turns``."""

from __future__ import annotations

from ctxengine.cli.turns import ScriptedWorker
from ctxengine.model import ResolvedModel
from ctxengine.runtime.carry import CARRY_RECORDED
from ctxengine.stores.events import Store

#: A window small enough that a few dozen turns compact (the history floor still fits).
SMALL = ResolvedModel("bench", "model-16k", 16_000, 2_048, 2_048)


async def session_with_carries(
    store: Store, session_id: str, *, turns: int = 45, carries: int = 1
) -> ScriptedWorker:
    """Take turns until the session holds at least ``carries`` carries (and ``turns`` turns)."""
    worker = ScriptedWorker(store, model=SMALL)
    turn = 0
    while True:
        turn += 1
        await worker.turn(session_id, turn)
        if turn >= turns and len(await store.events.read(session_id, types=[CARRY_RECORDED])) >= carries:
            return worker
        assert turn < 400, "no compaction carry after 400 turns"
