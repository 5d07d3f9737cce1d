"""Benchmarks run as smoke tests in `make test` (--benchmark-disable) and for real in `make bench`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import ctxengine as ce
from ctxengine.core import backends


@pytest.fixture(params=backends.BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each backend in turn, the previous one restored after."""
    previous = backends.backend()
    ce.use_backend(request.param)
    yield request.param
    ce.use_backend(previous)
