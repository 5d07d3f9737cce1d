"""Events the engine encoded itself (``stores.encoded``), on memory, SQLite and PostgreSQL.

A store writes an ``EncodedEvent``'s text as given and returns its payload without decoding
the text again (the engine made it of plain JSON values and holds the text already); every
other event, and a copy of an encoded one (``dataclasses.replace``), is encoded and read
back before it is written, as before. Each test fails on a store that decoded an encoded
payload again, wrote another text, or let a copy skip the read-back check.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ctxengine.core.canonical import canonical_json
from ctxengine.errors import IdempotencyConflict, ModelValidationError
from ctxengine.stores import _rows
from ctxengine.stores.encoded import EncodedEvent, encoded_text, reads_back, with_text
from ctxengine.stores.events import NewEvent, Store

SID = "encoded"
PLAN = "context.plan.created"
PAYLOAD: dict[str, Any] = {"epoch": 1, "model": "m", "nested": {"b": [1, 2.5, "x"], "a": None}}


def encoded(key: str, payload: dict[str, Any] = PAYLOAD) -> EncodedEvent:
    event = EncodedEvent(SID, PLAN, payload, key)
    return with_text(event, canonical_json(payload).decode("utf-8"))


def counting(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    real = _rows.json_object

    def json_object(text: object) -> dict[str, Any]:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(_rows, "json_object", json_object)
    return calls


async def test_an_encoded_event_is_written_as_given_without_a_second_decode(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counting(monkeypatch)
    event = encoded("k1")
    stored, written = await store.events.append_all([event])
    assert written == 1 and calls == []
    assert stored[0].payload == PAYLOAD and stored[0].sequence == 1
    single = await store.events.append(encoded("k2"))
    assert single.sequence == 2 and calls == []
    # What is stored is the text, read back as any row is.
    read = await store.events.read(SID)
    assert [e.payload for e in read] == [PAYLOAD, PAYLOAD]
    assert read == [stored[0], single]
    # A plain event is still read back before it is written.
    calls.clear()
    await store.events.append_all([NewEvent(SID, PLAN, PAYLOAD, "k3")])
    assert calls == [canonical_json(PAYLOAD).decode("utf-8")]


async def test_a_repeated_encoded_event_is_idempotent_on_its_text(store: Store) -> None:
    first, _ = await store.events.append_all([encoded("k1")])
    again, written = await store.events.append_all([encoded("k1")])
    assert written == 0 and again == first
    with pytest.raises(IdempotencyConflict):
        await store.events.append_all([encoded("k1", {"epoch": 2})])


async def test_a_copy_of_an_encoded_event_is_checked_as_any_event(store: Store) -> None:
    copy = replace(encoded("k1"), payload={"x": 2.0**53})  # canonical, but not read back
    assert isinstance(copy, EncodedEvent) and encoded_text(copy) is None
    with pytest.raises(ModelValidationError, match="would not read back"):
        await store.events.append_all([copy])
    with pytest.raises(ModelValidationError, match="would not read back"):
        await store.events.append(copy)
    assert await store.events.read(SID) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [(PAYLOAD, True), ({"score": 0.5}, True), ({"score": 1e20}, False), ([2.0**53], False), ("x", True)],
)
def test_reads_back_is_the_stores_check_of_a_part(value: object, expected: bool) -> None:
    assert reads_back(value) is expected
    if isinstance(value, dict):
        text = canonical_json(value).decode("utf-8")
        if expected:
            assert _rows.json_object(text) == value
        else:
            with pytest.raises(ValueError, match="canonical"):
                _rows.json_object(text)
