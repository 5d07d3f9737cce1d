"""Issue 41, acceptances 1 and 5: the README's agent loop is the guide's first example, runs as
written (a script of its own, the real ``openai`` client pointed at the scripted model), and is
at most 15 lines of code; the guide's stateless PostgreSQL worker is at most 25."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from docs_blocks import DOCS, blocks
from fake_provider import serve

ROOT = Path(__file__).resolve().parent.parent


def code_lines(block: str) -> int:
    return sum(1 for line in block.splitlines() if line.strip())


def guide_loop() -> str:
    """The quickstart's first block: the loop the README shows."""
    return next(code for lang, code in blocks(DOCS / "quickstart.md") if lang == "python")


def readme_loop() -> str | None:
    """The README's block that opens an ``Engine``, once the README has one."""
    found = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.DOTALL | re.MULTILINE)
    loops = [code for code in found if "Engine.open(" in code]
    return loops[0] if loops else None


def test_the_readme_loop_is_the_guides_and_runs_as_a_script(tmp_path: Path) -> None:
    loop = guide_loop()
    readme = readme_loop()
    if readme is not None:
        assert readme == loop, "README.md's agent loop and docs/quickstart.md's first block differ"
    assert code_lines(loop) <= 15
    assert "sqlite:///" in loop and "ToolSpec(" in loop and "tool_result(" in loop
    script = tmp_path / "agent.py"
    script.write_text(loop)
    with serve() as model:
        env = {**os.environ, **model, "PYTHONPATH": str(ROOT / "python")}
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    # The model called the tool, and answered with its result.
    assert done.stdout.strip() == "Done: 18C and clear in Paris."
    assert (tmp_path / "agent.db").is_file()


def test_the_guides_stateless_worker_fits_in_25_lines() -> None:
    worker = next(code for lang, code in blocks(DOCS / "quickstart.md") if "async def worker(" in code)
    assert "Engine.open(DSN" in worker and "postgresql://" in worker
    assert code_lines(worker) <= 25
