"""What a user without an extra, or without the built extension, meets (issue 40): the
PostgreSQL driver only with a PostgreSQL store, plain output without rich, and the reference
backend with one warning when ``ctxengine._core`` does not import."""

from __future__ import annotations

import json
from pathlib import Path

from hidden_imports import run_without

OPTIONAL = ("psycopg", "psycopg_pool", "psycopg_binary", "rich", "opentelemetry")


def test_import_ctxengine_loads_no_driver_and_no_optional_package() -> None:
    done = run_without(
        (),
        "import sys, json, ctxengine\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {OPTIONAL!r})))",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_without_the_postgres_extra_sqlite_runs_and_postgresql_names_the_extra() -> None:
    code = """
import asyncio, ctxengine as ce
from ctxengine.errors import StoreOpenError

async def main():
    store = await ce.open_store("sqlite:///:memory:")
    await ce.append_item(store, "s", ce.UserMessage("hi"), principal=ce.Principal("u", "t", frozenset()))
    print("sqlite", len(await store.events.read("s")))
    await store.close()
    try:
        await ce.open_store("postgresql://nobody@127.0.0.1:1/none")
    except StoreOpenError as exc:
        print("open:", exc)
    try:
        ce.PostgresStore
    except StoreOpenError as exc:
        print("attribute:", exc)

asyncio.run(main())
"""
    done = run_without(("psycopg", "psycopg_pool"), code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "sqlite 1"
    assert [line.split(":")[0] for line in lines[1:]] == ["open", "attribute"]
    assert all("pip install 'ctxengine[postgres]'" in line for line in lines[1:])


def test_without_rich_the_cli_prints_plain_tables(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    code = f"""
import sys
from ctxengine.cli import main
assert main(["demo", "--turns", "2", "--store", {url!r}, "--session", "plain"]) == 0
assert main(["inspect", "--store", {url!r}, "plain"]) == 0
assert "rich" not in sys.modules
"""
    done = run_without(("rich",), code)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for title in ("Budget use per turn", "Invariants", "Plan (current epoch)", "Events ("):
        assert title in out
    assert "All invariants held." in out and "\x1b" not in out
    assert "[bold" not in out and "[/" not in out  # the commands' own markup is dropped
    header = next(line for line in out.splitlines() if line.startswith("type"))
    assert header.split() == ["type", "count"]


BACKEND_PROBE = """
import warnings
warnings.simplefilter("always")
import ctxengine as ce
from ctxengine.core import backends
print(ce.backend())
print(repr(ce.payload_hash({"a": [1, 2], "b": "\u00e9"})))
print(ce.backend(), backends.fallback_reason() is not None)
"""


def test_without_the_extension_the_reference_backend_runs_with_one_warning() -> None:
    hidden = run_without(("ctxengine._core",), BACKEND_PROBE)
    assert hidden.returncode == 0, hidden.stderr
    assert hidden.stdout.splitlines()[0] == "python"
    assert hidden.stdout.splitlines()[2] == "python True"
    assert hidden.stderr.count("BackendFallbackWarning") == 1, hidden.stderr
    assert "CTXENGINE_BACKEND=python" in hidden.stderr
    # The same digest as the extension computes, and no warning where it imports.
    built = run_without((), BACKEND_PROBE)
    assert built.returncode == 0, built.stderr
    assert built.stdout.splitlines()[0] == "rust" and "Warning" not in built.stderr
    assert built.stdout.splitlines()[1] == hidden.stdout.splitlines()[1]
    assert built.stdout.splitlines()[2] == "rust False"


def test_a_backend_asked_for_by_name_does_not_fall_back() -> None:
    code = """
import ctxengine as ce
from ctxengine.errors import BackendError
try:
    ce.backend()
except BackendError as exc:
    print("BackendError:", exc)
"""
    done = run_without(("ctxengine._core",), code, env={"CTXENGINE_BACKEND": "rust"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("BackendError: backend 'rust' is not importable")
    assert "Warning" not in done.stderr
    chosen = run_without(
        ("ctxengine._core",),
        "import ctxengine as ce; print(ce.backend())",
        env={"CTXENGINE_BACKEND": "python"},
    )
    assert chosen.stdout.strip() == "python" and "Warning" not in chosen.stderr
