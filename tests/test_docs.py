"""Acceptance 4: every code block of the user guide runs (the pages that open PostgreSQL run in
``tests/integration/test_docs_postgres.py``, against the harness's server). The OpenAI and
Anthropic clients the pages call are pointed at a scripted model over HTTP (``fake_provider``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs_blocks import DOCS, POSTGRES_PAGES, blocks, run_page
from fake_provider import serve

PAGES = sorted(p for p in DOCS.glob("*.md") if p.name not in POSTGRES_PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_guide_page_runs(page: Path, tmp_path: Path) -> None:
    with serve() as env:
        run_page(page, tmp_path, env)


def test_every_page_has_code() -> None:
    for page in [*PAGES, *(DOCS / name for name in POSTGRES_PAGES)]:
        if page.name not in ("reference.md",):
            assert any(lang in ("python", "console") for lang, _ in blocks(page)), page.name
