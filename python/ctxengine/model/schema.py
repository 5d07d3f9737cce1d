"""The item schema, declared once in ``rust/core/src/schema.rs`` (ADR 0018).

``schema.json`` beside this module is written from that declaration by a
cargo test that fails when the copy is stale, so the schema reads the same
with or without the extension (``_core.item_schema()`` returns the same
text). The value types in ``items``, ``content`` and
``assembly.request.RenderedItem``, the decoders and the interop tables are
held to it by ``tests/model/test_item_schema.py``; tables simpler to derive
than to check (the reference decoder's slots and defaults) are derived here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

#: The field types: ``id`` is a non-empty ``str``; ``content`` a ``str`` or content parts;
#: ``trust`` a ``TrustLevel``; ``object`` a ``dict[str, Any]``.
FIELD_TYPES = ("str", "id", "int", "bool", "content", "trust", "object")
REQUIRED: Any = object()


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    type: str
    nullable: bool
    default: Any  # ``REQUIRED`` when the constructor needs it


@dataclass(frozen=True, slots=True)
class RecordSpec:
    kind: str
    cls: str
    fields: tuple[FieldSpec, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> FieldSpec | None:
        return next((f for f in self.fields if f.name == name), None)


def _record(raw: dict[str, Any]) -> RecordSpec:
    fields = tuple(
        FieldSpec(f["name"], f["type"], f["nullable"], f.get("default", REQUIRED)) for f in raw["fields"]
    )
    return RecordSpec(raw["kind"], raw["class"], fields)


def parse(text: str) -> tuple[tuple[str, ...], dict[str, RecordSpec], dict[str, RecordSpec], RecordSpec]:
    """``(trust_levels, items, parts, rendered)`` of a schema's JSON text; records by kind."""
    raw = json.loads(text)
    items = {r.kind: r for r in map(_record, raw["items"])}
    parts = {r.kind: r for r in map(_record, raw["parts"])}
    return tuple(raw["trust_levels"]), items, parts, _record(raw["rendered"][0])


SCHEMA_TEXT = resources.files(__package__).joinpath("schema.json").read_text(encoding="utf-8")
TRUST_LEVELS, ITEMS, PARTS, RENDERED = parse(SCHEMA_TEXT)


def default_trust(kind: str) -> str | None:
    """The default trust value of an item kind's ``trust`` field, if it has one."""
    spec = ITEMS[kind].field("trust")
    return None if spec is None else str(spec.default)


__all__ = [
    "FIELD_TYPES",
    "ITEMS",
    "PARTS",
    "RENDERED",
    "REQUIRED",
    "SCHEMA_TEXT",
    "TRUST_LEVELS",
    "FieldSpec",
    "RecordSpec",
    "default_trust",
    "parse",
]
