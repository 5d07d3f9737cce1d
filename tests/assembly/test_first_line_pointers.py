"""A first line's pointer renders (ADR 0028): the seed canonicalizes them in slices only when
they are many (more than ``SLICE_ITEMS``, the rule their counts follow); a few are left to a
fit that elides their results, so a first request under budget does not canonicalize a
pointer it never measures. Both ways the line's tables and the pointers' bytes are the same."""

from __future__ import annotations

from typing import Any

import pytest

from builder_fixtures import session
from ctxengine.assembly.render import render_pointer
from ctxengine.assembly.render_cache import RenderCache
from ctxengine.assembly.session_renders import SessionRenders
from ctxengine.core import backends
from ctxengine.core.slices import SLICE_ITEMS, finish
from ctxengine.model import ToolResult


def first_line(history: list[Any]) -> SessionRenders:
    tables = SessionRenders()
    finish(RenderCache().history_steps(tables, tuple(history)))
    return tables


@pytest.mark.parametrize(("results", "made"), [(3, False), (SLICE_ITEMS + 1, True)])
def test_a_first_lines_pointers_are_canonicalized_ahead_only_when_many(
    backend: str, results: int, made: bool
) -> None:
    history = session(results, result_size=40)
    tables = first_line(history)
    pointers = list(tables.pointers.values())
    assert len(pointers) == results
    assert all((p._cj is not None) is made for p in pointers)
    # Made now or later, the bytes are the same as a pointer rendered on its own.
    by_result = [render_pointer(item) for item in history if isinstance(item, ToolResult)]
    active = backends.active()
    assert [active.item_canonical(p) for p in pointers] == [active.item_canonical(p) for p in by_result]
