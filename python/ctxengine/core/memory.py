"""The memory bounds of the process's caches, set in one place (issue 37).

Every cache a worker keeps between calls only saves time, and each is bounded
by the bytes it is estimated to hold, not by a count of entries (a count lets
a few large sessions or messages take a gigabyte). ``MemoryLimits`` names the
bounds; ``set_memory_limits`` changes them for the whole process, the way
``use_backend`` changes the backend:

    import ctxengine
    ctxengine.set_memory_limits(render_bytes=256 << 20, window_bytes=256 << 20)

A cache reads its bound when it grows, so a lower bound applies from the next
entry a cache takes. A cache constructed
with an explicit bound (``RenderCache(max_bytes=...)``, ``Windows(...,
max_bytes=...)``) keeps that one. The defaults keep a worker that serves many
sessions at a plateau of a few tens of MB of cache; a worker that returns to
many large sessions often (and has the memory) may raise them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from ..errors import ArgumentError


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """Byte bounds of the process's caches (each an estimate of what its entries hold)."""

    #: The render cache (``assembly.render_cache.RENDERS`` and any ``RenderCache`` made
    #: without ``max_bytes``): session tables, and an eighth more for the region tables.
    render_bytes: int = 16 << 20
    #: A worker's session windows (``runtime.windows.Windows``): per session, the item rows
    #: and items of its recent seeds, their renders, and the last reference checkpoints.
    window_bytes: int = 32 << 20
    #: The ``trim_messages`` drop-in's memo of message counts, per backend. It never keeps a
    #: message alive (entries go with their message); this bounds the entries of live ones.
    trim_bytes: int = 16 << 20


DEFAULT_LIMITS = MemoryLimits()
_limits = DEFAULT_LIMITS
_listeners: list[Callable[[MemoryLimits], None]] = []


def memory_limits() -> MemoryLimits:
    """The bounds in force."""
    return _limits


def set_memory_limits(limits: MemoryLimits | None = None, **changes: int) -> MemoryLimits:
    """Set the process's cache bounds: ``limits`` (``None``: those in force) with ``changes``
    (field names of ``MemoryLimits``, in bytes). Returns the bounds now in force.

    Raises ``ArgumentError`` naming the field for an unknown name or a value that is not an
    int from 0 up (0 turns a cache off).
    """
    global _limits
    base = _limits if limits is None else limits
    if not isinstance(base, MemoryLimits):
        raise ArgumentError(
            "set_memory_limits", "limits", f"expected MemoryLimits, got {type(base).__name__}"
        )
    names = {f.name for f in fields(MemoryLimits)}
    for name in changes:
        if name not in names:
            raise ArgumentError(
                "set_memory_limits", name, f"not a bound; expected one of {', '.join(sorted(names))}"
            )
    new = replace(base, **changes)
    for f in fields(MemoryLimits):
        value = getattr(new, f.name)
        if type(value) is not int or value < 0:
            raise ArgumentError("set_memory_limits", f.name, f"expected an int of bytes >= 0, got {value!r}")
    _limits = new
    for listener in _listeners:
        listener(new)
    return new


def on_memory_limits(listener: Callable[[MemoryLimits], None]) -> None:
    """Call ``listener(limits)`` now and whenever the bounds change (for caches that are told
    rather than read them)."""
    _listeners.append(listener)
    listener(_limits)


__all__ = ["DEFAULT_LIMITS", "MemoryLimits", "memory_limits", "on_memory_limits", "set_memory_limits"]
