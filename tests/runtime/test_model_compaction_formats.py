"""The stored shape of a model-backed compaction (issue 43; ADR 0009: a new format version,
the write switch, an older-reader test): ``context.compacted`` with a summary record is
format 7; a reader of an older format refuses the row (``UnsupportedFormat``) on every
read path rather than adopt a checkpoint whose summary it cannot account for."""

from __future__ import annotations

from typing import Any

import pytest

import ctxengine as ce
from compactionkit import AGENT, ALICE, SESSION, TURNS, ScriptedRouter, add_turns, make_loop, start_run
from ctxengine.errors import UnsupportedFormat
from ctxengine.runtime.loop_pressure import CONTEXT_COMPACTED
from ctxengine.runtime.session import ITEM_APPENDED
from ctxengine.stores.formats import WritePolicy
from storekit import older_reader


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_reader_of_format_6_refuses_a_compaction_with_a_model_summary(
    kind: str, store_case_factory: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = store_case_factory(kind)
    store = await case.open(clock)
    try:
        loop = make_loop(store, clock, ScriptedRouter())
        await add_turns(store, TURNS)
        run, lease, seeded = await start_run(loop, "run-1")
        await loop.build_with_pressure(run, seeded, AGENT, ALICE, lease=lease)
        [event] = await store.events.read(SESSION, types=(CONTEXT_COMPACTED,))
        assert event.format_version == 7
        older_reader(monkeypatch, 6)  # what a worker of the format-6 build knows
        for read in (
            lambda: store.events.read(SESSION),
            lambda: store.events.read(SESSION, types={CONTEXT_COMPACTED}),
            lambda: store.events.read(SESSION, types={ITEM_APPENDED}),
        ):
            with pytest.raises(UnsupportedFormat) as err:
                await read()
            assert err.value.needed_version == 7 and err.value.sequence == event.sequence
        # Below the newer row the session reads as before.
        assert len(await store.events.read(SESSION, before=event.sequence)) > TURNS
    finally:
        await case.close_all()
        await store.close()


@pytest.mark.parametrize("pinned", ["5", "6"])
async def test_the_write_switch_compacts_extractively_and_calls_nothing(
    tmp_path: Any, clock: Any, monkeypatch: pytest.MonkeyPatch, pinned: str
) -> None:
    monkeypatch.setenv("CTXENGINE_WRITE_FORMAT", pinned)
    store = await ce.open_store(f"sqlite:///{tmp_path / 'pinned.db'}")
    try:
        assert store.write_policy == WritePolicy(max_version=int(pinned))  # type: ignore[attr-defined]
        router = ScriptedRouter()
        loop = make_loop(store, clock, router)
        await add_turns(store, TURNS)
        run, lease, seeded = await start_run(loop, "run-1")
        request, current = await loop.build_with_pressure(run, seeded, AGENT, ALICE, lease=lease)
        assert router.seen == []
        assert (current.compacted_summary or "").startswith("Compacted conversation through event")
        [event] = await store.events.read(SESSION, types=(CONTEXT_COMPACTED,))
        assert event.format_version == 1 and "summarizer" not in event.payload
        assert request.metadata["total_tokens"] <= request.metadata["capacity_tokens"]
    finally:
        await store.close()
