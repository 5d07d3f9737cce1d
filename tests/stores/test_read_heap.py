"""What a read leaves on the heap (issue 37, finding 9; ADR 0028): every object a read
returns that the cyclic collector tracks is one more to walk in each of its full passes,
and a read that makes many of them brings the next full pass on (CPython runs one when
the objects that survived since the last one reach a quarter of the rest)."""

from __future__ import annotations

import gc

from contract_events import new
from ctxengine.stores.events import Event, Store, Visibility

EVENTS = 300


async def test_a_read_holds_one_visibility_per_class(store: Store) -> None:
    for i in range(3):
        await store.events.append(new("s", f"session-{i}"))
        await store.events.append(new("s", f"alice-{i}", visibility=Visibility.principal("alice")))
    events = await store.events.read("s")
    again = await store.events.read("s", types=[events[0].type])
    by_class: dict[Visibility, set[int]] = {}
    for event in events + again:
        by_class.setdefault(event.visibility, set()).add(id(event.visibility))
    assert {v: len(ids) for v, ids in by_class.items()} == {
        Visibility.session(): 1,
        Visibility.principal("alice"): 1,
    }


async def test_a_read_tracks_one_object_per_event(store: Store) -> None:
    # Flat payloads (dicts of atoms, which the collector does not track): what is left
    # tracked is the Event itself, not a Visibility of its own as well.
    await store.events.append_all([new("s", f"k-{i}", {"i": i, "text": f"t{i}"}) for i in range(EVENTS)])
    events = await store.events.read("s")
    tracked = {id(part) for event in events for part in (event, *_fields(event)) if gc.is_tracked(part)}
    assert len(events) == EVENTS
    assert len(tracked) <= EVENTS + 1, f"{len(tracked) / EVENTS:.2f} tracked objects per event read"


def _fields(event: Event) -> list[object]:
    return [getattr(event, name) for name in Event.__slots__]
