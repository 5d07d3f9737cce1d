"""Phase projections (issue 6): the log is the state (rebuild, retries, derivation keys, forged events)."""

from __future__ import annotations

import pytest
from phase_expectations import ANY_SHA, event_count

from ctxengine.errors import ProtocolStateError, StoreCorruption
from ctxengine.phases import PHASE_EVENT_TYPES, ProtocolController, body_digest
from ctxengine.stores import MemoryStore
from ctxengine.stores.events import NewEvent
from phase_fixtures import PROMPT_V1, REQUEST, SOURCES, drive, full_protocol, record

# -- the log is the state ------------------------------------------------------------------------------


async def test_a_fresh_controller_rebuilds_the_same_state(
    ctl: ProtocolController, store: MemoryStore
) -> None:
    state, trace = await full_protocol(ctl)
    fresh = ProtocolController(store)
    assert await fresh.state("task-1") == state
    assert (
        fresh.project(state, "execute").request.canonical_bytes()
        == trace.steps[-1][1].request.canonical_bytes()
    )


async def test_repeating_the_last_transition_is_a_retry_not_a_second_event(
    ctl: ProtocolController, store: MemoryStore
) -> None:
    state = await ctl.submit("i", REQUEST, sources=SOURCES)
    assert await ctl.submit("i", REQUEST, sources=SOURCES) == state
    answered = ctl.project(state, "draft_prompt").sha256
    state = await ctl.record_artifact("i", "prompt", PROMPT_V1, projection_sha256=answered)
    assert await ctl.record_artifact("i", "prompt", PROMPT_V1, projection_sha256=answered) == state
    state = await ctl.confirm("i", "prompt", version=1, digest=body_digest(PROMPT_V1))
    assert await ctl.confirm("i", "prompt", version=1, digest=body_digest(PROMPT_V1)) == state
    assert await event_count(store, "i") == 3
    # Not a retry: a different request for a submitted instance.
    with pytest.raises(ProtocolStateError, match="already been submitted"):
        await ctl.submit("i", "something else")


async def test_phase_events_use_ordinal_derivation_keys_in_the_instance_session(
    ctl: ProtocolController, store: MemoryStore
) -> None:
    state = await ctl.submit("task-9", REQUEST, sources=SOURCES)
    answered = ctl.project(state, "draft_prompt").sha256
    await ctl.record_artifact("task-9", "prompt", PROMPT_V1, projection_sha256=answered)
    await drive(ctl, "task-9b", "complete")
    events = await store.events.read("task-9")
    assert [e.derivation_key for e in events] == ["phase:task-9:1", "phase:task-9:2"]
    assert events[0].payload["protocol_version"] == 2
    assert events[1].payload == {
        "kind": "prompt",
        "version": 1,
        "body": PROMPT_V1,
        "digest": body_digest(PROMPT_V1),
        "basis": None,
        "projection_sha256": answered,
    }
    events = await store.events.read("task-9b")
    assert [e.derivation_key for e in events] == [f"phase:task-9b:{n}" for n in range(1, len(events) + 1)]
    assert {e.type for e in events} <= PHASE_EVENT_TYPES


async def test_other_session_events_do_not_disturb_the_protocol(
    ctl: ProtocolController, store: MemoryStore
) -> None:
    state = await ctl.submit("i", REQUEST)
    await store.events.append(
        NewEvent("i", "conversation.item.appended", {"item": {"type": "note"}}, "unrelated:1")
    )
    state = await record(ctl, state, "prompt", PROMPT_V1)
    assert state.stage == "prompt_review" and [r.sequence for r in state.history] == [1, 3]


async def test_a_forged_event_fails_replay_closed(ctl: ProtocolController, store: MemoryStore) -> None:
    await drive(ctl, "i", "prompt_review")
    # Claims a confirmation of version 7 that was never displayed.
    forged = {"kind": "prompt", "version": 7, "digest": "1" * 64, "output_mode": None}
    await store.events.append(NewEvent("i", "phase.confirmed", forged, "forged:1"))
    with pytest.raises(StoreCorruption, match=r"phase\.confirmed cannot be replayed"):
        await ctl.state("i")


async def test_an_event_whose_derived_fields_disagree_fails_replay(
    ctl: ProtocolController, store: MemoryStore
) -> None:
    await ctl.submit("i", REQUEST)
    lying = {
        "kind": "prompt",
        "version": 1,
        "body": "x",
        "digest": "2" * 64,
        "basis": None,
        "projection_sha256": ANY_SHA,
    }
    await store.events.append(NewEvent("i", "phase.artifact.recorded", lying, "forged:1"))
    with pytest.raises(StoreCorruption, match="differs from what its command yields"):
        await ctl.state("i")
