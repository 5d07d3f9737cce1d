"""The driver's own log lines stay in the ``logging`` tree (issue 40): an unreachable
PostgreSQL is the store's typed error, without the pool's "error connecting" lines on stderr;
an application that configures logging still receives them, and ctxengine's own loggers are
quiet by default."""

from __future__ import annotations

import socket

from hidden_imports import run_without

PROBE = """
import asyncio, logging, sys
import ctxengine as ce
if {configure}:
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="LOG %(name)s: %(message)s")

async def main():
    try:
        await ce.open_store("postgresql://nobody@127.0.0.1:{port}/none", timeout=1.0)
    except ce.StoreError as exc:
        print("raised", type(exc).__name__)

asyncio.run(main())
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_server_prints_only_the_typed_error() -> None:
    done = run_without((), PROBE.format(configure=False, port=_closed_port()))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "raised StoreUnavailable"
    assert done.stderr == ""


def test_configured_logging_still_receives_the_driver_lines() -> None:
    done = run_without((), PROBE.format(configure=True, port=_closed_port()))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("LOG psycopg.pool: error connecting") for line in lines), done.stdout
    assert lines[-1] == "raised StoreUnavailable" and done.stderr == ""


def test_ctxengine_logs_quietly_by_default() -> None:
    code = """
import logging, ctxengine
for layer in ("stores", "assembly", "runtime"):
    logging.getLogger(f"ctxengine.{layer}").warning("not shown without a handler")
print([type(h).__name__ for h in logging.getLogger("ctxengine").handlers])
"""
    done = run_without((), code)
    assert done.returncode == 0 and done.stdout.strip() == "['NullHandler']" and done.stderr == ""
