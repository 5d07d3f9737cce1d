"""Acceptance 4: the guide's pages that open PostgreSQL run against the harness's server (the
model clients they call against the scripted model of ``fake_provider``)."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import psycopg
import pytest

from fake_provider import serve
from storekit import schema_dsn

_spec = importlib.util.spec_from_file_location("docs_blocks", Path(__file__).parent.parent / "docs_blocks.py")
assert _spec is not None and _spec.loader is not None
docs_blocks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs_blocks)


@pytest.mark.parametrize("page", docs_blocks.POSTGRES_PAGES)
def test_postgres_page_runs(postgres_dsn: str, tmp_path: Path, page: str) -> None:
    schema = f"docs_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        with serve() as model:
            env = {**model, "CTXENGINE_DSN": schema_dsn(postgres_dsn, schema)}
            docs_blocks.run_page(docs_blocks.DOCS / page, tmp_path, env)
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
