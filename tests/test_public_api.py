"""The public face (ADR 0006): ``__all__`` holds the SPEC's names, every error among them."""

from __future__ import annotations

import inspect

import ctxengine
from ctxengine import errors

# Public before the layout but not SPEC names: importable, not star-exported.
NOT_STARRED = (
    "Estimator",
    "RenderedItem",
    "ToolDecision",
    "check_prefix_class",
    "item_from_dict",
    "__version__",
)
# Errors the engine raises and catches itself (issue 36): in ``errors``, never in the public face.
INTERNAL_ERRORS = frozenset({"StorePredictionMissed"})


def test_every_name_in_all_resolves_once() -> None:
    assert len(ctxengine.__all__) == len(set(ctxengine.__all__))
    missing = [name for name in ctxengine.__all__ if not hasattr(ctxengine, name)]
    assert missing == []
    namespace: dict[str, object] = {}
    exec("from ctxengine import *", namespace)
    assert set(ctxengine.__all__) <= set(namespace)


def test_every_error_is_listed_in_errors_and_exported() -> None:
    classes = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == errors.__name__
    }
    assert classes == set(errors.__all__)
    assert all(issubclass(getattr(errors, name), errors.ContextError) for name in classes)
    assert set(errors.__all__) - INTERNAL_ERRORS <= set(ctxengine.__all__)
    assert not INTERNAL_ERRORS & set(ctxengine.__all__)
    assert not any(hasattr(store, "predicted") for store in (ctxengine.SQLiteStore, ctxengine.PostgresStore))


def test_names_that_left_all_stay_importable() -> None:
    for name in NOT_STARRED:
        assert hasattr(ctxengine, name) and name not in ctxengine.__all__, name
