"""An event with a long payload (a compaction's lists every pointer it elided: 700 KB at
20,000 items) is probed before it is written and decoded when it is read off the event
loop's thread, and reads back the same, on every store (issue 37 finding 9, issue 40)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.runtime.session import ITEM_APPENDED, item_payload
from ctxengine.stores import _rows
from ctxengine.stores.events import NewEvent, Store, Visibility

SID = "long-payload"
LONG = "x" * (_rows.LONG_PAYLOAD + 10)


def _event(text: str, key: str) -> NewEvent:
    return NewEvent(
        SID, ITEM_APPENDED, item_payload(ce.UserMessage(text)), key, visibility=Visibility.session()
    )


async def test_a_long_payload_is_probed_and_decoded_off_the_loop(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded_on: list[int] = []
    real = _rows.decode_event

    def recording(row: Any) -> Any:
        if isinstance(row[3], str) and len(row[3]) >= _rows.LONG_PAYLOAD:
            decoded_on.append(threading.get_ident())
        return real(row)

    monkeypatch.setattr(_rows, "decode_event", recording)
    loop_thread = threading.get_ident()
    stored, written = await store.events.append_all(
        [_event("a", "k1"), _event(LONG, "k2"), _event("b", "k3")]
    )
    assert written == 3 and [e.sequence for e in stored] == [1, 2, 3]
    assert decoded_on and loop_thread not in decoded_on  # the round trip before the write
    decoded_on.clear()
    read = await store.events.read(SID)
    assert read == stored
    assert read[1].payload == item_payload(ce.UserMessage(LONG))
    assert decoded_on and loop_thread not in decoded_on
    # A short batch is probed where it is (no thread hop for an ordinary turn).
    decoded_on.clear()
    await store.events.append_all([_event("c", "k4")])
    assert decoded_on == []
