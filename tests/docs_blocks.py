"""Run the user guide's code blocks (``docs/*.md``) so the guide cannot rot.

Python blocks of one page run in order in one namespace; ``console`` blocks run
their ``$ `` lines with bash (``pip install`` lines are shown, not run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: The pages that open a PostgreSQL store (``CTXENGINE_DSN``): run against the harness's server.
POSTGRES_PAGES = ("postgres.md", "quickstart.md")
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text())]


def run_page(page: Path, workdir: Path, env: dict[str, str] | None = None) -> None:
    """Execute every block of ``page`` in ``workdir`` (python in-process, console via bash)."""
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    shell_env = {**os.environ, **(env or {})}
    shell_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{shell_env.get('PATH', '')}"
    previous_cwd, previous_env = Path.cwd(), dict(os.environ)
    os.chdir(workdir)
    os.environ.update(env or {})
    try:
        for n, (lang, code) in enumerate(blocks(page)):
            where = f"{page.name} block {n}"
            if lang == "python":
                exec(compile(code, where, "exec"), namespace)
            elif lang == "console":
                for line in code.splitlines():
                    if not line.startswith("$ ") or line.startswith("$ pip "):
                        continue
                    done = subprocess.run(
                        ["bash", "-ec", line[2:]], env=shell_env, capture_output=True, text=True, timeout=300
                    )
                    assert done.returncode == 0, f"{where}: {line}\n{done.stdout}\n{done.stderr}"
    finally:
        os.chdir(previous_cwd)
        os.environ.clear()
        os.environ.update(previous_env)
