"""Golden canonical vectors (issue 10): the canonical bytes of every value type never change.

``tests/golden/vectors.json`` holds, for each value type in several shapes,
its ``to_dict()`` form, canonical JSON and SHA-256, recorded once by
``tests/golden/generate.py``. A change here means stored payloads, idempotency
keys and request hashes would change under users' feet: it needs a new format
version and an ADR, never a regenerated vector.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.core.budget import ContextBudget
from ctxengine.model import ElidedSpan, KnowledgePassage, SkillBody, StateEntry, Task

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
import goldenkit

TYPES: dict[str, Any] = {
    "TextPart": ce.TextPart,
    "FileRef": ce.FileRef,
    "SystemMessage": ce.SystemMessage,
    "UserMessage": ce.UserMessage,
    "AssistantMessage": ce.AssistantMessage,
    "ToolCall": ce.ToolCall,
    "ToolResult": ce.ToolResult,
    "ReasoningItem": ce.ReasoningItem,
    "ToolSpec": ce.ToolSpec,
    "ResolvedModel": ce.ResolvedModel,
    "AgentSpec": ce.AgentSpec,
    "Principal": ce.Principal,
    "RunContext": ce.RunContext,
    "StateEntry": StateEntry,
    "Task": Task,
    "WorkingState": ce.WorkingState,
    "ElidedSpan": ElidedSpan,
    "KnowledgePassage": KnowledgePassage,
    "SkillBody": SkillBody,
    "Checkpoint": ce.Checkpoint,
    "ContextBudget": ContextBudget,
}
VECTORS: list[dict[str, Any]] = goldenkit.load_json("vectors.json")


def test_every_value_type_has_vectors() -> None:
    assert {v["type"] for v in VECTORS} == {*TYPES, "json"}


@pytest.mark.parametrize("vector", VECTORS, ids=[f"{i}-{v['type']}" for i, v in enumerate(VECTORS)])
def test_canonical_bytes_and_digest_never_change(vector: dict[str, Any], backend: str) -> None:
    want = vector["canonical"].encode("utf-8")
    if vector["type"] == "json":
        value: Any = vector["dict"]
    else:
        value = TYPES[vector["type"]].from_dict(vector["dict"])
        assert ce.canonical_json(value.to_dict()) == want
    assert ce.canonical_json(value) == want
    assert ce.payload_hash(value) == vector["sha256"] == goldenkit.sha(want)


def test_the_estimator_snapshot_restores(backend: str) -> None:
    snapshot = goldenkit.load_json("estimator-snapshot.json")
    estimator = ce.TokenEstimator.restore(snapshot)
    estimated, actual = snapshot["corrections"]["scripted:fake-32k"]
    assert estimator.correction("scripted:fake-32k") == max(1.0, actual / estimated)
    # The correction applies in exact integers: ceil(raw * A / E) when A > E.
    for raw in (1, 999, 27_904):
        assert estimator.corrected(raw, "scripted:fake-32k") == -(-raw * actual // estimated)
        assert estimator.corrected(raw, "other:model") == raw
