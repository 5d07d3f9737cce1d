"""A private PostgreSQL server for tests and benchmarks: initdb + pg_ctl on a temporary
directory and a free loopback port, nothing listening system-wide.

The server binaries refuse to run as root, so as root the data directory is
handed to the ``postgres`` user and the binaries run through ``runuser``.
``durable=True`` keeps the server's defaults for durability (fsync on,
``synchronous_commit=on``): what a benchmark of acknowledged writes needs.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path


def postgres_bin() -> Path | None:
    """The newest installed server bin directory holding initdb and pg_ctl."""
    override = os.environ.get("CTXENGINE_PG_BIN")
    candidates = [override] if override else []
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parent.name.split(".")],
        reverse=True,
    )
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        path = Path(candidate)
        if (path / "initdb").exists() and (path / "pg_ctl").exists():
            return path
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    bin: Path
    root: Path
    port: int = 0
    #: Commit only after the WAL reached the kernel: what a crash test of acknowledged writes needs.
    durable: bool = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        # cwd: the server user must be able to enter the working directory.
        return subprocess.run(
            command, cwd=self.root, capture_output=True, text=True, check=check, timeout=120
        )

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--locale=C", "--no-sync",
        )  # fmt: skip
        last_error = ""
        for _ in range(3):  # a free port can be taken between probe and bind
            self.port = _free_port()
            result = self._pg_ctl_start()
            if result.returncode == 0:
                return
            last_error = result.stderr + (self.log.read_text() if self.log.exists() else "")
        raise RuntimeError(f"PostgreSQL did not start:\n{last_error}")

    def _pg_ctl_start(self) -> subprocess.CompletedProcess[str]:
        durability = (
            "-c synchronous_commit=on"
            if self.durable
            # Durability of the test cluster itself does not matter.
            else "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200 {durability}"
        )
        return self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start",
            check=False,
        )  # fmt: skip

    def stop(self) -> None:
        """An immediate shutdown: the server processes exit as in a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)

    def restart(self) -> None:
        """Start again on the same port and data (crash recovery runs first)."""
        result = self._pg_ctl_start()
        if result.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not restart:\n{result.stderr}")


__all__ = ["PostgresServer", "postgres_bin"]
