"""Fixtures of the phase-projection tests: a fresh memory store and controller, under both backends.

Modules that define fixtures of the same names keep their own (a module's fixture wins).
"""

from __future__ import annotations

import pytest

from ctxengine.phases import ProtocolController
from ctxengine.stores import MemoryStore


@pytest.fixture(autouse=True)
def _every_backend(backend: str) -> str:
    """The behavioural suite runs under both backends (``backend`` is parametrized)."""
    return backend


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def ctl(store: MemoryStore) -> ProtocolController:
    return ProtocolController(store)
