"""The active backend and each backend's module, reached through paths that stay put
(``ctxengine.backend()``, ``ctxengine._core``, ``ctxengine.reference``)."""

from __future__ import annotations

import importlib
from typing import Any

BACKENDS = ("rust", "python")
_MODULES = {"rust": "ctxengine._core", "python": "ctxengine.reference"}


def active_name() -> str:
    """The active backend's name (``ctxengine.backend()``)."""
    import ctxengine

    return ctxengine.backend()


def use(name: str) -> None:
    import ctxengine

    ctxengine.use_backend(name)


def module(name: str) -> Any:
    """The backend module ``name`` names, whichever is active."""
    return importlib.import_module(_MODULES[name])


__all__ = ["BACKENDS", "active_name", "module", "use"]
