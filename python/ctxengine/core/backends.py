"""The backend switch: ``rust`` (``ctxengine._core``) or ``python`` (``ctxengine.reference``).

Both modules implement the contract of ``adr/0001-two-backends-one-contract.md``
with byte-identical results. ``CTXENGINE_BACKEND`` picks the default;
``use_backend()`` changes it for the process.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, TypeAlias, cast

from .. import errors
from ..errors import BackendError

BACKENDS = ("rust", "python")
_MODULES = {"rust": "ctxengine._core", "python": "ctxengine.reference"}


# Either backend module. Their one typed description is ``ctxengine/_core.pyi``
# (the reference implements the same names); it is not copied here.
Backend: TypeAlias = Any


_active_name: str | None = None
_active: Backend | None = None


def _load(name: str) -> Backend:
    if name not in _MODULES:
        raise BackendError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")
    try:
        module: ModuleType = importlib.import_module(_MODULES[name])
    except ImportError as exc:  # the extension was not built
        raise BackendError(f"backend {name!r} is not importable: {exc}") from exc
    return cast(Backend, module)


def native() -> ModuleType | None:
    """``ctxengine._core``, or ``None`` when the extension is not built."""
    try:
        import ctxengine._core as module
    except ImportError:
        return None
    return module


def _bind_native_errors() -> None:
    """Hand the native module the error classes it raises (it imports nothing
    from ``ctxengine``). Runs on import: ``import ctxengine._core`` imports
    the package, and so this module, first."""
    found = native()
    if found is not None:
        found.bind_errors(errors)


_bind_native_errors()


def use_backend(name: str) -> None:
    """Select the backend for this process: ``"rust"`` or ``"python"``."""
    global _active, _active_name
    _active = _load(name)
    _active_name = name


def backend() -> str:
    """The name of the active backend."""
    active()
    assert _active_name is not None
    return _active_name


def active() -> Backend:
    """The active backend module (loaded from ``CTXENGINE_BACKEND`` on first use)."""
    if _active is None:
        use_backend(os.environ.get("CTXENGINE_BACKEND", "rust").strip().lower() or "rust")
    assert _active is not None
    return _active


def module(name: str) -> Backend:
    """A specific backend, regardless of the active one (for differential checks)."""
    return _load(name)


def line_state() -> Any:
    """A new ``RenderLine.state`` for the active backend: a ``_core.LineState`` (what
    ``fit_body`` read of the line, kept for its next call: estimated size ``nbytes``, emptied
    by ``clear()``), or ``None`` on the reference backend, which keeps nothing."""
    found = active()
    state_type = getattr(found, "LineState", None)
    return None if state_type is None else state_type()


__all__ = ["BACKENDS", "Backend", "active", "backend", "line_state", "module", "native", "use_backend"]
