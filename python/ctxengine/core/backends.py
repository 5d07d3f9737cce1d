"""The backend switch: ``rust`` (``ctxengine._core``) or ``python`` (``ctxengine.reference``).

Both modules implement the contract of ``adr/0001-two-backends-one-contract.md``
with byte-identical results. ``CTXENGINE_BACKEND`` picks the default;
``use_backend()`` changes it for the process. Asked for nothing, the process runs
``rust``, or ``python`` when the extension cannot be imported (an install without a
built wheel): one ``BackendFallbackWarning`` says so, and so do ``backend()`` and
``fallback_reason()``. A backend asked for by name that cannot load is ``BackendError``.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType
from typing import Any, TypeAlias, cast

from .. import errors
from ..errors import BackendError, BackendFallbackWarning

BACKENDS = ("rust", "python")
_MODULES = {"rust": "ctxengine._core", "python": "ctxengine.reference"}


# Either backend module. Their one typed description is ``ctxengine/_core.pyi``
# (the reference implements the same names); it is not copied here.
Backend: TypeAlias = Any


_active_name: str | None = None
_active: Backend | None = None
#: Why the default backend is ``python`` (the extension's import error), or None.
_fallback: str | None = None
#: The extension's import, tried once: the module, or the ImportError's text.
_native: ModuleType | str | None = None


def _load(name: str) -> Backend:
    if name not in _MODULES:
        raise BackendError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")
    try:
        module: ModuleType = importlib.import_module(_MODULES[name])
    except ImportError as exc:  # the extension was not built
        raise BackendError(f"backend {name!r} is not importable: {exc}") from exc
    return cast(Backend, module)


def native() -> ModuleType | None:
    """``ctxengine._core``, or ``None`` when the extension is not built (tried once)."""
    global _native
    if _native is None:
        try:
            import ctxengine._core as module
        except ImportError as exc:
            _native = str(exc) or type(exc).__name__
        else:
            _native = module
    return _native if isinstance(_native, ModuleType) else None


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
    global _active, _active_name, _fallback
    _active = _load(name)
    _active_name = name
    _fallback = None


def _use_default() -> None:
    """``rust``, or ``python`` with one warning when the extension does not import."""
    global _fallback
    if native() is not None:
        use_backend("rust")
        return
    reason = _native if isinstance(_native, str) else "not built"
    use_backend("python")
    _fallback = reason
    warnings.warn(
        f"ctxengine: the native extension (ctxengine._core) cannot be imported ({reason}); "
        "using the pure-Python reference backend: the same results, slower. Install a built "
        "wheel for the Rust backend, or set CTXENGINE_BACKEND=python to choose this one.",
        BackendFallbackWarning,
        stacklevel=3,
    )


def backend() -> str:
    """The name of the active backend: ``"rust"`` or ``"python"`` (also when ``python`` is the
    fallback of a process whose extension does not import: ``fallback_reason()``)."""
    active()
    assert _active_name is not None
    return _active_name


def fallback_reason() -> str | None:
    """Why the process runs ``python`` without having asked for it (the extension's import
    error), or ``None`` when the backend is the one asked for or the default ``rust``."""
    active()
    return _fallback


def active() -> Backend:
    """The active backend module (loaded from ``CTXENGINE_BACKEND`` on first use)."""
    if _active is None:
        requested = os.environ.get("CTXENGINE_BACKEND", "").strip().lower()
        if requested:
            use_backend(requested)
        else:
            _use_default()
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


__all__ = [
    "BACKENDS",
    "Backend",
    "active",
    "backend",
    "fallback_reason",
    "line_state",
    "module",
    "native",
    "use_backend",
]
