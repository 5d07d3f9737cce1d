"""Issue 37, finding 8: the CLI against hostile input (SQLite files; PostgreSQL and the store
open errors are in tests/integration/test_store_open_errors.py).

``inspect`` and ``migrate --dry-run`` open stores read-only: a mistyped path is an error
and no file, an older store is read as it is, a foreign database is refused untouched.
Model-written text is printed with its control characters made visible. A crafted file
whose statements never end (an infinite recursive view, a trigger that reads one) is
interrupted by the statement timeout. A NUL in a URL is a bad URL, and demo arguments
that cannot run are usage errors.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxengine.cli import main
from ctxengine.cli.bench_first import _env
from ctxengine.cli.demo import DemoConfig, check_config, minimum_window, run_demo
from ctxengine.cli.terminal import visible
from ctxengine.errors import ModelValidationError
from ctxengine.model import WorkingState
from ctxengine.runtime.loop import CONTEXT_COMPACTED
from ctxengine.runtime.working_state import WORKING_STATE_UPDATED, WorkingStateManager
from ctxengine.stores import migrations, open_store
from ctxengine.stores.events import NewEvent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
import goldenkit

GOLDEN_SESSION = "golden-demo"
GOLDEN_EVENTS = 427
#: A hang on the starting commit ends here as a failed test.
HANG = 120


def cli(*args: str, timeout: float = HANG) -> subprocess.CompletedProcess[str]:
    """``ctxengine`` in its own process (a hang is killed, a traceback is seen)."""
    return subprocess.run(
        [sys.executable, "-m", "ctxengine", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        check=False,
    )


def version_rows(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sorted(conn.execute("SELECT component, version FROM ctxengine_schema_version").fetchall())
    finally:
        conn.close()


def new_store(path: Path) -> None:
    async def create() -> None:
        store = await open_store(f"sqlite:///{path}")
        await store.close()

    asyncio.run(create())


INFINITE = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)"
#: ``ctxengine_events`` as a view that never ends (and never yields a row, so memory stays flat).
RUNAWAY_EVENTS = (
    f"CREATE VIEW ctxengine_events AS {INFINITE} SELECT 's' AS session_id, n AS sequence, 'x' AS type, "
    "'{}' AS payload, 'k' AS derivation_key, NULL AS run_id, 'a' AS actor, 'session' AS visibility_scope, "
    "NULL AS visibility_id, '' AS created_at, 1 AS schema_version FROM r WHERE n < 0"
)


def runaway_store(path: Path, revision: int) -> None:
    """A crafted store at ``revision`` whose ``ctxengine_events`` is an infinite recursive view."""
    new_store(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("DROP TABLE ctxengine_events")
        conn.execute(RUNAWAY_EVENTS)
        conn.execute(
            "UPDATE ctxengine_schema_version SET version = ? WHERE component = 'store.revision'", (revision,)
        )
    finally:
        conn.close()


# --------------------------------------------------------------------------
# inspect and migrate --dry-run are read-only


def test_inspect_of_a_mistyped_path_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "typo.db"
    done = cli("inspect", "--store", f"sqlite:///{typo}", "s")
    assert done.returncode == 2, done.stderr
    assert "StoreOpenError" in done.stderr and "no such file" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_inspect_reads_an_older_store_as_it_is_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = goldenkit.sqlite_copy(tmp_path)  # revision 1: every migration is pending
    path = Path(url[len("sqlite:///") :])
    before, rows = path.read_bytes(), version_rows(path)
    assert main(["inspect", "--store", url, GOLDEN_SESSION, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["events"] == GOLDEN_EVENTS and summary["plan"] is not None
    assert version_rows(path) == rows == [("store", 1)]  # from before revisions were tracked
    assert path.read_bytes() == before  # not migrated, not switched to WAL


def test_migrate_dry_run_creates_no_file(tmp_path: Path) -> None:
    missing = tmp_path / "new.db"
    done = cli("migrate", f"sqlite:///{missing}", "--dry-run")
    assert done.returncode == 2 and "StoreOpenError" in done.stderr, done.stderr
    assert "would apply" not in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_migrate_dry_run_refuses_a_foreign_database_untouched(tmp_path: Path) -> None:
    foreign = tmp_path / "app.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.commit()
    conn.close()
    before = foreign.read_bytes()
    for args in (
        ("migrate", f"sqlite:///{foreign}", "--dry-run"),
        ("inspect", "--store", f"sqlite:///{foreign}", "s"),
    ):
        done = cli(*args)
        assert done.returncode == 2, done
        assert "not a ctxengine store" in done.stderr and "would apply" not in done.stdout
    assert foreign.read_bytes() == before  # still in its own journal mode, no table added
    assert [p.name for p in tmp_path.iterdir()] == ["app.db"]
    conn = sqlite3.connect(foreign)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


def test_migrate_dry_run_reports_an_older_store_without_writing(tmp_path: Path) -> None:
    url = goldenkit.sqlite_copy(tmp_path)
    path = Path(url[len("sqlite:///") :])
    before = path.read_bytes()
    done = cli("migrate", url, "--dry-run")
    assert done.returncode == 0, done.stderr
    for migration in migrations.MIGRATIONS:
        assert f"would apply migration {migrations.describe(migration)}" in done.stdout
    assert path.read_bytes() == before
    # Nothing but what any reader of a WAL database uses (its shared-memory index and log).
    assert {p.name for p in tmp_path.iterdir()} <= {"golden.db", "golden.db-shm", "golden.db-wal"}
    assert (tmp_path / "golden.db-wal").stat().st_size == 0


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(
    not _unshare_works(), reason="needs a private mount namespace (unshare -m) to mount read-only"
)
def test_inspect_reads_a_store_on_a_read_only_mount(tmp_path: Path) -> None:
    source, mount = tmp_path / "source", tmp_path / "ro"
    source.mkdir()
    mount.mkdir()
    goldenkit.sqlite_copy(source)
    new_store(source / "fresh.db")  # a WAL store, closed cleanly: no -shm file to read it with
    script = (
        f"mount --bind {source} {mount} && mount -o remount,bind,ro {mount} && "
        f"{sys.executable} -m ctxengine inspect --store sqlite:///{mount}/golden.db {GOLDEN_SESSION} "
        f"--json && {sys.executable} -m ctxengine migrate --dry-run sqlite:///{mount}/fresh.db"
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=HANG,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, _, rest = done.stdout.partition("\n")
    assert json.loads(first)["events"] == GOLDEN_EVENTS
    assert "up to date" in rest


# --------------------------------------------------------------------------
# model-written text is shown with its control characters visible


HOSTILE = (
    "\x1b]0;pwned\x07",  # OSC: set the window title
    "\x1b[2J\x1b[H",  # CSI: clear the screen
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 link
    "\x9b31m",  # C1 CSI
    "\u202egnp.exe",  # bidi override
    "line\u2028break\x85next",  # line separator, NEL
    "[bold red]markup[/bold red]",
)
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2028", "\x85")


async def _hostile_session(url: str) -> None:
    text = " ".join(HOSTILE)
    state = WorkingStateManager().transition(
        WorkingState(),
        {
            "objective": text,
            "add_constraints": list(HOSTILE),
            "upsert_tasks": [{"task_id": "t1", "text": text, "status": "open"}],
            "add_facts": list(HOSTILE),
            "next_action": text,
        },
    )
    store = await open_store(url)
    try:
        await store.events.append(
            NewEvent("hostile", WORKING_STATE_UPDATED, {"state": state.to_dict()}, "ws:1", run_id=HOSTILE[0])
        )
        compaction = {"run_id": HOSTILE[1], "reason": text, "depth": 1, "replaced_through_sequence": 1}
        await store.events.append(
            NewEvent("hostile", CONTEXT_COMPACTED, compaction, "c:1", run_id=HOSTILE[2])
        )
    finally:
        await store.close()


def test_inspect_shows_control_characters_of_model_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "2000")  # no wrapping inside an escape
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    asyncio.run(_hostile_session(url))
    assert main(["inspect", "--store", url, "hostile"]) == 0
    out = capsys.readouterr().out
    assert [c for c in RAW if c in out] == []
    for shown in (
        "\\x1b]0;pwned\\x07",
        "\\x1b[2J",
        "\\x9b31m",
        "\\u202egnp.exe",
        "line\\u2028break\\x85next",
    ):
        assert shown in out
    assert "[bold red]markup[/bold red]" in out  # shown as written, not read as markup
    assert "Working state" in out and "Compactions (1" in out


_ESCAPE = re.compile(r"\\(\\|n|r|t|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")
_SHORT = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        return _SHORT.get(code) or chr(int(code[1:], 16))

    return _ESCAPE.sub(one, text)


@given(st.text(st.characters(codec=None)))
def test_visible_text_holds_no_control_and_reads_back(text: str) -> None:
    shown = visible(text)
    assert [c for c in shown if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")] == []
    assert _unescape(shown) == text  # two different texts never print the same


def test_error_messages_show_control_characters(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'e.db'}"
    new_store(tmp_path / "e.db")
    assert main(["inspect", "--store", url, "no\x1b]0;x\x07such"]) == 2
    err = capsys.readouterr().err
    assert "SessionNotFound" in err and "\x1b" not in err and "\x07" not in err


# --------------------------------------------------------------------------
# runaway statements end


def test_inspect_interrupts_an_infinite_view(tmp_path: Path) -> None:
    path = tmp_path / "runaway.db"
    runaway_store(path, migrations.latest_revision())
    done = cli("inspect", "--store", f"sqlite:///{path}", "s", "--statement-timeout", "0.5")
    assert done.returncode == 2, done.stderr
    assert "StatementTimeout" in done.stderr and "0.5 s" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_older_crafted_store_neither_hangs_inspect_nor_the_dry_run(tmp_path: Path) -> None:
    """At revision 1, the old inspect migrated it and the old dry run ran the migrations (and
    rolled them back): both copied rows out of the view that never ends."""
    path = tmp_path / "runaway.db"
    runaway_store(path, migrations.BASE_REVISION)
    dry = cli("migrate", f"sqlite:///{path}", "--dry-run", "--statement-timeout", "0.5")
    assert dry.returncode == 0, dry.stderr
    assert f"would apply migration {migrations.describe(migrations.MIGRATIONS[0])}" in dry.stdout
    done = cli("inspect", "--store", f"sqlite:///{path}", "s", "--statement-timeout", "0.5")
    assert done.returncode == 2 and "StatementTimeout" in done.stderr, done.stderr


def test_a_trigger_that_never_ends_stops_the_migration_not_inspect(tmp_path: Path) -> None:
    """A trigger on the version table fires on any write of it: the old inspect (which
    migrated) hung in it; now inspect and the dry run write nothing, and a real migrate stops
    at the statement timeout with nothing applied."""
    url = goldenkit.sqlite_copy(tmp_path)
    path = Path(url[len("sqlite:///") :])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"CREATE VIEW spin AS {INFINITE} SELECT n FROM r WHERE n < 0")
    conn.execute("CREATE TABLE junk (n INTEGER)")
    for event in ("INSERT", "UPDATE"):
        conn.execute(
            f"CREATE TRIGGER spin_{event.lower()} AFTER {event} ON ctxengine_schema_version "
            "BEGIN INSERT INTO junk SELECT n FROM spin; END"
        )
    conn.close()
    rows = version_rows(path)
    done = cli("inspect", "--store", url, GOLDEN_SESSION, "--json", "--statement-timeout", "0.5")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["events"] == GOLDEN_EVENTS
    assert cli("migrate", url, "--dry-run", "--statement-timeout", "0.5").returncode == 0
    migrate = cli("migrate", url, "--statement-timeout", "0.5")
    assert migrate.returncode == 2 and "StatementTimeout" in migrate.stderr, migrate.stderr
    assert version_rows(path) == rows


# --------------------------------------------------------------------------
# bad URLs and demo arguments


@pytest.mark.parametrize("tail", ["a%00b.db", "a%ffb.db"])
def test_a_url_whose_path_cannot_be_a_file_is_a_bad_url(tmp_path: Path, tail: str) -> None:
    done = cli("inspect", "--store", f"sqlite:///{tmp_path}/{tail}", "s")
    assert done.returncode == 2, done.stderr
    assert "StoreOpenError" in done.stderr and "URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "flag", "needle"),
    [
        (["--window", "100"], "--window", str(minimum_window())),
        (["--window", str(minimum_window() - 1)], "--window", str(minimum_window())),
        (["--turns", "0"], "--turns", "at least 1"),
        (["--session", "s" * 250], "--session", "256"),
        (["--session", ""], "--session", "empty"),
    ],
)
def test_demo_arguments_that_cannot_run_are_usage_errors(
    args: list[str], flag: str, needle: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--store", f"sqlite:///{tmp_path / 'd.db'}", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err and needle in err and "usage:" in err
    assert list(tmp_path.iterdir()) == []  # refused before anything ran


def test_the_smallest_window_is_accepted_and_one_below_is_not(tmp_path: Path) -> None:
    check_config(DemoConfig(context_window=minimum_window()))
    with pytest.raises(ModelValidationError, match="context_window"):
        asyncio.run(
            run_demo(DemoConfig(context_window=minimum_window() - 1, store_url=f"sqlite:///{tmp_path}/d.db"))
        )
    assert list(tmp_path.iterdir()) == []


def test_demo_window_error_exit_code_end_to_end() -> None:
    done = cli("demo", "--window", "100")
    assert done.returncode == 2
    assert "argument --window" in done.stderr and "invariants" not in (done.stdout + done.stderr).lower()
