"""A request record is encoded once (ADR 0024): the text the store writes is the one its
derivation key digests, and the store does not decode it again, unless a part from outside
the engine (the caller's checkpoint, the calibration) would not read back; then the store
checks the record whole and refuses it, as it refused it before."""

from __future__ import annotations

from typing import Any

import pytest

import ctxengine as ce
from ctxengine.core.canonical import canonical_json, payload_hash
from ctxengine.errors import ModelValidationError
from ctxengine.model import Principal, RunContext
from ctxengine.runtime.request_records import FOREIGN, RECORD_KEYS, REQUEST_RECORDED, record_event
from ctxengine.stores import _rows
from ctxengine.stores.encoded import encoded_text
from enginekit import SMALL, Driver, engine

RUN = RunContext("run-1", "s", 1, step=2)
PRINCIPAL = Principal("user", "default")


def payload(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {key: {"k": key} for key in RECORD_KEYS}
    base["estimator"] = {"corrections": {"history": 1.25}, "samples": {"history": 3}}
    return {**base, **changes}


def test_the_record_is_keyed_by_the_digest_of_the_text_it_carries(backend: str) -> None:
    record = payload()
    event = record_event(record, RUN, PRINCIPAL)
    assert event.derivation_key == f"context.request:run-1:2:{payload_hash(record)[:16]}"
    assert encoded_text(event) == canonical_json(record).decode("utf-8")
    assert event.type == REQUEST_RECORDED and event.format_version == 6


@pytest.mark.parametrize("part", FOREIGN)
async def test_a_foreign_part_that_would_not_read_back_is_checked_by_the_store(
    backend: str, part: str
) -> None:
    record = payload(**{part: {"score": 1e20}})
    event = record_event(record, RUN, PRINCIPAL)
    assert encoded_text(event) is None
    assert event.derivation_key.endswith(payload_hash(record)[:16])
    store = await ce.open_store("memory://")
    with pytest.raises(ModelValidationError, match="would not read back"):
        await store.events.append_all([event])
    assert await store.events.read("s") == []


def test_a_payload_that_is_not_a_records_is_checked_by_the_store(backend: str) -> None:
    assert encoded_text(record_event({"x": 1}, RUN, PRINCIPAL)) is None


async def test_the_loop_writes_its_records_without_decoding_them_again(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[object] = []
    real = _rows.json_object

    def json_object(text: object) -> dict[str, Any]:
        decoded.append(text)
        return real(text)

    monkeypatch.setattr(_rows, "json_object", json_object)
    store = await ce.open_store("memory://")
    driver = Driver("openai_chat")
    async with engine(store, model=SMALL) as agent:
        await driver.turns(agent.session("s"), 1, 3)
    written = list(decoded)
    found = [e for e in await store.events.read("s") if e.type == REQUEST_RECORDED]
    assert len(found) > 3
    texts = {canonical_json(e.payload).decode("utf-8") for e in found}
    assert texts.isdisjoint(written)  # nor the steps' items: the item reader checked them
    items = [e for e in await store.events.read("s") if e.type == "conversation.item.appended"]
    # Only the turns' user messages (appended by start_run) are read back by the store.
    assert len({canonical_json(e.payload).decode("utf-8") for e in items} & set(written)) == 3
    for event in found:  # the same key as before: the stored bytes of format 6 do not move
        assert event.derivation_key.endswith(payload_hash(event.payload)[:16])
