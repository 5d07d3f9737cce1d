"""Format-1 phase logs replay to the bytes they compiled to when they were written.

``phase_golden_v1.json`` holds event logs written by the issue-6 controller
(instances without a protocol version in their ``phase.submitted`` payload)
and, after every event, the state it folded to and the projection its stage
allowed: the SHA-256 of the request's canonical bytes, its body items and
the manifest's canonical bytes. The current code must rebuild the same
states and compile the same bytes from those logs, under both backends.

The file was written by ``tests/phase_golden_record.py`` (commit 227088d,
removed since: it drives the format-1 API) from the code at
``recorded_from_commit``. Never regenerate it from newer code.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from ctxengine.core.canonical import canonical_json
from ctxengine.phases import ProtocolController, payload_format
from ctxengine.stores import MemoryStore
from ctxengine.stores.events import NewEvent
from phase_fixtures import full_protocol, state_summary

GOLDEN = json.loads((Path(__file__).parent / "phase_golden_v1.json").read_text(encoding="utf-8"))
SCENARIOS = {s["instance_id"]: s for s in GOLDEN["scenarios"]}


def stored(instance_id: str, event: dict[str, Any]) -> NewEvent:
    return NewEvent(
        instance_id, event["type"], event["payload"], event["derivation_key"], actor=event["actor"]
    )


def test_the_golden_logs_cover_every_format_1_stage_and_operation() -> None:
    """A guard on the fixture itself: it exercises what format 1 could do."""
    stages = {e["stage"] for s in SCENARIOS.values() for e in s["after_each_event"]}
    operations = {e.get("operation") for s in SCENARIOS.values() for e in s["after_each_event"]} - {None}
    assert stages == {
        "prompt_drafting",
        "prompt_review",
        "prompt_revising",
        "plan_drafting",
        "plan_review",
        "plan_revising",
        "executing",
    }
    assert operations == {"draft_prompt", "revise_prompt", "draft_plan", "revise_plan", "execute"}
    submitted = [s["events"][0]["payload"] for s in SCENARIOS.values()]
    assert all("protocol_version" not in p for p in submitted)


@pytest.mark.parametrize("instance_id", sorted(SCENARIOS))
async def test_a_format_1_log_replays_to_the_same_states_and_bytes(instance_id: str) -> None:
    scenario = SCENARIOS[instance_id]
    store = MemoryStore()
    ctl = ProtocolController(store)
    for n, (event, expected) in enumerate(
        zip(scenario["events"], scenario["after_each_event"], strict=True), start=1
    ):
        await store.events.append(stored(instance_id, event))
        state = await ctl.state(instance_id)
        where = f"{instance_id} after event {n} ({event['type']})"
        assert state.protocol_version == 1, where
        assert state.stage == expected["stage"], where
        summary = canonical_json(state_summary(state))
        assert hashlib.sha256(summary).hexdigest() == expected["state_sha256"], where
        if "operation" not in expected:
            continue
        projection = ctl.project(state, expected["operation"])
        request = projection.request
        assert [item.to_dict() for item in request.body] == expected["body"], where
        assert [item.to_dict() for item in request.prefix] == GOLDEN["prefixes"][
            projection.manifest["prefix_sha256"]
        ], where
        assert canonical_json(projection.manifest).decode("utf-8") == expected["manifest"], where
        assert hashlib.sha256(request.canonical_bytes()).hexdigest() == expected["request_sha256"], where


def _payloads(instance_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e["type"], e["payload"]) for e in SCENARIOS[instance_id]["events"]]


async def test_replayed_format_1_events_keep_their_payloads() -> None:
    """Nothing rewrites a stored row: what is read back is what was written."""
    store = MemoryStore()
    for event in SCENARIOS["hostile"]["events"]:
        await store.events.append(stored("hostile", event))
    await ProtocolController(store).state("hostile")
    assert [(e.type, e.payload) for e in await store.events.read("hostile")] == _payloads("hostile")


async def test_a_format_1_instance_continues_under_the_current_controller_and_keeps_its_rendering() -> None:
    """Stored instances go on with the new calls; their version stays 1, and so does their rendering."""
    store = MemoryStore()
    ctl = ProtocolController(store)
    for event in SCENARIOS["full-standard"]["events"]:
        await store.events.append(stored("full-standard", event))
    s = await ctl.state("full-standard")
    assert (s.stage, s.protocol_version) == ("executing", 1)
    first = ctl.project(s, "execute")
    assert (
        canonical_json(first.manifest).decode("utf-8")
        == SCENARIOS["full-standard"]["after_each_event"][-1]["manifest"]
    )
    s = await ctl.request_input("full-standard", "Which quarter?", projection_sha256=first.sha256)
    s = await ctl.provide_input("full-standard", "Q3.", request_number=1)
    resumed = ctl.project(s, "execute")
    assert resumed.request.prefix == first.request.prefix  # no version-2 clause joins a version-1 instance
    assert "protocol_version" not in resumed.manifest
    s = await ctl.complete("full-standard", "Done.", projection_sha256=resumed.sha256)
    assert (s.stage, s.protocol_version) == ("complete", 1)

    # A version-1 draft under revision stays verbatim, as version-1 revisions always were.
    for event in SCENARIOS["hostile"]["events"][:3]:
        await store.events.append(stored("hostile", event))
    s = await ctl.state("hostile")
    assert s.stage == "prompt_revising"
    s = await ctl.record_artifact(
        "hostile", "prompt", "GOAL: <b>v2</b>", projection_sha256=ctl.project(s, "revise_prompt").sha256
    )
    assert "projection_sha256" not in (await store.events.read("hostile"))[-1].payload  # a format-1 row
    s = await ctl.revise("hostile", "prompt", "Shorter.", displayed_version=2)
    draft = next(
        i.text for i in ctl.project(s, "revise_prompt").request.body if i.region_class == "phase.prompt_draft"
    )
    assert draft is not None and draft.endswith("\nGOAL: <b>v2</b>")


@pytest.mark.parametrize("output_mode", ["standard", "pseudocode"])
async def test_a_controller_pinned_to_version_1_writes_the_format_1_log_byte_for_byte(
    output_mode: str,
) -> None:
    """During a rolling upgrade new instances can be version 1: the same rows the old code wrote."""
    instance_id = f"full-{output_mode}"
    store = MemoryStore()
    await full_protocol(ProtocolController(store, protocol_version=1), instance_id, output_mode=output_mode)
    written = [(e.type, e.payload, e.derivation_key) for e in await store.events.read(instance_id)]
    recorded = [(e["type"], e["payload"], e["derivation_key"]) for e in SCENARIOS[instance_id]["events"]]
    assert written == recorded
    assert {payload_format(t, p) for t, p, _ in written} == {1}


async def test_payload_format_names_what_a_format_1_reader_cannot_read() -> None:
    store = MemoryStore()
    await full_protocol(ProtocolController(store), "v2")
    formats = {(e.type, payload_format(e.type, e.payload)) for e in await store.events.read("v2")}
    assert ("phase.submitted", 2) in formats and ("phase.artifact.recorded", 2) in formats
    assert ("phase.revised", 1) in formats and ("phase.confirmed", 1) in formats
    assert payload_format("phase.stopped", {"stage": "executing", "reason": None}) == 2
