"""A warm worker's seeds do per-turn work only on what is new (issue 13, acceptance 2; ADR 0011).

The session window (``Windows.marks``) answers "the latest carry and
working-state event below this seed" from the previous seed's answer plus one
typed read of the range between them, and continues the seeded checkpoint's
hash from the previous seed's conversation (``SessionWindow.seed_digest``).
Both must give exactly what the precise reads and the whole-dict hash give, on
every store, through compactions, working-state updates and readers who see different events.
"""

from __future__ import annotations

import pytest

import ctxengine as ce
from ctxengine.cli.turns import PRINCIPAL, ScriptedWorker
from ctxengine.core.canonical import payload_hash
from ctxengine.errors import StoreCorruption
from ctxengine.runtime.carry import CARRY_RECORDED
from ctxengine.runtime.checkpoints import evolve
from ctxengine.runtime.loop import CHECKPOINT_SEEDED
from ctxengine.runtime.window import SessionWindow, checkpoint_shell
from ctxengine.runtime.windows import Windows
from ctxengine.runtime.working_state import WORKING_STATE_UPDATED
from ctxengine.stores.events import Store
from sessionkit import SMALL
from storekit import StoreCase

SID = "increments"
GUS = ce.Principal("gus", "globex", frozenset())


async def _turns_with_state(
    store: Store, turns: int, *, first: int = 1, worker: ScriptedWorker | None = None
) -> ScriptedWorker:
    """Scripted turns; every fifth, a principal-scoped working-state update in its own run."""
    worker = worker if worker is not None else ScriptedWorker(store, model=SMALL)
    for turn in range(first, turns + 1):
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
    marks = Windows(store)
    for principal in (PRINCIPAL, GUS):
        for before in seeds[::3]:
            carry, state = await marks.marks(SID, before, principal)
            want_carry = await store.events.latest_before(SID, before, CARRY_RECORDED, principal)
            want_state = await store.events.latest_before(SID, before, WORKING_STATE_UPDATED, principal)
            assert carry == want_carry and state == want_state, (principal.principal_id, before)
    # Warm: one read per later seed (the first seed of each reader reads precisely, twice).
    assert marks.mark_reads == 2 * 2 + 2 * (len(seeds[::3]) - 1)
    # A seed below the remembered one is answered precisely, and forget drops the session.
    reads = marks.mark_reads
    assert await marks.marks(SID, seeds[3], PRINCIPAL) == (
        await store.events.latest_before(SID, seeds[3], CARRY_RECORDED, PRINCIPAL),
        await store.events.latest_before(SID, seeds[3], WORKING_STATE_UPDATED, PRINCIPAL),
    )
    assert marks.mark_reads == reads + 2
    marks.forget(SID)
    await marks.marks(SID, seeds[-1], PRINCIPAL)
    assert marks.mark_reads == reads + 4


async def test_a_worker_that_wrote_the_range_itself_seeds_without_reading_it(store: Store) -> None:
    worker = await _turns_with_state(store, 30)
    marks = worker.loop.windows
    carries = len(await store.events.read(SID, types=[CARRY_RECORDED]))
    reads = marks.mark_reads
    await _turns_with_state(store, 50, first=31, worker=worker)
    assert len(await store.events.read(SID, types=[CARRY_RECORDED])) > carries  # it carried meanwhile
    assert marks.mark_reads == reads  # every event since its last seed was its own
    # Another worker's working-state update breaks the run: the next seed reads, and sees it.
    other = ScriptedWorker(store, model=SMALL)
    run, lease, checkpoint = await other.loop.start_run(
        SID, "other", ce.UserMessage("x"), PRINCIPAL, owner="o"
    )
    await other.loop.update_working_state(
        run, checkpoint, {"objective": "the other worker's"}, source="user", lease=lease, principal=PRINCIPAL
    )
    run, _, seeded = await worker.loop.start_run(SID, "after", ce.UserMessage("y"), PRINCIPAL, owner="w")
    assert marks.mark_reads == reads + 1
    assert "the other worker's" in str(seeded.working_state.to_dict())
    fresh = ScriptedWorker(store, model=SMALL)
    assert seeded == evolve(await fresh.loop._build_seed(run, PRINCIPAL), version=seeded.version)


async def test_a_warm_workers_seeds_carry_the_state_and_carry_a_fresh_worker_finds(store: Store) -> None:
    worker = await _turns_with_state(store, 40)
    seed = await ce.append_item(store, SID, ce.UserMessage("last"), principal=PRINCIPAL)
    assert seed.seq is not None
    run = ce.RunContext("last-run", SID, seed.seq)
    fresh = ScriptedWorker(store, model=SMALL)
    for principal in (PRINCIPAL, GUS, None):
        assert await worker.loop._build_seed(run, principal) == await fresh.loop._build_seed(run, principal)


async def test_the_continued_seed_hash_is_the_hash_of_the_seeded_checkpoint(store: Store) -> None:
    worker = await _turns_with_state(store, 45)
    window = worker.loop.windows.get(SID)
    assert window is not None and window.continued > 10
    fresh = ScriptedWorker(store, model=SMALL)
    for event in await store.events.read(SID, types=[CHECKPOINT_SEEDED]):
        run_id = event.payload["run_id"]
        run = ce.RunContext(run_id, SID, event.payload["seed_sequence"])
        built = await fresh.loop._build_seed(run, PRINCIPAL)
        assert event.payload["checkpoint_sha256"] == payload_hash(built.to_dict()), run_id


def test_seed_digest_falls_back_to_the_whole_hash_when_the_conversation_changed() -> None:
    window = SessionWindow("s")
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
        assert window.seed_digest(head, conversation)[0] == want
    assert window.continued == 2


def test_seed_digest_hashes_long_conversations_chunk_by_chunk_as_one_text() -> None:
    window = SessionWindow("s")
    items = tuple(ce.UserMessage(f"m{i}", seq=i + 1) for i in range(200))
    shell = ce.Checkpoint("r").to_dict()
    del shell["conversation"]
    for n in (64, 65, 129, 200):  # chunk edges (64 items an update), then continued across them
        want = payload_hash({**shell, "conversation": list(items[:n])})
        assert window.seed_digest(shell, items[:n])[0] == want, n
        assert SessionWindow("fresh").seed_digest(shell, items[:n]) == (want, False), n
    assert window.continued == 3


def test_the_seed_digest_shell_is_the_checkpoint_without_its_conversation() -> None:
    untrusted = ce.TrustLevel.EXTERNAL_UNTRUSTED
    spans = tuple(ce.ElidedSpan(f"tool_result:{i}", untrusted, i, i + 1) for i in range(7))
    items = (ce.UserMessage("m", seq=9),)
    window = SessionWindow("s")
    for elided in (spans, spans[:3], ()):
        cp = ce.Checkpoint("r", conversation=items, compacted_summary="s", summary_elided=elided)
        shell = checkpoint_shell(cp)
        want = cp.to_dict()
        assert window.seed_digest(shell, items)[0] == payload_hash(want)
        del want["conversation"]
        assert shell == want


async def test_the_sql_stores_read_both_marks_in_one_operation_as_latest_before_does(
    store_case: StoreCase,
) -> None:
    store = await store_case.open()
    worker = await _turns_with_state(store, 30)
    # A session-wide state below the principal-scoped ones: GUS's answer is this older event.
    run, lease, checkpoint = await worker.loop.start_run(
        SID, "state-wide", ce.UserMessage("for all"), PRINCIPAL, owner="t"
    )
    await worker.loop.update_working_state(
        run, checkpoint, {"objective": "shared"}, source="user", lease=lease
    )
    await _turns_with_state(store, 40, first=31, worker=worker)
    each = getattr(store.events, "latest_before_each", None)
    if each is None:  # the memory store reads them one by one
        return
    types = (CARRY_RECORDED, WORKING_STATE_UPDATED)
    seeds = [e.sequence for e in await store.events.read(SID, types=["conversation.item.appended"])]
    # GUS may not read the principal-scoped states: the newest is passed over for an older one.
    for principal in (PRINCIPAL, GUS, None):
        for before in seeds[::2]:
            want = tuple([await store.events.latest_before(SID, before, t, principal) for t in types])
            assert await each(SID, before, types, principal) == want
    assert any(await each(SID, seeds[-1], types, GUS))
    # An unknown type below the boundary: the fail-closed rule reads precisely, and raises.
    last = (await store.events.read(SID))[-1].sequence
    store_case.inject_event_row(session_id=SID, sequence=last + 1, type="context.mystery")
    late = await ce.append_item(store, SID, ce.UserMessage("later"), principal=PRINCIPAL)
    assert late.seq is not None
    with pytest.raises(StoreCorruption) as err:
        await each(SID, late.seq, types, PRINCIPAL)
    assert err.value.sequence == last + 1
    await store_case.close_all()
