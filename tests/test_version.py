"""The version is 0.2.0 everywhere it is written (issue 36): the stored formats freeze at it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import ctxengine
from ctxengine import _core
from ctxengine.core import telemetry

ROOT = Path(__file__).resolve().parent.parent
VERSION = "0.2.0"


def test_the_package_the_crates_and_the_extension_say_0_2_0() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    crates = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    assert (ctxengine.__version__, project, crates, _core.__version__) == (VERSION,) * 4
    assert telemetry._VERSION == VERSION  # the instrumentation scope's version
    docs = (ROOT / "docs" / "index.md").read_text()
    assert f"ctxengine-{VERSION}" in docs and "ctxengine-0.1.0" not in docs
