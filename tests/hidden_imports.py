"""Run Python in a fresh process where some modules cannot be imported (a meta-path finder
refuses them, as if they were not installed): how a user without an extra, or without the
built extension, meets the package."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_BLOCKER = """
import sys
class _Hidden:
    names = {names!r}
    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.names or fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {{fullname!r}} (hidden by the test)", name=fullname)
        return None
sys.meta_path.insert(0, _Hidden())
"""


def run_without(
    hidden: Sequence[str], code: str, *, args: Sequence[str] = (), env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -c code`` with ``hidden`` (top-level or dotted module names) unimportable.
    Warnings are shown once each (the interpreter's default), whatever pytest set."""
    program = _BLOCKER.format(names=set(hidden)) + code
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "CTXENGINE_BACKEND")}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "python"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        cwd=ROOT,
    )
