"""A warm worker's seeds do per-turn work only on what is new (issue 13, acceptance 2; ADR 0011).

``SeedEvents`` answers "the latest carry and working-state event below this
seed" from the previous seed's answer plus one typed read of the range
between them, and ``SeedDigest`` continues the seeded checkpoint's hash from
the previous seed's conversation. Both must give exactly what the precise
reads and the whole-dict hash give, on every store, through compactions,
working-state updates and readers who see different events.
"""

from __future__ import annotations

from sessionkit import SMALL

import ctxengine as ce
from ctxengine.cli.turns import PRINCIPAL, ScriptedWorker
from ctxengine.core.canonical import payload_hash
from ctxengine.runtime.carry import CARRY_RECORDED
from ctxengine.runtime.loop import CHECKPOINT_SEEDED
from ctxengine.runtime.seed_digest import SeedDigest
from ctxengine.runtime.seed_events import SeedEvents
from ctxengine.runtime.working_state import WORKING_STATE_UPDATED
from ctxengine.stores.events import Store

SID = "increments"
GUS = ce.Principal("gus", "globex", frozenset())


async def _turns_with_state(store: Store, turns: int) -> ScriptedWorker:
    """Scripted turns; every fifth, a principal-scoped working-state update in its own run."""
    worker = ScriptedWorker(store, model=SMALL)
    for turn in range(1, turns + 1):
        await worker.turn(SID, turn)
        if turn % 5 == 0:
            run, lease, checkpoint = await worker.loop.start_run(
                SID, f"state-{turn}", ce.UserMessage(f"note {turn}"), PRINCIPAL, owner="t"
            )
            await worker.loop.update_working_state(
                run,
                checkpoint,
                {"objective": f"goal {turn}"},
                source="user",
                lease=lease,
                principal=PRINCIPAL,
            )
    return worker


async def test_seed_events_match_the_precise_reads_at_every_seed(store: Store) -> None:
    await _turns_with_state(store, 50)
    assert await store.events.read(SID, types=[CARRY_RECORDED])
    seeds = [e.sequence for e in await store.events.read(SID, types=["conversation.item.appended"])]
    marks = SeedEvents(store)
    for principal in (PRINCIPAL, GUS):
        for before in seeds[::3]:
            carry, state = await marks.latest(SID, before, principal)
            want_carry = await store.events.latest_before(SID, before, CARRY_RECORDED, principal)
            want_state = await store.events.latest_before(SID, before, WORKING_STATE_UPDATED, principal)
            assert carry == want_carry and state == want_state, (principal.principal_id, before)
    # Warm: one read per later seed (the first seed of each reader reads precisely, twice).
    assert marks.reads == 2 * 2 + 2 * (len(seeds[::3]) - 1)
    # A seed below the remembered one is answered precisely, and forget drops the session.
    reads = marks.reads
    assert await marks.latest(SID, seeds[3], PRINCIPAL) == (
        await store.events.latest_before(SID, seeds[3], CARRY_RECORDED, PRINCIPAL),
        await store.events.latest_before(SID, seeds[3], WORKING_STATE_UPDATED, PRINCIPAL),
    )
    assert marks.reads == reads + 2
    marks.forget(SID)
    await marks.latest(SID, seeds[-1], PRINCIPAL)
    assert marks.reads == reads + 4


async def test_a_warm_workers_seeds_carry_the_state_and_carry_a_fresh_worker_finds(store: Store) -> None:
    worker = await _turns_with_state(store, 40)
    seed = await ce.append_item(store, SID, ce.UserMessage("last"), principal=PRINCIPAL)
    assert seed.seq is not None
    run = ce.RunContext("last-run", SID, seed.seq)
    fresh = ScriptedWorker(store, model=SMALL)
    for principal in (PRINCIPAL, GUS, None):
        assert await worker.loop.build_seed(run, principal) == await fresh.loop.build_seed(run, principal)


async def test_the_continued_seed_hash_is_the_hash_of_the_seeded_checkpoint(store: Store) -> None:
    worker = await _turns_with_state(store, 45)
    assert worker.loop._seed_digest.continued > 10
    fresh = ScriptedWorker(store, model=SMALL)
    for event in await store.events.read(SID, types=[CHECKPOINT_SEEDED]):
        run_id = event.payload["run_id"]
        run = ce.RunContext(run_id, SID, event.payload["seed_sequence"])
        built = await fresh.loop.build_seed(run, PRINCIPAL)
        assert event.payload["checkpoint_sha256"] == payload_hash(built.to_dict()), run_id


def test_seed_digest_falls_back_to_the_whole_hash_when_the_conversation_changed() -> None:
    digest = SeedDigest()
    items = tuple(ce.UserMessage(f"m{i}", seq=i + 1) for i in range(5))
    shell = ce.Checkpoint("r").to_dict()
    del shell["conversation"]
    for conversation, summary in (
        (items[:3], None),
        (items, None),  # continued
        (items[1:], None),  # the start moved (a compaction): from the beginning
        ((*items[1:], ce.UserMessage("x", seq=9)), None),  # continued
        (items, "a summary"),  # the head changed: from the beginning
        ((ce.UserMessage("m0", seq=1), *items[1:]), "a summary"),  # equal but other objects
    ):
        head = {**shell, "compacted_summary": summary}
        want = payload_hash({**head, "conversation": list(conversation)})
        assert digest.digest("s", head, conversation) == want
    assert digest.continued == 2
