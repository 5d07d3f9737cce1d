"""Region B's fit as one typed contract of the backend seam (ADR 0001, issue 12).

The values only (both backends and the builder read them); the call is
``ctxengine.core.body.fit_body``.

The builder renders everything before the call and hands the backend data:
``BodyInputs`` (the history, its renders and tool-result pointers in tables
keyed by item digest, and every other Region-B class as a ``BodyBlock`` in
body order) and ``BodyLimits``. The backend measures, caps, yields and cuts,
and returns a ``BodyFit``: the body in the region table's order, its numbers
and its yield steps. No callback runs: a render the tables lack comes back
in ``BodyFit["missing"]`` (history indices), for the caller to render and
call again.

``BodyInputs.line`` (optional) carries a history line's renders in history
order, which the builder extends build by build: where ``history[i] is
line.items[i]`` and the line holds a render (and, for a tool result, its
pointer), that entry is used and the tables are not read for the item. It
saves a digest-keyed lookup per item; the tables stay the fallback, so a
stale or short line only costs speed. ``RenderLine.state`` is the line's own
memory of what fits read of it (on the Rust backend a ``_core.LineState``
made by ``ctxengine.core.backends.line_state()``; ``None`` elsewhere): the
line's owner keeps it with the line, counts its ``nbytes`` and ``clear()``s
it when it starts the line again. It only ever changes speed: a backend
ignores a state that is not its own.

How each kind of block enters the fit:

- ``summary``: the compacted summary; over the window it makes the body
  ``body_exceeds_context_window`` (compactable as ``summary_compactable``).
- ``history``: marks where the history goes; tool results truncate to their
  pointers, then the history is cut.
- ``working_state`` / ``skills``: never yield; over their caps (``max_tokens``;
  ``max_items`` for skills) they name the pressure reason.
- ``passages``: one item per passage (``ids`` name them), best first; the
  last ones drop, whole, over the caps and then under pressure.
- ``lines``: ``items[k - 1]`` is the block of the first ``k`` lines; lines
  drop from the end over the cap and then under pressure.
- ``fixed`` / ``turn``: never yield.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypedDict

BLOCK_KINDS = ("summary", "history", "working_state", "skills", "passages", "lines", "fixed", "turn")


# Named tuples: immutable, named fields, and cheap enough to build on every
# turn (a frozen dataclass costs several times as much to construct).


class BodyBlock(NamedTuple):
    """One Region-B class's rendered items and caps."""

    region_class: str
    kind: str
    items: tuple[Any, ...] = ()
    ids: tuple[str, ...] = ()
    max_items: int | None = None
    max_tokens: int | None = None


class BodyLimits(NamedTuple):
    """The absolute numbers of the fit (tokens, corrected)."""

    usable: int
    history_cap: int
    tool_cap: int
    summary_floor: int | None = None
    summary_compactable: bool = True


class RenderLine(NamedTuple):
    """A history line's renders in history order: ``renders[i]`` and ``pointers[i]``
    (``None``: not held) of the item ``items[i]``; three sequences of one length, and
    the fit's opaque ``state`` of the line (``backends.line_state()``)."""

    items: Sequence[Any]
    renders: Sequence[Any]
    pointers: Sequence[Any]
    state: Any = None


class BodyInputs(NamedTuple):
    """Everything the fit reads, rendered."""

    history: tuple[Any, ...]
    renders: Mapping[bytes, Any]
    pointers: Mapping[bytes, Any]
    blocks: tuple[BodyBlock, ...]
    line: RenderLine | None = None


class BodyFit(TypedDict):
    """What the fit decided; ``missing`` non-empty means nothing else is set."""

    body: list[Any]
    body_raw: int
    reason: str
    compactable: bool
    cut: int
    history_budget: int
    yield_steps: list[str]
    body_sha256: str
    missing: list[int]


__all__ = ["BLOCK_KINDS", "BodyBlock", "BodyFit", "BodyInputs", "BodyLimits", "RenderLine"]
