"""The token estimator port, constructed on the active backend.

``TokenEstimator(...)`` returns the active backend's estimator (Rust or
reference); both satisfy ``Estimator`` and give identical numbers (ADR 0001).
``isinstance(x, TokenEstimator)`` is true for either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from . import backends


@runtime_checkable
class Estimator(Protocol):
    def raw(self, value: object, model_id: str) -> int: ...
    def raw_estimates(self, items: Sequence[object], model_id: str) -> list[int]: ...
    def counter_id(self, model_id: str, kind: str) -> str: ...
    def prime(self, model_id: str, kind: str, digests: Iterable[bytes], raws: Iterable[int]) -> None: ...
    def corrected(self, raw_sum: int, model_id: str) -> int: ...
    def estimate(self, items: Iterable[object], model_id: str) -> int: ...
    def estimate_text(self, text: str, model_id: str) -> int: ...
    def estimate_tools(self, tools: Iterable[object], model_id: str) -> int: ...
    def reconcile(self, model_id: str, estimated: int, actual: int) -> None: ...
    def counting_method(self, model_id: str) -> str: ...
    def correction(self, model_id: str) -> float: ...
    def error_ratio(self, model_id: str) -> float: ...
    def snapshot(self, max_version: int = ...) -> dict[str, Any]: ...
    def memo_stats(self) -> dict[str, int]: ...


class _EstimatorFactory(type):
    def __call__(
        cls,
        *,
        bytes_per_token: float = 3.0,
        framing_tokens: int = 4,
        profiles: Mapping[str, tuple[float, int]] | None = None,
        memo_capacity: int = 100_000,
        encodings: Mapping[str, str] | None = None,
    ) -> Estimator:
        made: Estimator = backends.active().TokenEstimator(
            bytes_per_token=bytes_per_token,
            framing_tokens=framing_tokens,
            profiles=dict(profiles) if profiles else None,
            memo_capacity=memo_capacity,
            encodings=dict(encodings) if encodings else None,
        )
        return made

    def __instancecheck__(cls, obj: object) -> bool:
        return any(isinstance(obj, backends.module(name).TokenEstimator) for name in _built_backends())


def _built_backends() -> list[str]:
    names = []
    for name in backends.BACKENDS:
        try:
            backends.module(name)
        except Exception:
            continue
        names.append(name)
    return names


class TokenEstimator(metaclass=_EstimatorFactory):
    """Per-model token counts with a raw-count memo (SPEC section 3): exact for public
    encodings, the calibrated byte heuristic elsewhere (ADR 0012)."""

    @staticmethod
    def restore(snapshot: Mapping[str, Any]) -> Estimator:
        """A new estimator on the active backend with ``snapshot``'s correction factors."""
        made: Estimator = backends.active().TokenEstimator.restore(dict(snapshot))
        return made


#: (backend, encoding) pairs whose tables this process has built.
_LOADED: set[tuple[str, str]] = set()


async def load_tables(estimator: object, model_id: str) -> None:
    """Build the tables ``estimator`` counts ``model_id`` with exactly, on a worker thread,
    once per process, backend and encoding. Otherwise the first exact count builds them on
    the caller's thread (o200k: 38 ms on the Rust backend, 340 ms on the reference), which
    in a coroutine blocks the event loop (issue 40). The Rust build releases the GIL; the
    reference's is Python that yields it at the interpreter's switch interval. Nothing for
    the heuristic, or an estimator of neither backend."""
    # The active backend's first: asking the other would import it (the reference: 10 ms).
    name = backends.backend()
    module = backends.active()
    if not isinstance(estimator, module.TokenEstimator):
        name = "python" if name == "rust" else "rust"
        module = backends.native() if name == "rust" else backends.module("python")
        if module is None or not isinstance(estimator, module.TokenEstimator):
            return
    method = estimator.counting_method(model_id)
    if method == "heuristic" or (name, method) in _LOADED:
        return
    await asyncio.to_thread(module.load_encoding, method)
    _LOADED.add((name, method))


__all__ = ["Estimator", "TokenEstimator", "load_tables"]
