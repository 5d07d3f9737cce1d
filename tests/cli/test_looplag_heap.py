"""The loop-lag probe's census of the collector's objects (``cli.looplag.Heap``): how many
each measured call added to what the collector tracks (issue 37, finding 9; ADR 0028)."""

from __future__ import annotations

import gc

from ctxengine.cli.looplag import Heap


def test_the_census_counts_what_a_call_added_and_what_it_let_go() -> None:
    gc.collect()  # no garbage of earlier tests for a pass meanwhile to free
    heap = Heap()
    heap.start()
    kept = [[i] for i in range(1000)]  # 1,001 tracked lists
    heap.saw("call")
    assert 1001 <= heap.added["call"] < 1100
    del kept
    heap.saw("next")
    assert -1100 < heap.added["next"] <= -1001
    assert heap.counts["next"] == heap.counts["before"] + heap.added["call"] + heap.added["next"]
    assert heap.figures() == {"tracked": heap.counts, "added": heap.added}
