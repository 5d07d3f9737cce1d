"""Schema versions and migrations of the SQL stores (ADR 0009).

``ctxengine_schema_version`` holds two numbers per store:

* ``store``: the **compatibility level**. A reader refuses a store whose
  level it does not know, so only a change an older worker could misread
  may raise it. It is 1, and every migration keeps it.
* ``store.revision``: the additive migrations applied. Code that does not
  know a newer revision ignores it and keeps working on the migrated
  tables, which is what makes a rolling upgrade possible: the first new
  worker migrates, the old ones go on reading and writing the same tables.

A new store is created at the current schema at once (revision
``SCHEMA_REVISION``, 6). A store from before revisions were tracked (revision
1: the stores in ``tests/golden``) takes one migration to it; the revisions 2
to 5 that development builds before 0.2.0 wrote on the way are refused with
``StoreOpenError`` (no release wrote them). Each dialect's statements are in
``sqlite_ddl`` and ``postgres_ddl``: a migrated store and a new one have the
same schema. Migrations are applied under the store's write lock (SQLite
``BEGIN IMMEDIATE``, a PostgreSQL advisory lock) in one transaction with the
revision bump: two workers starting at once apply each step exactly once.
From 0.2.0 on a migration is appended here and never edited; each ships with
a golden fixture test (``tests/stores/test_migrations.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import StoreError, StoreOpenError
from . import postgres_ddl, sqlite_ddl

#: The compatibility level this code reads and writes.
COMPAT_LEVEL = 1
#: The revision of a store from before revisions were tracked (what ``tests/golden`` holds).
BASE_REVISION = 1
#: The revision of the current schema, at which a new store is created. It is numbered after
#: the last revision development builds reached, whose schema it is: their stores open as
#: they are.
SCHEMA_REVISION = 6
#: Revisions only development builds before 0.2.0 wrote (steps toward revision 6): no
#: release reads them, and a store at one is refused (``StoreOpenError``).
UNRELEASED_REVISIONS = range(BASE_REVISION + 1, SCHEMA_REVISION)
#: The table of the two numbers; a database without it holds no ctxengine store.
VERSION_TABLE = "ctxengine_schema_version"
COMPONENT_LEVEL = "store"
COMPONENT_REVISION = "store.revision"


@dataclass(frozen=True, slots=True)
class Migration:
    """One additive schema change, in each dialect's statements."""

    revision: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]


#: Revision 1 to the schema of 0.2.0 (``SCHEMA_REVISION``) in one step: what development
#: builds before it applied as revisions 2 to 6 (issues 13 and 36; ADR 0011, 0013).
SCHEMA_0_2 = Migration(
    revision=SCHEMA_REVISION,
    name="the 0.2.0 schema: token counts beside events, events indexed by format version, "
    "SQLite rowid tables with the payload last, PostgreSQL's predicted commit and anomaly floor",
    sqlite=sqlite_ddl.FROM_BASE,
    postgres=postgres_ddl.FROM_BASE,
)

#: Every migration, in revision order. Append only: from 0.2.0 on, a migration once
#: released is never edited (ADR 0009).
MIGRATIONS: tuple[Migration, ...] = (SCHEMA_0_2,)


def latest_revision(migrations: tuple[Migration, ...] | None = None) -> int:
    chain = MIGRATIONS if migrations is None else migrations
    return chain[-1].revision if chain else SCHEMA_REVISION


def pending(revision: int, migrations: tuple[Migration, ...] | None = None) -> tuple[Migration, ...]:
    """The migrations a store at ``revision`` still needs, in order."""
    chain = MIGRATIONS if migrations is None else migrations
    return tuple(m for m in chain if m.revision > revision)


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What ``migrate`` found and did (``applied`` is empty on a dry run or an up-to-date store)."""

    store: str
    level: int
    from_revision: int
    to_revision: int
    pending: tuple[str, ...]
    applied: tuple[str, ...]
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "level": self.level,
            "from_revision": self.from_revision,
            "to_revision": self.to_revision,
            "pending": list(self.pending),
            "applied": list(self.applied),
            "dry_run": self.dry_run,
        }


def check_level(where: str, level: object) -> int:
    """The store's compatibility level, or a ``StoreError`` when this code cannot read it."""
    if isinstance(level, bool) or not isinstance(level, int) or level < 1:
        raise StoreError(f"{where}: bad schema compatibility level {level!r}")
    if level > COMPAT_LEVEL:
        raise StoreOpenError(
            f"{where} has schema version {level} (its compatibility level); this code understands up "
            f"to {COMPAT_LEVEL}: upgrade ctxengine"
        )
    return level


def check_revision(where: str, revision: object) -> int:
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < BASE_REVISION:
        raise StoreError(f"{where}: bad schema revision {revision!r}")
    return revision


def describe(migration: Migration) -> str:
    return f"{migration.revision}: {migration.name}"


def report(where: str, found: dict[Any, Any], *, apply: bool) -> MigrationReport:
    """What migrating a store whose version rows are ``found`` does (``{}``: a new store,
    created at the current schema first); ``StoreOpenError`` for an unreleased revision."""
    if COMPONENT_LEVEL in found:
        level = check_level(where, found[COMPONENT_LEVEL])
        revision = check_revision(where, found.get(COMPONENT_REVISION, BASE_REVISION))
    else:
        level, revision = COMPAT_LEVEL, SCHEMA_REVISION
    if revision in UNRELEASED_REVISIONS:
        raise unreleased(where, revision)
    todo = pending(revision)
    steps = tuple(describe(m) for m in todo)
    return MigrationReport(
        where,
        level,
        revision,
        todo[-1].revision if todo else revision,
        steps,
        steps if apply else (),
        not apply,
    )


def unreleased(where: str, revision: int) -> StoreOpenError:
    """A store at a revision only a development build before 0.2.0 wrote."""
    return StoreOpenError(
        f"{where} is at schema revision {revision}, which only development builds before "
        f"ctxengine 0.2.0 wrote; this code migrates a store at revision {BASE_REVISION} and opens "
        f"one at revision {SCHEMA_REVISION} or later. No release wrote it: create the store anew "
        "(or read it with the build that wrote it)"
    )


def no_store(where: str) -> StoreOpenError:
    """A location without a store, opened where nothing may be created (read-only, a dry run)."""
    return StoreOpenError(
        f"{where} holds no ctxengine store (`ctxengine migrate` or a store's first open creates one)"
    )


__all__ = [
    "BASE_REVISION",
    "COMPAT_LEVEL",
    "COMPONENT_LEVEL",
    "COMPONENT_REVISION",
    "MIGRATIONS",
    "SCHEMA_0_2",
    "SCHEMA_REVISION",
    "UNRELEASED_REVISIONS",
    "VERSION_TABLE",
    "Migration",
    "MigrationReport",
    "check_level",
    "check_revision",
    "describe",
    "latest_revision",
    "no_store",
    "pending",
    "report",
    "unreleased",
]
