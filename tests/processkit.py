"""Worker scripts run in a fresh interpreter, for the tests that cross a process boundary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent


def run_worker(script: Path, *args: str, timeout: float = 300) -> dict[str, Any]:
    """Run ``script`` with ``args`` in a new interpreter (``tests/`` on its path; Python puts the
    script's own folder there) and return the one JSON object it prints; its stderr on failure."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result
