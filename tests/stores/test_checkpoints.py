"""The typed checkpoint layer (issue 5, acceptance 4) on every store: the full/delta rule,
chains of at most 7 deltas, materialization, fencing, corruption, and SIGKILL."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from checkpoint_stream import expected, trigger
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine
from ctxengine.core.canonical import canonical_json
from ctxengine.errors import LeaseLost, ModelValidationError, StoreCorruption
from ctxengine.model import Checkpoint, UserMessage
from ctxengine.runtime.checkpoints import (
    DELTA_FORMAT,
    FULL_FORMAT,
    diff,
    is_full,
    latest_checkpoint,
    materialize,
    write_checkpoint,
)
from ctxengine.stores.events import Store
from storekit import StoreCase

RUN = "run-1"


async def _kinds(store: Store, run_id: str = RUN) -> list[tuple[int, str, str]]:
    return [(r["version"], r["kind"], r["trigger"]) for r in await store.checkpoints.latest_raw(run_id)]


def test_full_or_delta_rule() -> None:
    assert [v for v in range(1, 30) if is_full(v, "model_response")] == [1, 9, 17, 25]
    for trig in ("compaction", "approval_requested", "final_completion", "final_failure"):
        assert is_full(5, trig)
    for trig in ("model_response", "tool_completed", "tool_failed", "approval_resolved"):
        assert not is_full(5, trig)


async def test_every_version_materializes_exactly(store: Store) -> None:
    lease = await store.checkpoints.claim(RUN, "w")
    assert await latest_checkpoint(store, RUN) is None
    longest_chain = 0
    for version in range(1, 40):
        cp = expected(RUN, version)
        assert (
            await write_checkpoint(store, RUN, replace(cp, version=99), trigger=trigger(version), lease=lease)
            == version
        )
        rows = await _kinds(store)
        # The newest row is full exactly when the rule says so, and no chain exceeds 7 deltas.
        assert rows[-1] == (
            version,
            "full" if is_full(version, trigger(version)) else "delta",
            trigger(version),
        )
        assert rows[0][1] == "full" and all(kind == "delta" for _, kind, _ in rows[1:])
        longest_chain = max(longest_chain, len(rows) - 1)
        assert await latest_checkpoint(store, RUN) == cp
    assert longest_chain == 7


async def test_delta_payload_shape(store: Store) -> None:
    lease = await store.checkpoints.claim(RUN, "w")
    base = Checkpoint(RUN, conversation=(UserMessage("a", seq=1), UserMessage("b", seq=2)))
    await write_checkpoint(store, RUN, base, trigger="model_response", lease=lease)
    grown = replace(base, conversation=(*base.conversation, UserMessage("c", seq=3)), recall=("r",))
    await write_checkpoint(store, RUN, grown, trigger="tool_completed", lease=lease)
    rows = await store.checkpoints.latest_raw(RUN)
    assert rows[0]["payload"]["format"] == FULL_FORMAT
    assert rows[1]["payload"] == {
        "format": DELTA_FORMAT,
        "base_version": 1,
        "set": {"version": 2, "recall": ["r"]},
        "conversation": {"keep": 2, "append": [UserMessage("c", seq=3).to_dict()]},
    }


async def test_stale_lease_changes_nothing(store: Store) -> None:
    stale = await store.checkpoints.claim(RUN, "worker-a")
    await write_checkpoint(store, RUN, expected(RUN, 1), trigger="model_response", lease=stale)
    fresh = await store.checkpoints.claim(RUN, "worker-b")
    before = await store.checkpoints.latest_raw(RUN)
    for version, trig in ((2, "model_response"), (2, "compaction")):  # a delta and a full write
        with pytest.raises(LeaseLost, match="fenced"):
            await write_checkpoint(store, RUN, expected(RUN, version), trigger=trig, lease=stale)
    assert await store.checkpoints.latest_raw(RUN) == before
    assert await latest_checkpoint(store, RUN) == expected(RUN, 1)
    assert await write_checkpoint(store, RUN, expected(RUN, 2), trigger="model_response", lease=fresh) == 2


async def test_bad_writes_are_typed(store: Store) -> None:
    lease = await store.checkpoints.claim(RUN, "w")
    with pytest.raises(ModelValidationError, match="checkpoint is for 'other'"):
        await write_checkpoint(store, RUN, Checkpoint("other"), trigger="model_response", lease=lease)
    with pytest.raises(ModelValidationError, match="trigger"):
        await write_checkpoint(store, RUN, Checkpoint(RUN), trigger="lunch", lease=lease)
    assert await store.checkpoints.latest_raw(RUN) == []


CORRUPTIONS: list[tuple[str, str, str]] = [
    # (where, SQL setting the payload of version 3, expected message)
    (
        "keep past the base",
        '{"format":"checkpoint.delta/1","base_version":2,"set":{"version":3},'
        '"conversation":{"keep":9999,"append":[]}}',
        "keeps 9999",
    ),
    (
        "wrong base",
        '{"format":"checkpoint.delta/1","base_version":1,"set":{"version":3},'
        '"conversation":{"keep":0,"append":[]}}',
        "delta base 1 is not 2",
    ),
    ("unknown format", '{"format":"checkpoint.delta/9"}', "expected a delta"),
    (
        "undecodable item",
        '{"format":"checkpoint.delta/1","base_version":2,"set":{"version":3},'
        '"conversation":{"keep":0,"append":[{"type":"alien"}]}}',
        "does not decode",
    ),
    (
        "version mismatch",
        '{"format":"checkpoint.delta/1","base_version":2,"set":{"version":7},'
        '"conversation":{"keep":0,"append":[]}}',
        "holds checkpoint version 7",
    ),
    # Stored payloads are canonical JSON text; any other spelling was not written by a store.
    ("non-canonical text", '{ "format": "checkpoint.full/1" }', "not in canonical form"),
]


@pytest.mark.parametrize(("case", "payload", "message"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
async def test_a_corrupt_chain_is_store_corruption(
    store_case: StoreCase, store: Store, case: str, payload: str, message: str
) -> None:
    lease = await store.checkpoints.claim(RUN, "w")
    for version in (1, 2, 3):
        await write_checkpoint(store, RUN, expected(RUN, version), trigger="model_response", lease=lease)
    if case != "non-canonical text":  # the chain checks see what a store would have written
        payload = canonical_json(json.loads(payload)).decode("utf-8")
    if store_case.kind == "memory":
        rows = store._checkpoints[RUN]  # type: ignore[attr-defined]
        rows[2] = (*rows[2][:3], payload, *rows[2][4:])
    else:
        store_case.raw_execute(
            "UPDATE ctxengine_checkpoints SET payload = ? WHERE run_id = ? AND version = 3", (payload, RUN)
        )
    with pytest.raises(StoreCorruption, match=message) as info:
        await latest_checkpoint(store, RUN)
    assert RUN in str(info.value) and info.value.sequence == 3


async def test_a_missing_middle_row_is_store_corruption(store_case: StoreCase, store: Store) -> None:
    lease = await store.checkpoints.claim(RUN, "w")
    for version in (1, 2, 3):
        await write_checkpoint(store, RUN, expected(RUN, version), trigger="model_response", lease=lease)
    if store_case.kind == "memory":
        del store._checkpoints[RUN][1]  # type: ignore[attr-defined]
    else:
        store_case.raw_execute("DELETE FROM ctxengine_checkpoints WHERE run_id = ? AND version = 2", (RUN,))
    with pytest.raises(StoreCorruption, match="delta base 2 is not 1"):
        await latest_checkpoint(store, RUN)


# -- the delta format, property-tested ------------------------------------------------------

conversations = st.lists(st.integers(0, 60), max_size=12).map(
    lambda ids: tuple(UserMessage(f"m{i}", seq=n + 1) for n, i in enumerate(ids))
)
checkpoints = st.builds(
    lambda conv, summary, recall, depth, notes: Checkpoint(
        RUN, conversation=conv, compacted_summary=summary, recall=recall, summary_depth=depth, notes=notes
    ),
    conversations,
    st.one_of(st.none(), st.text(max_size=5)),
    st.lists(st.text(max_size=3), max_size=2).map(tuple),
    st.integers(0, 2),
    # Notes come and go: a delta must clear them (to_dict leaves empty notes out).
    st.lists(st.text(max_size=3), max_size=2).map(tuple),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain=st.lists(checkpoints, min_size=1, max_size=8))
def test_any_chain_of_deltas_materializes_each_version(chain: list[Checkpoint]) -> None:
    dicts = [replace(cp, version=v).to_dict() for v, cp in enumerate(chain, start=1)]
    rows: list[Any] = [
        {"version": 1, "kind": "full", "payload": {"format": FULL_FORMAT, "checkpoint": dicts[0]}}
    ]
    for previous, new in pairwise(dicts):
        rows.append({"version": new["version"], "kind": "delta", "payload": diff(previous, new)})
    for n in range(1, len(rows) + 1):
        assert materialize(RUN, rows[:n]) == dicts[n - 1]


# -- SIGKILL in the middle of a stream of writes ----------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(next(iter(ctxengine.__path__))).parent)
    here = str(Path(__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, here, env.get("PYTHONPATH")) if p)
    return env


async def _kill_mid_stream(case: StoreCase, run_id: str, acks_before_kill: int) -> tuple[int, int]:
    """Start a writer, SIGKILL it after ``acks_before_kill`` acknowledged versions (plus a
    random few milliseconds), then return (last acknowledged, latest stored) versions."""
    script = str(Path(__file__).parent / "checkpoint_stream.py")
    proc = subprocess.Popen(
        [sys.executable, script, case.url, run_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
    )
    assert proc.stdout is not None
    acked = 0
    try:
        while acked < acks_before_kill:
            line = await asyncio.to_thread(proc.stdout.readline)
            if not line:
                raise AssertionError(
                    f"writer died early: {proc.stderr.read().decode() if proc.stderr else ''}"
                )
            acked = int(line)
        time.sleep(random.uniform(0, 0.03))
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    for line in rest.decode().split():
        acked = int(line)
    store = await case.open()
    try:
        latest = await latest_checkpoint(store, run_id)
    finally:
        await case.close_all()
    assert latest is not None
    # A complete version: exactly what the writer wrote for that version, no torn rows.
    assert latest == expected(run_id, latest.version)
    return acked, latest.version


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_sigkill_mid_stream_leaves_a_complete_version(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    case = store_case_factory(kind)
    await (await case.open()).close()  # create the schema before the writer starts
    await case.close_all()
    for attempt, acks in enumerate((5, 12, 23)):
        acked, latest = await _kill_mid_stream(case, f"killed-{attempt}", acks)
        # Every acknowledged version survived; at most the one in flight committed after it.
        assert acked <= latest <= acked + 1, (acked, latest)
