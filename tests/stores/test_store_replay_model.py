"""The store contract, stateful: the log replays to a plain model after every step."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from contract_events import PLAN, ROTATED
from ctxengine.core.canonical import canonical_json
from ctxengine.errors import IdempotencyConflict
from ctxengine.stores.events import EVENT_TYPES, NewEvent, Store
from storekit import STORE_KINDS, StoreCase

# --------------------------------------------------------------------------
# stateful: the log replays to a plain model after every step

T = TypeVar("T")
SESSIONS = ("s1", "s2", "s3")
KEYS = ("k1", "k2", "k3", "k4")
SIMPLE_TYPES = sorted(EVENT_TYPES - {PLAN, ROTATED})
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
payloads = st.dictionaries(st.sampled_from(["a", "b", "é", "z"]), json_values, max_size=3)


class StoreLogMachine(RuleBasedStateMachine):
    """Appends, repeats keys, rotates plan epochs and reopens the store."""

    @staticmethod
    def new_case() -> StoreCase:
        raise NotImplementedError("subclasses name the store kind")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.case = self.new_case()
        self.store: Store = self.run(self.case.open())
        # session -> [(derivation_key, type, canonical payload)] in sequence order
        self.model: dict[str, list[tuple[str, str, dict[str, Any]]]] = {s: [] for s in SESSIONS}
        self.epochs = dict.fromkeys(SESSIONS, 0)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def _expect_append(self, event: NewEvent) -> None:
        log = self.model[event.session_id]
        canonical = json.loads(canonical_json(event.payload))
        known = [i for i, (key, _, _) in enumerate(log) if key == event.derivation_key]
        # Compared as canonical bytes: False == 0 in Python, but not in a stored payload.
        if known and (log[known[0]][1], canonical_json(log[known[0]][2])) != (
            event.type,
            canonical_json(event.payload),
        ):
            with pytest.raises(IdempotencyConflict):
                self.run(self.store.events.append(event))
            return
        stored = self.run(self.store.events.append(event))
        if known:
            assert stored.sequence == known[0] + 1
        else:
            log.append((event.derivation_key, event.type, canonical))
            assert stored.sequence == len(log)
        assert (stored.type, stored.payload) == (event.type, canonical)

    @initialize()
    def start(self) -> None:
        pass

    @rule(
        session=st.sampled_from(SESSIONS),
        key=st.sampled_from(KEYS),
        event_type=st.sampled_from(SIMPLE_TYPES),
        payload=payloads,
    )
    def append(self, session: str, key: str, event_type: str, payload: dict[str, Any]) -> None:
        self._expect_append(NewEvent(session, event_type, payload, key))

    @rule(session=st.sampled_from(SESSIONS), data=st.data())
    def repeat_a_key(self, session: str, data: st.DataObject) -> None:
        log = self.model[session]
        if not log:
            return
        key, event_type, payload = data.draw(st.sampled_from(log))
        self._expect_append(NewEvent(session, event_type, payload, key))

    @rule(session=st.sampled_from(SESSIONS), model_name=st.sampled_from(["m1", "m2"]))
    def rotate_epoch(self, session: str, model_name: str) -> None:
        epoch = self.epochs[session] + 1
        event_type = PLAN if epoch == 1 else ROTATED
        key = f"context.plan:{session}:{epoch}"
        self._expect_append(NewEvent(session, event_type, {"epoch": epoch, "model": model_name}, key))
        self.epochs[session] = epoch

    @rule(session=st.sampled_from(SESSIONS))
    def replan_the_current_epoch(self, session: str) -> None:
        """A concurrent planner repeating the newest epoch event writes nothing."""
        epoch = self.epochs[session]
        if epoch:
            key = f"context.plan:{session}:{epoch}"
            stored = next(entry for entry in self.model[session] if entry[0] == key)
            self._expect_append(NewEvent(session, stored[1], stored[2], key))

    @rule()
    def reopen(self) -> None:
        if self.case.kind != "memory":
            self.run(self.store.close())
            self.store = self.run(self.case.open())

    @invariant()
    def replay_matches_the_model(self) -> None:
        for session in SESSIONS:
            events = self.run(self.store.events.read(session))
            got = [(e.sequence, e.derivation_key, e.type, e.payload) for e in events]
            want = [(i + 1, *entry) for i, entry in enumerate(self.model[session])]
            assert got == want
            epoch = self.epochs[session]
            if epoch:
                latest = max((e for e in events if e.type in (PLAN, ROTATED)), key=lambda e: e.sequence)
                assert latest.payload["epoch"] == epoch

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
            self.run(self.case.close_all())
        finally:
            self.loop.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_stateful_replay_matches_a_plain_model(
    store_case_factory: Callable[[str], StoreCase], kind: str
) -> None:
    if kind == "postgres":
        store_case_factory("postgres")  # start the server (or skip) before hypothesis runs
    machine = type(
        f"{kind.title()}LogMachine",
        (StoreLogMachine,),
        {"new_case": staticmethod(lambda: store_case_factory(kind))},
    )
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
