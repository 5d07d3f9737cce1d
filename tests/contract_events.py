"""Shorthand of the store contract tests: the event types they use and a ``NewEvent`` maker."""

from __future__ import annotations

from typing import Any

from ctxengine.stores.events import NewEvent

PLAN = "context.plan.created"
ROTATED = "context.epoch.rotated"
WS = "context.working_state.updated"
COMPACTED = "context.compacted"


def new(session: str, key: str, payload: dict[str, Any] | None = None, **kw: Any) -> NewEvent:
    event_type = kw.pop("type", PLAN)
    return NewEvent(session, event_type, {"k": key} if payload is None else payload, key, **kw)
