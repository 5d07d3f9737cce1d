"""Shared fixtures: the behavioural suite runs under both backends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import ctxengine
from ctxengine.core import backends


@pytest.fixture(params=backends.BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test once per backend; the active backend is restored afterwards."""
    previous = backends.backend()
    ctxengine.use_backend(request.param)
    try:
        yield request.param
    finally:
        ctxengine.use_backend(previous)
