"""How ContextLoop's collaborators must agree (issue 12: one compaction depth limit)."""

from __future__ import annotations

import pytest

import ctxengine as ce
from ctxengine.assembly.builder import ContextBuilder
from ctxengine.errors import ModelValidationError
from ctxengine.plan import ContextPlanner
from ctxengine.runtime.compaction import StructuredCompactor
from ctxengine.runtime.loop import ContextLoop
from ctxengine.stores import MemoryStore


def _loop(builder_depth: int | None, compactor_depth: int | None) -> ContextLoop:
    store = MemoryStore()
    estimator = ce.TokenEstimator()
    planner = ContextPlanner(store, estimator=estimator)
    builder = (
        ContextBuilder(planner)
        if builder_depth is None
        else ContextBuilder(planner, max_compaction_depth=builder_depth)
    )
    compactor = (
        StructuredCompactor(estimator)
        if compactor_depth is None
        else StructuredCompactor(estimator, max_depth=compactor_depth)
    )
    return ContextLoop(store, planner=planner, builder=builder, compactor=compactor, estimator=estimator)


def test_defaults_agree() -> None:
    loop = _loop(None, None)
    assert loop.builder.max_compaction_depth == loop.compactor.max_depth == 2


def test_one_limit_configured_on_both_is_accepted() -> None:
    loop = _loop(3, 3)
    assert loop.builder.max_compaction_depth == loop.compactor.max_depth == 3


@pytest.mark.parametrize(("builder_depth", "compactor_depth"), [(None, 3), (3, None), (1, 2)])
def test_a_builder_and_compactor_with_different_limits_are_refused(
    builder_depth: int | None, compactor_depth: int | None
) -> None:
    refused = r"ContextLoop\.compactor: max_depth .* max_compaction_depth"
    with pytest.raises(ModelValidationError, match=refused):
        _loop(builder_depth, compactor_depth)
