"""Corrupt rows (issue 11, acceptance 3): every read path fails closed, naming the row.

A real session (a plan, items, a working-state update, a run with
checkpoints) gets one corrupt row planted straight into the storage, in
each way a row can go bad: an unknown type, text that is not JSON, JSON
nested past any sane depth, NaN, integers past 64 bits, a non-canonical
spelling, a future format version, fields of the wrong JSON type, missing
keys. Every read path whose answer includes that row raises
``StoreCorruption`` naming the session and sequence (or the run and
checkpoint version); none returns an answer without it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.cli.inspection import inspect_session
from ctxengine.core.canonical import canonical_json
from ctxengine.errors import CheckpointCorruption, StoreCorruption
from ctxengine.runtime.checkpoints import latest_checkpoint, write_checkpoint
from ctxengine.stores.events import Store
from storekit import StoreCase

SID = "corrupt-session"
MODEL = ce.ResolvedModel("acme", "m-64k", 64_000, 4_096, 4_096)
AGENT = ce.AgentSpec("agent", "1", "Be brief.")
DANA = ce.Principal("dana", "acme", frozenset({"read"}))
ITEM = "conversation.item.appended"
PLAN = "context.plan.created"
STATE = "context.working_state.updated"


def canonical(value: Any) -> str:
    return canonical_json(value).decode("utf-8")


DEEP = '{"x":' + "[" * 5000 + "]" * 5000 + "}"
#: (name, event type or None for "the target type", payload text, format version)
KINDS: dict[str, Callable[[str], tuple[str, str, int]]] = {
    "unknown-type": lambda t: ("context.mystery", "{}", 1),
    "bad-json": lambda t: (t, "{not json", 1),
    "deep-json": lambda t: (t, DEEP, 1),
    "nan": lambda t: (t, '{"x":NaN}', 1),
    "huge-int": lambda t: (t, '{"x":123456789012345678901234567890}', 1),
    "non-canonical": lambda t: (t, '{ "x": 1 }', 1),
    "future-version": lambda t: (t, "{}", 99),
    "wrong-types": lambda t: (
        t,
        canonical(
            {
                ITEM: {"item": {"type": "user_message", "content": 5}},
                PLAN: {"plan": {"epoch": "one"}, "reason": "initial"},
                STATE: {"state": {"tasks": 5}},
            }[t]
        ),
        1,
    ),
    "missing-keys": lambda t: (
        t,
        canonical({ITEM: {}, PLAN: {"reason": "initial"}, STATE: {"run_id": "r"}}[t]),
        1,
    ),
}


class Session:
    """A small real session and the paths that read it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.planner = ce.ContextPlanner(store)
        self.loop = ce.ContextLoop(
            store,
            planner=self.planner,
            builder=ce.ContextBuilder(self.planner),
            compactor=ce.StructuredCompactor(self.planner.estimator),
            estimator=self.planner.estimator,
        )

    async def populate(self) -> int:
        """Fill the session; returns the next free sequence."""
        await self.planner.plan(SID, AGENT, DANA, MODEL, (), policy_version="p1")
        seed = await ce.append_item(self.store, SID, ce.UserMessage("hello"), principal=DANA)
        assert seed.seq is not None
        run = ce.RunContext("run-1", SID, seed.seq)
        lease = await self.store.checkpoints.claim("run-1", "w")
        cp = await self.loop._seed_checkpoint(run, DANA, lease=lease)
        await self.loop.update_working_state(run, cp, {"objective": "greet"}, source="user", lease=lease)
        return len(await self.store.events.read(SID)) + 1

    def paths(self, target: str, sequence: int) -> dict[str, Callable[[], Awaitable[Any]]]:
        """The read paths whose answer includes a row of type ``target`` at ``sequence``."""
        s, after = self.store, sequence - 1
        paths: dict[str, Callable[[], Awaitable[Any]]] = {
            "read": lambda: s.events.read(SID),
            "read(after)": lambda: s.events.read(SID, after=after),
            "read(types)": lambda: s.events.read(SID, types=[target]),
            "inspect": lambda: inspect_session(s, SID),
        }
        if target == ITEM:
            paths["session_history"] = lambda: ce.session_history(s, SID, sequence + 1)
        if target in (PLAN, STATE):
            paths["latest_before"] = lambda: s.events.latest_before(SID, sequence + 1, target)
            paths["latest_before(principal)"] = lambda: s.events.latest_before(
                SID, sequence + 1, target, DANA
            )
        if target == PLAN:
            paths["planner.current"] = lambda: ce.ContextPlanner(s).current(SID)
        if target == STATE:
            paths["carry_working_state"] = lambda: ce.carry_working_state(s, SID, sequence + 1, DANA)
        return paths


@pytest.mark.parametrize("target", [ITEM, PLAN, STATE])
@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_every_event_read_path_fails_closed_naming_the_row(
    store_case: StoreCase, store: Store, kind: str, target: str
) -> None:
    session = Session(store)
    sequence = await session.populate()
    event_type, payload, version = KINDS[kind](target)
    store_case.inject_event_row(
        session_id=SID, sequence=sequence, type=event_type, payload=payload, schema_version=version
    )
    paths = session.paths(target, sequence)
    if kind in ("wrong-types", "missing-keys"):
        # The row is well-formed canonical JSON: the event log is payload-agnostic and
        # returns it as stored; the decoders of what it holds (history, plans, states,
        # inspection) fail closed on it.
        for raw in ("read", "read(after)", "read(types)", "latest_before", "latest_before(principal)"):
            paths.pop(raw, None)
        if target == ITEM:
            paths.pop("inspect")  # inspection counts items, it does not decode them
    for name, call in paths.items():
        with pytest.raises(StoreCorruption) as err:
            await call()
        assert (err.value.session_id, err.value.sequence) == (SID, sequence), name
        assert f"sequence {sequence}" in str(err.value), name
    # A run seeded after the corrupt row cannot be built from the log either.
    if target in (ITEM, STATE):
        late = await ce.append_item(store, SID, ce.UserMessage("and now?"), principal=DANA)
        assert late.seq == sequence + 1
        with pytest.raises(StoreCorruption) as err:
            await session.loop._build_seed(ce.RunContext("run-late", SID, late.seq), DANA)
        assert (err.value.session_id, err.value.sequence) == (SID, sequence)


CHECKPOINT_KINDS: dict[str, dict[str, Any]] = {
    "bad-json": {"payload": "{not json"},
    "deep-json": {"payload": DEEP},
    "nan": {"payload": '{"x":NaN}'},
    "huge-int": {"payload": '{"x":123456789012345678901234567890}'},
    "non-canonical": {"payload": '{ "format": "checkpoint.full/1" }'},
    "future-version": {"schema_version": 99},
    "unknown-kind": {"kind": "partial"},
    "unknown-trigger": {"trigger": "lunch"},
    "wrong-types": {
        "payload": canonical(
            {
                "format": "checkpoint.full/1",
                "checkpoint": {"run_id": "run-1", "version": 2, "conversation": 5},
            }
        )
    },
    "missing-keys": {"payload": canonical({"format": "checkpoint.full/1"})},
}


@pytest.mark.parametrize("kind", sorted(CHECKPOINT_KINDS))
@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
async def test_every_checkpoint_read_path_fails_closed_naming_the_row(
    store_case_factory: Callable[[str], StoreCase], store_kind: str, kind: str
) -> None:
    case = store_case_factory(store_kind)
    store = await case.open()
    try:
        session = Session(store)
        await session.populate()  # run-1 has version 1 (seeded) and 2 (working state)
        row = {
            "kind": "full",
            "trigger": "compaction",
            "payload": "{}",
            "schema_version": 1,
            **CHECKPOINT_KINDS[kind],
        }
        case.raw_execute(
            "INSERT INTO ctxengine_checkpoints (run_id, version, kind, trigger, payload, lease_epoch, "
            "created_at, schema_version) VALUES ('run-1', 3, ?, ?, ?, 1, ?, ?)",
            (row["kind"], row["trigger"], row["payload"], "2025-01-01T00:00:00+00:00", row["schema_version"]),
        )
        lease = await store.checkpoints.claim("run-1", "w2")
        paths: dict[str, Callable[[], Awaitable[Any]]] = {
            "latest_raw": lambda: store.checkpoints.latest_raw("run-1"),
            "latest_checkpoint": lambda: latest_checkpoint(store, "run-1"),
            "write_checkpoint": lambda: write_checkpoint(
                store, "run-1", ce.Checkpoint("run-1"), trigger="tool_completed", lease=lease
            ),
            "seed_checkpoint": lambda: session.loop._seed_checkpoint(
                ce.RunContext("run-1", SID, 2), DANA, lease=lease
            ),
        }
        if kind in ("wrong-types", "missing-keys"):
            # The raw port stores opaque payloads (any canonical JSON object); the typed
            # checkpoint layer above it decodes them and fails closed.
            paths.pop("latest_raw")
        for name, call in paths.items():
            with pytest.raises(StoreCorruption) as err:
                await call()
            # Checkpoint rows are named by run and version (UnsupportedFormat, for the
            # future version, carries them in the generic row fields).
            assert (err.value.session_id, err.value.sequence) == ("run-1", 3), name
            if kind != "future-version":
                assert isinstance(err.value, CheckpointCorruption), name
            assert "run 'run-1' checkpoint version 3" in str(err.value), name
    finally:
        await case.close_all()
