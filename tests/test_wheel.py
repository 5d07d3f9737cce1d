"""The built wheel installs and runs where no Rust toolchain is (issue 40, acceptance 1).

``make wheel`` (a step of ``make test``) leaves the wheel for this interpreter in ``dist/``;
this installs it into a fresh venv, with no ``cargo`` on ``PATH`` and nothing of the source
tree importable, and runs the README's example there: the Rust backend loads from the wheel
and prints what the source tree prints. The venv sees this interpreter's site-packages for the
dependencies (tiktoken), so nothing is downloaded.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def _wheel() -> Path:
    found = sorted(DIST.glob(f"ctxengine-*-{TAG}-{TAG}-*.whl"), key=lambda p: p.stat().st_mtime)
    why = ""
    if not found:
        why = f"no {TAG} wheel in dist/: run `make wheel`"
    else:
        stale = _stale(found[-1])
        if stale:
            why = f"{found[-1].name} is older than the sources ({', '.join(stale[:3])}): run `make wheel`"
    if why:
        if os.environ.get("CTXENGINE_REQUIRE_WHEEL") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return found[-1]


def _stale(wheel: Path) -> list[str]:
    """The package's Python files whose text differs in the wheel."""
    with zipfile.ZipFile(wheel) as z:
        shipped = {name: z.read(name) for name in z.namelist() if name.endswith((".py", ".pyi"))}
    sources = {
        str(p.relative_to(ROOT / "python")): p.read_bytes()
        for p in (ROOT / "python" / "ctxengine").rglob("*.py*")
        if p.suffix in (".py", ".pyi") and "__pycache__" not in p.parts
    }
    return sorted(name for name in sources.keys() | shipped.keys() if sources.get(name) != shipped.get(name))


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    use = text[text.index("## Use") :]
    match = re.search(r"^```python\n(.*?)^```", use, re.DOTALL | re.MULTILINE)
    assert match, "README.md: no python block under ## Use"
    return match.group(1)


def test_the_wheel_runs_the_readme_example_without_a_rust_toolchain(tmp_path: Path) -> None:
    wheel = _wheel()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    path = os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"])
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    env = {
        "PATH": path,
        "HOME": str(tmp_path),
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONNOUSERSITE": "1",
    }
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    example = tmp_path / "example.py"
    example.write_text(readme_example())
    where = "import ctxengine, ctxengine._core as core; print(ctxengine.__file__); print(core.__file__)"
    probe = subprocess.run([str(python), "-c", where], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    assert all(line.startswith(str(venv)) for line in probe.stdout.splitlines()), probe.stdout

    run = subprocess.run([str(python), str(example)], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[0] == "rust" and run.stderr == ""
    # The same line as the source tree's reference backend prints, backend name aside.
    source_env = {**os.environ, "PYTHONPATH": str(ROOT / "python"), "CTXENGINE_BACKEND": "python"}
    reference = subprocess.run(
        [sys.executable, str(example)], env=source_env, cwd=tmp_path, capture_output=True, text=True
    )
    assert reference.returncode == 0, reference.stderr
    assert run.stdout.split()[1:] == reference.stdout.split()[1:]

    cli = subprocess.run(
        [str(venv / "bin" / "ctxengine"), "demo", "--turns", "2", "--store", "sqlite:///demo.db", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "demo.db").is_file()
