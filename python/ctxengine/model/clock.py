"""Time enters only through a ``Clock``: ``now()`` is timezone-aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    __slots__ = ()

    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock that only moves when told to (tests, demos, replays)."""

    __slots__ = ("_now",)

    def __init__(self, dt: datetime) -> None:
        if dt.tzinfo is None or dt.utcoffset() is None:
            raise ValueError("FixedClock needs a timezone-aware datetime")
        self._now = dt.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        self._now = self._now + delta
        return self._now


__all__ = ["Clock", "FixedClock", "SystemClock"]
