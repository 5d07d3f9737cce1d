"""Every store reads a range one way (issue 37, finding 9; ADR 0028): its rows fetched (SQLite
on its worker thread, PostgreSQL over its connection, memory from its lists), then decoded on
the event loop in slices (``decode_events_steps`` under ``finish_async``), which give the loop
back during a long read and pause the collector meanwhile. SQLite decoded on its worker
thread in one stretch, holding the GIL throughout and allocating every event with the
collector running."""

from __future__ import annotations

import threading

import pytest

from contract_events import new
from ctxengine.stores import _rows
from ctxengine.stores.events import Event, Store

EVENTS = 50


async def test_a_read_decodes_its_rows_on_the_event_loop(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.events.append_all([new("s", f"k-{i}", {"i": i}) for i in range(EVENTS)])
    threads: set[int] = set()
    decode = _rows.decode_event

    def spied(row: _rows.Row) -> Event:
        threads.add(threading.get_ident())
        return decode(row)

    monkeypatch.setattr(_rows, "decode_event", spied)
    events = await store.events.read("s")
    typed = await store.events.read("s", types=[events[0].type], before=EVENTS)
    covered, through = await store.events.read_covering("s", 10, [events[0].type])
    assert [e.sequence for e in events] == list(range(1, EVENTS + 1))
    assert [e.sequence for e in typed] == list(range(1, EVENTS))
    assert [e.sequence for e in covered] == list(range(11, EVENTS + 1)) and through == EVENTS
    assert threads == {threading.get_ident()}, "decoded on another thread than the event loop's"
