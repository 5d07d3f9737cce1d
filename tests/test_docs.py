"""Acceptance 4: every code block of the user guide runs (the PostgreSQL page runs in
``tests/integration/test_docs_postgres.py``, against the harness's server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs_blocks import DOCS, blocks, run_page

PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "postgres.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_guide_page_runs(page: Path, tmp_path: Path) -> None:
    run_page(page, tmp_path)


def test_every_page_has_code() -> None:
    for page in [*PAGES, DOCS / "postgres.md"]:
        if page.name not in ("reference.md",):
            assert any(lang in ("python", "console") for lang, _ in blocks(page)), page.name
