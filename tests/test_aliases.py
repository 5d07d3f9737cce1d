"""The layer layout moved modules (ADR 0006); their old paths keep working for one release.

``pre_layout_names.json`` lists, for every module of the flat package before
the move, the public names it defined (and the names ``ctxengine`` itself
exposed). Each must still resolve through the old path, to the same object
as through the new one, and an old module path warns exactly once.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import warnings
from pathlib import Path

import pytest

import ctxengine
from ctxengine._aliases import MOVED

PRE_LAYOUT: dict[str, list[str]] = json.loads((Path(__file__).parent / "pre_layout_names.json").read_text())
# Modules that became packages under their old names (no alias, no warning).
KEPT = sorted(set(PRE_LAYOUT) - set(MOVED))


def _forget(old: str) -> None:
    """Make the next import of ``old`` go through the finder again."""
    sys.modules.pop(old, None)
    parent, _, child = old.rpartition(".")
    vars(sys.modules[parent]).pop(child, None)


def test_the_table_covers_every_module_that_left_the_top_folder() -> None:
    top = Path(ctxengine.__file__).parent
    for old in PRE_LAYOUT:
        name = old.removeprefix("ctxengine").lstrip(".")
        if not name:
            continue
        still_there = (top / f"{name}.py").exists() or (top / name / "__init__.py").exists()
        assert still_there or old in MOVED, f"{old} moved without an alias"
    for old, new in MOVED.items():
        assert not (top / f"{old.rpartition('.')[2]}.py").exists(), f"{old} is both a file and an alias"
        assert importlib.util.find_spec(new) is not None, new


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_imports_the_new_module_with_one_warning(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    _forget(old)
    with pytest.warns(DeprecationWarning, match=rf"^{old} is deprecated: it moved to {MOVED[old]}") as caught:
        module = importlib.import_module(old)
    assert len(caught) == 1
    assert module is new
    assert module.__name__ == MOVED[old]
    assert module.__spec__ is not None and module.__spec__.name == MOVED[old]
    # Once imported, the old path is cached: no second warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(old) is new
    for name in PRE_LAYOUT[old]:
        assert getattr(module, name) is getattr(new, name), f"{old}.{name}"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_from_import_and_attribute_access_through_an_old_path(old: str) -> None:
    _forget(old)
    short = old.removeprefix("ctxengine.")
    with pytest.warns(DeprecationWarning, match=rf"^{old} is deprecated"):
        module = getattr(ctxengine, short)
    assert module is importlib.import_module(MOVED[old])
    _forget(old)
    with pytest.warns(DeprecationWarning, match=rf"^{old} is deprecated"):
        exec(f"from ctxengine import {short} as module_", {})


@pytest.mark.parametrize("path", KEPT)
def test_packages_under_old_names_expose_the_old_names_without_warning(path: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module(path)
        missing = [name for name in PRE_LAYOUT[path] if not hasattr(module, name)]
    assert missing == []


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_module"):
        ctxengine.no_such_module  # noqa: B018
