"""The active backend and each backend's module.

``ctxengine._core`` and ``ctxengine.reference`` are the two backends; the
switch lives in the core layer (``ctxengine.core.backends`` in the layered
package, ``ctxengine.backends`` before it), looked up here by name so this
package imports only layers below it in either layout.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

BACKENDS = ("rust", "python")
_MODULES = {"rust": "ctxengine._core", "python": "ctxengine.reference"}
_SWITCH_PATHS = ("ctxengine.core.backends", "ctxengine.backends")
_switch: ModuleType | None = None


def _backends() -> Any:
    global _switch
    if _switch is None:
        for path in _SWITCH_PATHS:
            try:
                _switch = importlib.import_module(path)
                break
            except ImportError:
                continue
        else:  # pragma: no cover - one of the two always exists
            raise ImportError("ctxengine's backend switch is not importable")
    return _switch


def active_name() -> str:
    """The active backend's name (``ctxengine.backend()``)."""
    name: str = _backends().backend()
    return name


def use(name: str) -> None:
    """Select the backend for this process (``ctxengine.use_backend()``)."""
    _backends().use_backend(name)


def module(name: str) -> Any:
    """The backend module ``name`` names, whichever is active."""
    return importlib.import_module(_MODULES[name])


__all__ = ["BACKENDS", "active_name", "module", "use"]
