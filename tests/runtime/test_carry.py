"""Session-level compaction carry (issue 13, acceptance 4; ADR 0011) on every store.

A compaction a run adopts is recorded as ``context.carry.recorded`` in its
transaction; a later run seeds from the latest carry below its seed and reads
only the items after it; a run below every carry seeds from the full log; the
same log gives the same seed in two processes, on both backends; and a carry
never shows a principal what an item hidden from them said.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.cli.turns import AGENT, POLICY_VERSION, TOOLS, ScriptedWorker
from ctxengine.core.canonical import payload_hash
from ctxengine.runtime.carry import CARRY_RECORDED, carry_visibility, stored_carry
from ctxengine.runtime.seeding import whole_pairs
from ctxengine.stores.events import Store, Visibility
from ctxengine.stores.formats import WritePolicy
from sessionkit import SMALL, session_with_carries
from storekit import StoreCase

SID = "carry-session"
DANA = ce.Principal("dana", "acme", frozenset())
ERIN = ce.Principal("erin", "acme", frozenset())
GUS = ce.Principal("gus", "globex", frozenset())


async def _new_run(worker: ScriptedWorker, session: str, text: str, run_id: str) -> ce.RunContext:
    seed = await ce.append_item(worker.store, session, ce.UserMessage(text), principal=worker_principal())
    assert seed.seq is not None
    return ce.RunContext(run_id, session, seed.seq)


def worker_principal() -> ce.Principal:
    from ctxengine.cli.turns import PRINCIPAL

    return PRINCIPAL


async def test_a_run_seeds_from_the_latest_carry_and_only_the_items_after_it(store: Store) -> None:
    worker = await session_with_carries(store, SID)
    events = await store.events.read(SID, types=[CARRY_RECORDED])
    carry = stored_carry(events[-1])
    assert events[-1].format_version == 2
    assert carry.depth_in_run >= 1 and carry.source_range[1] == carry.through
    compacted = await store.events.read(SID, types=["context.compacted"])
    assert len(compacted) == len(events)  # each adopted compaction is carried
    run = await _new_run(worker, SID, "next question", "carry-run")
    seeded = await worker.loop._build_seed(run, worker_principal())
    assert seeded.compacted_summary == carry.summary
    assert seeded.summary_source_event_ids == (carry.sequence,)
    assert seeded.summary_elided == carry.elided
    assert (seeded.replaced_through_sequence, seeded.summary_depth) == (carry.through, 0)
    assert all(item.seq is not None and item.seq > carry.through for item in seeded.conversation)
    # Exactly the items after the carried point (whole pairs, no reasoning).
    expected = [i for i in await ce.session_history(store, SID, run.seed_sequence) if i.seq > carry.through]
    assert seeded.conversation == (*whole_pairs(expected), seeded.conversation[-1])


async def test_a_run_below_every_carry_seeds_from_the_full_log(store: Store) -> None:
    worker = await session_with_carries(store, SID)
    first = (await store.events.read(SID, types=[CARRY_RECORDED]))[0]
    users = [i for i in await ce.session_history(store, SID, first.sequence) if isinstance(i, ce.UserMessage)]
    seed = users[-1]
    assert seed.seq is not None
    run = ce.RunContext("replay", SID, seed.seq)
    seeded = await worker.loop._build_seed(run, worker_principal())
    assert seeded.compacted_summary is None and seeded.replaced_through_sequence == 0
    history = await ce.session_history(store, SID, seed.seq)
    assert seeded.conversation == (*whole_pairs(history), seed)


async def test_a_deployment_that_does_not_write_format_2_records_no_carry(store_case: StoreCase) -> None:
    if store_case.kind == "memory":
        store: Store = ce.MemoryStore(write_policy=WritePolicy(max_version=1))
    else:
        store = await ce.open_store(store_case.url, write_policy=WritePolicy(max_version=1))
    try:
        worker = ScriptedWorker(store, model=SMALL)
        for turn in range(1, 41):
            await worker.turn(SID, turn)
        assert await store.events.read(SID, types=["context.compacted"])
        assert await store.events.read(SID, types=[CARRY_RECORDED]) == []
        rows = await store.checkpoints.latest_raw(f"{SID}-run-40")
        assert {r["payload"]["format"] for r in rows} == {"checkpoint.full/1"}
    finally:
        await store.close()


SEEDER = """
import asyncio, json, sys
import ctxengine as ce
from ctxengine.cli.turns import ScriptedWorker
from sessionkit import SMALL

url, session, run_id, seed, backend, mode = sys.argv[1:7]

async def main() -> None:
    ce.use_backend(backend)
    store = await ce.open_store(url)
    worker = ScriptedWorker(store, model=SMALL)
    await worker.planner.current(session)
    run = ce.RunContext(run_id, session, int(seed))
    principal = ce.Principal("alice", "acme", frozenset({"search"}))
    if mode == "write":
        lease = await store.checkpoints.claim(run_id, "seeder")
        cp = await worker.loop._seed_checkpoint(run, principal, lease=lease)
        stored = await ce.latest_checkpoint(store, run_id)
        assert stored == cp
    else:
        cp = await worker.loop._build_seed(run, principal)
    print(json.dumps({"sha": ce.payload_hash(cp.to_dict()), "summary": cp.compacted_summary is not None}))
    await store.close()

asyncio.run(main())
"""


def _seed_in_process(
    url: str, session: str, run_id: str, seed: int, backend: str, mode: str
) -> dict[str, object]:
    env = dict(os.environ)
    here = Path(__file__).resolve().parent.parent  # tests/: sessionkit
    package = str(Path(next(iter(ce.__path__))).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package, str(here), env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", SEEDER, url, session, run_id, str(seed), backend, mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_the_same_run_seeds_to_the_same_checkpoint_in_two_processes(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    case = store_case_factory(kind)
    store = await case.open()
    try:
        worker = await session_with_carries(store, SID)
        run = await _new_run(worker, SID, "what did we decide?", "twice")
        local = await worker.loop._build_seed(run, worker_principal())
        assert local.compacted_summary is not None  # seeded from a carry
    finally:
        await case.close_all()
    written = _seed_in_process(case.url, SID, "twice", run.seed_sequence, "rust", "write")
    again = _seed_in_process(case.url, SID, "twice", run.seed_sequence, "rust", "read")
    reference = _seed_in_process(case.url, SID, "twice", run.seed_sequence, "python", "read")
    assert written == again == reference == {"sha": payload_hash(local.to_dict()), "summary": True}


def test_carry_visibility_is_the_narrowest_exact_class() -> None:
    session, acme, globex = Visibility.session(), Visibility.tenant("acme"), Visibility.tenant("globex")
    mine = Visibility.principal("dana")
    assert carry_visibility([session], None, DANA) == session
    assert carry_visibility([session, acme], None, DANA) == acme
    assert carry_visibility([session], acme, DANA) == acme
    assert carry_visibility([session, globex], None, DANA) == mine  # a tenant the writer cannot see
    assert carry_visibility([session, mine], None, DANA) == mine
    assert carry_visibility([acme, globex], None, DANA) == mine
    assert carry_visibility([session, acme], None, None) == acme
    assert carry_visibility([session, mine], None, None) is None  # no class is exact for everyone
    assert carry_visibility([session], mine, DANA) == mine


VISIBILITIES = {
    "session": Visibility.session(),
    "acme": Visibility.tenant("acme"),
    "globex": Visibility.tenant("globex"),
    "dana": Visibility.principal("dana"),
    "erin": Visibility.principal("erin"),
}


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    scopes=st.lists(st.sampled_from(sorted(VISIBILITIES)), min_size=50, max_size=80),
    writer=st.sampled_from([DANA, ERIN, GUS, None]),
)
async def test_a_carry_never_shows_a_principal_what_an_item_hidden_from_them_said(
    scopes: list[str], writer: ce.Principal | None
) -> None:
    store = ce.MemoryStore()
    session = "secrets"
    worker = ScriptedWorker(store, model=SMALL)
    await worker.planner.plan(session, AGENT, DANA, SMALL, TOOLS, policy_version=POLICY_VERSION)
    secrets: dict[str, str] = {}
    scope_of: dict[int, str] = {}
    for i, scope in enumerate(scopes):
        # User messages are trusted text: compaction quotes them in the summary.
        secret = f"secret-{i:03d}-{scope}"
        secrets[secret] = scope
        filler = " lorem ipsum dolor" * 80
        for item in (ce.UserMessage(secret + filler), ce.AssistantMessage("ok")):
            logged = await ce.append_item(store, session, item, visibility=VISIBILITIES[scope])
            assert logged.seq is not None
            scope_of[logged.seq] = scope
    # The writer's run compacts (and records a carry when a class is exact).
    seed = await ce.append_item(store, session, ce.UserMessage("summarize"))
    assert seed.seq is not None
    run = ce.RunContext("writer-run", session, seed.seq)
    lease = await store.checkpoints.claim(run.run_id, "w")
    cp = await worker.loop._seed_checkpoint(run, writer, lease=lease)
    _, cp = await worker.loop.build_with_pressure(run, cp, AGENT, writer or DANA, lease=lease)
    seen = sum(1 for s in scopes if writer is None or VISIBILITIES[s].allows(writer))
    if seen >= 30:
        assert cp.summary_depth >= 1  # the writer's run compacted
    carries = await store.events.read(session, types=[CARRY_RECORDED])
    # A carry is recorded exactly when a class is exact for every reader of what it replaced.
    replaced = {VISIBILITIES[s] for seq, s in scope_of.items() if seq <= cp.replaced_through_sequence}
    recorded = carry_visibility(replaced, None, writer)
    assert len(carries) == (recorded is not None) * cp.summary_depth
    if carries:
        assert carries[-1].visibility == recorded
    # Every reader's next run: nothing hidden from them reaches their context.
    last = await ce.append_item(store, session, ce.UserMessage("and now?"))
    assert last.seq is not None
    for reader in (DANA, ERIN, GUS):
        reading = ce.RunContext(f"read-{reader.principal_id}", session, last.seq)
        seeded = await worker.loop._build_seed(reading, reader)
        text = (seeded.compacted_summary or "") + json.dumps([i.to_dict() for i in seeded.conversation])
        for secret, scope in secrets.items():
            if not VISIBILITIES[scope].allows(reader):
                assert secret not in text, (reader.principal_id, secret)
        if seeded.compacted_summary is not None:
            [used] = [e for e in carries if e.sequence in seeded.summary_source_event_ids]
            assert used.visibility.allows(reader)
