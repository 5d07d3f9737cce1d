"""A reference checkpoint whose conversation grew at its end is folded from where the session
window's last write left it (issue 13, ADR 0016); the payloads are the ones written from scratch."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxengine.cli.turns import ScriptedWorker
from ctxengine.model.clock import FixedClock
from ctxengine.runtime import checkpoint_refs as refs
from sessionkit import SMALL
from storekit import StoreCase

SID = "memo"
CLOCK = datetime(2026, 11, 30, 9, tzinfo=UTC)


def _rows(case: StoreCase) -> list[tuple[Any, ...]]:
    """Every checkpoint row as stored: run, version, kind, trigger, payload text."""
    sql = "SELECT run_id, version, kind, trigger, payload FROM ctxengine_checkpoints ORDER BY run_id, version"
    if case.sqlite_path is not None:
        with sqlite3.connect(case.sqlite_path) as conn:
            return list(conn.execute(sql))
    assert case.postgres_dsn is not None
    with psycopg.connect(case.postgres_dsn) as pg:
        return list(pg.execute(sql))


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_checkpoints_written_with_the_memo_are_the_ones_written_without(
    kind: str, store_case_factory: Callable[[str], StoreCase]
) -> None:
    cases = [store_case_factory(kind) for _ in range(2)]
    stores = [await case.open(FixedClock(CLOCK)) for case in cases]
    try:
        with_memo, without = (ScriptedWorker(store, model=SMALL, tool_every=1) for store in stores)
        without.loop.writes.fold_refs = False  # every write from scratch
        without.loop.prune_finished = with_memo.loop.prune_finished = False  # keep every version
        compactions = 0
        for turn in range(1, 31):
            compactions += (await with_memo.turn(SID, turn)).compactions
            await without.turn(SID, turn)
        assert compactions > 0  # conversations that did not grow at their end were written too
        written = _rows(cases[0])
        assert written == _rows(cases[1])
        assert len(written) > 90 and sum(row[2] == "delta" for row in written) >= 30
    finally:
        for store in stores:
            await store.close()


entries = st.lists(st.one_of(st.integers(1, 40), st.just({"kind": "user", "text": "x"})), max_size=30)


@given(entries, st.integers(0, 30))
def test_folding_after_a_prefix_is_folding_the_whole(values: list[refs.Entry], at: int) -> None:
    head = refs.to_segments(values[:at])
    assert refs.to_segments(values[at:], head) == refs.to_segments(values)
    assert refs.to_segments(values[:at]) == head  # the prefix's segments are not changed


@given(entries, entries)
def test_a_delta_keeps_the_longest_common_prefix(old: list[refs.Entry], new: list[refs.Entry]) -> None:
    base = {"version": 1, "conversation": old}
    delta = refs.diff_entries(base, {"version": 2}, new)
    keep = delta["conversation"]["keep"]
    assert old[:keep] == new[:keep]
    assert keep == min(len(old), len(new)) or old[keep] != new[keep]
    assert refs.apply_ref_delta("r", 2, base, delta)["conversation"] == new


@st.composite
def logs(draw: st.DrawFn) -> tuple[list[int], list[refs.Entry]]:
    """A log's item sequences (other events between them) and a conversation of some of
    them, in order, with inline items."""
    kinds = draw(st.lists(st.sampled_from(["item", "item", "item", "other"]), max_size=40))
    items = [i + 1 for i, kind in enumerate(kinds) if kind == "item"]
    chosen = [s for s in items if draw(st.integers(0, 4))]
    out: list[refs.Entry] = []
    for s in chosen:
        if draw(st.integers(0, 9)) == 0:
            out.append({"kind": "user", "text": "inline"})
        out.append(s)
    return items, out


def spans_of(items: list[int], segments: list[object]) -> dict[tuple[int, int], list[int]]:
    """What ``read_spans`` reads for each span of ``segments`` from a log of ``items``."""
    return {
        (s[0], s[1]): [i for i in items if s[0] <= i <= s[1]]
        for s in segments
        if isinstance(s, list) and len(s) == 3
    }


@given(logs(), st.integers(0, 40))
def test_spans_read_back_as_the_entries_and_fold_after_a_prefix_as_a_whole(
    log: tuple[list[int], list[refs.Entry]], at: int
) -> None:
    items, values = log
    whole = refs.to_segments(values, items=items)
    assert refs.from_segments("r", 1, whole, spans_of(items, whole)) == values
    head = refs.to_segments(values[:at], items=items)
    assert refs.to_segments(values[at:], head, items) == whole
    assert refs.to_segments(values[:at], items=items) == head
    # Every run of items consecutive in the log is one segment; without the log, one per range.
    runs = sum(1 for i, v in enumerate(values) if isinstance(v, int) and not _continues(items, values, i))
    assert len([s for s in whole if isinstance(s, list)]) == runs
    assert refs.from_segments("r", 1, refs.to_segments(values), None) == values


def _continues(items: list[int], values: list[refs.Entry], i: int) -> bool:
    """Whether entry ``i`` follows entry ``i - 1`` in the log's items."""
    if i == 0 or not isinstance(values[i - 1], int):
        return False
    prev = values[i - 1]
    return items.index(values[i]) == items.index(prev) + 1  # type: ignore[arg-type]
