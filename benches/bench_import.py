"""``import ctxengine`` in a fresh process (issue 40: at most 100 ms, and no driver loaded).

Bytecode is cached (in a temporary ``PYTHONPYCACHEPREFIX``, warmed by a first run) as in an
installed wheel, so the row times the import, not compiling the sources. The interpreter's own
start is its own row: the import costs the difference of the two medians, and each round also
reports the import as timed inside the process (``extra_info["import_ms"]``).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TIMED_IMPORT = (
    "import time; t = time.perf_counter(); import ctxengine; print((time.perf_counter() - t) * 1000)"
)


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.mktemp("pycache"))
    source = str(Path(__file__).resolve().parent.parent / "python")
    env["PYTHONPATH"] = os.pathsep.join([source, *filter(None, [os.environ.get("PYTHONPATH")])])
    _run("import ctxengine", env)  # writes the bytecode
    return env


def _run(code: str, env: dict[str, str]) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    ).stdout


def bench_interpreter_start(benchmark: Any, environment: dict[str, str]) -> None:
    benchmark.pedantic(_run, args=("pass", environment), rounds=10, iterations=1, warmup_rounds=1)


def bench_import_ctxengine(benchmark: Any, environment: dict[str, str]) -> None:
    timings: list[float] = []

    def fresh() -> None:
        timings.append(float(_run(TIMED_IMPORT, environment)))

    benchmark.pedantic(fresh, rounds=10, iterations=1, warmup_rounds=1)
    benchmark.extra_info["import_ms"] = round(statistics.median(timings), 1)
    loaded = _run(
        "import sys, ctxengine; print(sorted(m for m in sys.modules if 'psycopg' in m))", environment
    )
    assert loaded.strip() == "[]"
