"""The sliced paths answer exactly what the paths in one stretch did (issue 37, finding 9).

The loop gives the event loop back while it reads, decodes, renders, counts, hashes and
compacts a long history (``core.slices``). Slicing only changes when other tasks run:
the checkpoints, the requests and the stored rows are the same. Here the slices are made
tiny (a few items, every step yielding, pages of a few sequences) and compared with
the work done in one go, on both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.assembly.render_cache import render_item
from ctxengine.cli.looplag import imported_session
from ctxengine.cli.synthetic import synthetic_session
from ctxengine.cli.turns import AGENT, PRINCIPAL, START, ScriptedWorker
from ctxengine.core import slices
from ctxengine.core.budget import allocate
from ctxengine.errors import StoreCorruption
from ctxengine.model import Checkpoint, ResolvedModel, UserMessage, WorkingState
from ctxengine.model.clock import FixedClock
from ctxengine.runtime import compaction, session
from ctxengine.runtime.compaction import StructuredCompactor
from ctxengine.stores import MemoryStore
from ctxengine.stores.events import Visibility

#: A window a few hundred items overflow (the first build compacts).
SMALL = ResolvedModel("bench", "small", 24_000, 1_024, 1_024)


@pytest.fixture
def tiny_slices(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Slices of three items, every step giving the loop back, pages of five sequences."""
    monkeypatch.setattr(slices, "SLICE_ITEMS", 3)
    monkeypatch.setattr(slices, "SLICE_SECONDS", 0.0)
    monkeypatch.setattr(session, "PAGE", 5)
    yield


def _checkpoint(n: int, tag: str, depth: int = 0) -> tuple[Checkpoint, int]:
    items = synthetic_session(n, tag=tag)
    seed = (items[-1].seq or 0) + 1 if items else 1
    conversation = (*items, UserMessage("and now?", seq=seed))
    return Checkpoint("c", conversation=conversation, working_state=WorkingState(objective="o")), seed


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(min_value=0, max_value=160), budget=st.sampled_from([400, 3_000]))
async def test_the_compaction_in_slices_is_the_compaction_in_one_go(
    backend: str, monkeypatch: pytest.MonkeyPatch, n: int, budget: int
) -> None:
    cp, seed = _checkpoint(n, f"sliced-{n}")
    plan_budget = allocate(ResolvedModel("bench", "m", 200_000, 16_384, 8_192), 2_000)
    compactor = StructuredCompactor(ce.TokenEstimator(), max_listed_spans=4)
    kwargs: dict[str, Any] = {"model_id": "bench:m", "seed_sequence": seed, "history_budget_tokens": budget}
    whole = compactor.compact(cp, plan_budget, "history_requires_compaction", **kwargs)
    # As before the slices: every item rendered one at a time through the render cache.
    monkeypatch.setattr(
        compaction, "_history_renders", lambda part: [render_item(i, "history") for i in part]
    )
    before = compactor.compact(cp, plan_budget, "history_requires_compaction", **kwargs)
    monkeypatch.undo()
    monkeypatch.setattr(slices, "SLICE_ITEMS", 3)
    monkeypatch.setattr(slices, "SLICE_SECONDS", 0.0)
    sliced = await compactor.compact_async(cp, plan_budget, "history_requires_compaction", **kwargs)
    assert sliced == whole == before
    assert sliced[1].to_dict() == before[1].to_dict()
    # A compaction of the compacted checkpoint, too (previous spans folded in slices).
    again = compactor.compact(sliced[0], plan_budget, "history_requires_compaction", **kwargs)
    assert (
        await compactor.compact_async(sliced[0], plan_budget, "history_requires_compaction", **kwargs)
        == again
    )


async def _turn(items: int) -> dict[str, Any]:
    """A fresh worker's first turn of an imported session: what it answered and stored."""
    store = MemoryStore(clock=FixedClock(START))
    seed = await imported_session(store, "s", items, model=SMALL)
    worker = ScriptedWorker(store, model=SMALL, owner="w")
    run = ce.RunContext("r", "s", seed)
    started = await worker.loop.pick_up(run, PRINCIPAL, owner="w")
    request, checkpoint = await worker.loop.build_with_pressure(
        run, started.checkpoint, AGENT, PRINCIPAL, lease=started.lease
    )
    history = await session.session_history(store, "s", seed + 1)
    return {
        "seeded": started.checkpoint.to_dict(),
        "checkpoint": checkpoint.to_dict(),
        "request": [block.to_dict() for block in request.body],
        "events": [replace(e, payload=dict(e.payload)) for e in await store.events.read("s")],
        "checkpoints": await store.checkpoints.latest_raw("r"),
        "counts": dict(store._counts),
        "history": [item.to_dict() for item in history],
    }


@pytest.mark.parametrize("items", [7, 300])
async def test_a_turn_in_slices_stores_and_answers_what_a_turn_in_one_go_did(
    backend: str, monkeypatch: pytest.MonkeyPatch, items: int
) -> None:
    whole = await _turn(items)
    if items > 100:
        assert whole["checkpoint"]["summary_depth"] == 1  # the build compacted
    monkeypatch.setattr(slices, "SLICE_ITEMS", 3)
    monkeypatch.setattr(slices, "SLICE_SECONDS", 0.0)
    monkeypatch.setattr(session, "PAGE", 5)
    sliced = await _turn(items)
    assert sliced.keys() == whole.keys()
    for key in whole:
        assert sliced[key] == whole[key], key


async def test_a_paged_read_is_the_read_in_one_go(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore(clock=FixedClock(START))
    seed = await imported_session(store, "s", 50)
    whole = await session.read_item_window(store, "s", 3, seed, "c")
    monkeypatch.setattr(session, "PAGE", 4)
    monkeypatch.setattr(slices, "SLICE_ITEMS", 3)
    for after, before in [(3, seed), (0, seed + 1), (10, 11), (10, 12), (seed, seed + 9)]:
        one = await store.events.read_items("s", after, before=before, counter="c")
        rows, items = await session.read_item_window(store, "s", after, before, "c")
        assert rows == one
        assert [i.to_dict() for i in items] == [i.to_dict() for i in session.decode_rows("s", one)]
    assert (await session.read_item_window(store, "s", 3, seed, "c"))[0] == whole[0]


async def test_a_paged_history_leaves_out_what_the_principal_may_not_see_before_decoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As one read did: the rows another tenant's principal may see are never decoded (one
    that would not decode fails only the readers who may see it)."""
    store = MemoryStore(clock=FixedClock(START))
    other = ce.Principal("mallory", "other-tenant", frozenset())
    for i in range(12):
        visibility = Visibility.tenant("other-tenant") if i % 3 == 0 else Visibility.session()
        await session.append_item(store, "s", UserMessage(f"m{i}"), visibility=visibility)
    store._events["s"][3] = (
        *store._events["s"][3][:3],
        '{"item": {"kind": "nonsense"}}',
        *store._events["s"][3][4:],
    )
    whole = [i.to_dict() for i in await session.session_history(store, "s", 13, principal=PRINCIPAL)]
    monkeypatch.setattr(session, "PAGE", 4)
    monkeypatch.setattr(slices, "SLICE_ITEMS", 2)
    paged = [i.to_dict() for i in await session.session_history(store, "s", 13, principal=PRINCIPAL)]
    assert paged == whole and len(whole) == 8
    with pytest.raises(StoreCorruption):
        await session.session_history(store, "s", 13, principal=other)
