"""Benchmarks run as smoke tests in `make test` (--benchmark-disable) and for real in `make bench`."""

from __future__ import annotations

import asyncio
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


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop of the bench's own, for benches that time async calls one by one."""
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()
