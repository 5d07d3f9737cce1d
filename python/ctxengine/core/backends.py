"""The backend switch: ``rust`` (``ctxengine._core``) or ``python`` (``ctxengine.reference``).

Both modules implement the contract of ``adr/0001-two-backends-one-contract.md``
with byte-identical results. ``CTXENGINE_BACKEND`` picks the default;
``use_backend()`` changes it for the process.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, Protocol, cast

from ..errors import BackendError

BACKENDS = ("rust", "python")
_MODULES = {"rust": "ctxengine._core", "python": "ctxengine.reference"}


class Backend(Protocol):
    """What both backend modules export (see ADR 0001)."""

    TokenEstimator: Any

    def canonical_json(self, value: object) -> bytes: ...
    def payload_hash(self, value: object) -> str: ...
    def item_canonical(self, item: object) -> tuple[bytes, bytes]: ...
    def allocate_tokens(
        self,
        context_window: int,
        max_output_tokens: int,
        default_output_reserve: int,
        prefix_tokens: int,
        reserve_tokens: int,
        margin_ratio: float,
        tool_results_ratio: float,
        working_state_tokens: int,
        history_floor: int,
        prefix_ceiling: int,
    ) -> tuple[int, int, int, int, int]: ...
    def select_history(
        self,
        items: Any,
        summary_floor: int,
        history_tokens: int,
        estimator: Any,
        model_id: str,
        raw: Any = None,
    ) -> int: ...
    def render_measure(
        self, items: Any, region_class: str, render: Any, estimator: Any, model_id: str
    ) -> tuple[list[Any], list[int]]: ...
    def digest_list(self, values: Any) -> str: ...
    def fit_body(self, *args: Any) -> tuple[list[Any], int, str, bool, int, int, list[str], str]: ...
    def validate_tool_pairs(self, items: Any) -> None: ...
    def count_tokens(self, encoding_name: str, text: str) -> int: ...
    def encode_tokens(self, encoding_name: str, text: str) -> list[int]: ...
    def exact_raw(self, encoding_name: str, kind: str, canonical: bytes) -> int: ...
    def counting_method(self, model_id: str, table: Any = None) -> str: ...
    def encoding_ranks_sha256(self, encoding_name: str) -> str: ...


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


__all__ = ["BACKENDS", "Backend", "active", "backend", "module", "use_backend"]
