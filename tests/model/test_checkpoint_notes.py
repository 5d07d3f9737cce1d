"""``Checkpoint.notes``: a checkpoint without notes keeps the bytes it had
before the field existed (``checkpoint_at_main.json`` was written by the code
at main 1e7262f, before notes); notes round-trip, are checked, and a delta
clears them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ctxengine as ce
from ctxengine.errors import ModelValidationError
from ctxengine.model import Checkpoint
from ctxengine.runtime.checkpoints import FULL_FORMAT, diff, materialize

AT_MAIN = json.loads((Path(__file__).parent / "checkpoint_at_main.json").read_text())


def test_checkpoints_without_notes_keep_their_bytes(backend: str) -> None:
    cp = Checkpoint.from_dict(AT_MAIN["checkpoint"])
    assert cp.notes == ()
    assert ce.canonical_json(cp.to_dict()).decode() == AT_MAIN["canonical"]
    assert ce.payload_hash(cp.to_dict()) == AT_MAIN["payload_hash"]
    assert ce.canonical_json(Checkpoint("run-0").to_dict()).decode() == AT_MAIN["empty_canonical"]


def test_notes_round_trip() -> None:
    cp = Checkpoint.from_dict({**AT_MAIN["checkpoint"], "notes": ["a", "b"]})
    assert cp.notes == ("a", "b")
    assert cp.to_dict()["notes"] == ["a", "b"]
    assert Checkpoint.from_dict(cp.to_dict()) == cp
    assert "notes" not in replace(cp, notes=()).to_dict()


@pytest.mark.parametrize(("notes", "field"), [(("a", 1), "notes[1]"), ("abc", "notes"), ([None], "notes[0]")])
def test_notes_are_checked(notes: Any, field: str) -> None:
    with pytest.raises(ModelValidationError) as info:
        Checkpoint("r", notes=notes)
    assert field in str(info.value)


def test_a_delta_clears_notes() -> None:
    with_notes = replace(Checkpoint("r", version=1), notes=("keep this",)).to_dict()
    without = Checkpoint("r", version=2).to_dict()
    again = replace(Checkpoint("r", version=3), notes=("new",)).to_dict()
    rows = [{"version": 1, "kind": "full", "payload": {"format": FULL_FORMAT, "checkpoint": with_notes}}]
    rows.append({"version": 2, "kind": "delta", "payload": diff(with_notes, without)})
    rows.append({"version": 3, "kind": "delta", "payload": diff(without, again)})
    assert materialize("r", rows[:2]) == without
    assert materialize("r", rows) == again
