"""A deterministic stream of checkpoints: version ``v`` of a run is a pure function of ``v``.

Shared by the checkpoint tests and the worker process they SIGKILL, so the
parent can say exactly what a surviving version must contain. The stream
mixes growing turns (deltas that append), rewrites (compaction-like shrinks,
full snapshots) and top-level changes.

Run as a script (``python checkpoint_stream.py URL RUN_ID``) it claims a
lease and writes versions 1, 2, ... forever, printing each acknowledged
version on its own line.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace

from ctxengine.model import (
    AssistantMessage,
    Checkpoint,
    StateEntry,
    ToolCall,
    ToolResult,
    TrustLevel,
    UserMessage,
    WorkingState,
)
from ctxengine.runtime.checkpoints import write_checkpoint


def item(i: int) -> object:
    kind = i % 4
    if kind == 0:
        return UserMessage(f"user {i} " + "u" * 150, seq=i + 1)
    if kind == 1:
        return ToolCall(f"c{i}", "search", {"q": f"query {i}", "n": i}, seq=i + 1)
    if kind == 2:
        return ToolResult(f"c{i - 1}", f"result {i} " + "r" * 300, seq=i + 1)
    return AssistantMessage(f"answer {i}", seq=i + 1)


def trigger(version: int) -> str:
    if version % 11 == 0:
        return "compaction"
    return ("model_response", "tool_completed", "tool_failed", "approval_resolved")[version % 4]


def expected(run_id: str, version: int) -> Checkpoint:
    """What version ``version`` of the stream holds."""
    length = 4 * version
    start = 0
    if trigger(version) == "compaction" or version > 11:
        start = 4 * (version // 11) * 8  # compactions drop an old prefix for good
    start = min(start, max(0, length - 4))
    conversation = tuple(item(i) for i in range(start, length))
    return Checkpoint(
        run_id,
        version=version,
        conversation=conversation,  # type: ignore[arg-type]
        compacted_summary=None if start == 0 else f"summary through {start}",
        summary_source_event_ids=tuple(range(1, start + 1)),
        replaced_through_sequence=start,
        summary_depth=min(2, version // 11),
        working_state=WorkingState(
            objective=f"objective {version // 5}",
            constraints=(StateEntry("c-1", "never delete data", TrustLevel.USER),),
            next_action=f"step {version}",
        ),
        recall=tuple(f"recall {j}" for j in range(version % 3)),
    )


async def _stream(url: str, run_id: str) -> None:
    from ctxengine.stores import open_store

    store = await open_store(url)
    lease = await store.checkpoints.claim(run_id, "stream-writer")
    version = 0
    while True:
        version += 1
        written = await write_checkpoint(
            store,
            run_id,
            replace(expected(run_id, version), version=0),
            trigger=trigger(version),
            lease=lease,
        )
        assert written == version, (written, version)
        print(version, flush=True)


if __name__ == "__main__":
    asyncio.run(_stream(sys.argv[1], sys.argv[2]))
