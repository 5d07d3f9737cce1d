"""One item schema (issue 38, ADR 0018): every table that spells the item kinds and their
fields agrees with the declaration in ``rust/core/src/schema.rs``.

Each table is read as it stands (a dataclass's fields, a decoder's output, a Rust table's
keys, a source file's slot list) and compared with the schema. The test collects every
disagreement before failing and names each table and field, so a change to the
declaration lists everything that still has to follow it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ctxengine
from ctxengine import _core, reference
from ctxengine.assembly.request import RenderedItem
from ctxengine.model import FileRef, TextPart, TrustLevel
from ctxengine.model import schema as s
from ctxengine.model.items import ITEM_TYPES
from ctxengine.reference import canonical_json
from ctxengine.reference import decode as reference_decode

ROOT = Path(__file__).resolve().parents[2]
PARTS_CLASSES = {"text_part": TextPart, "file_ref": FileRef}

# The annotation each field type is written with in the Python value types.
ANNOTATIONS = {
    "str": "str",
    "id": "str",
    "int": "int",
    "bool": "bool",
    "content": "Content",
    "trust": "TrustLevel",
    "object": "dict[str, Any]",
}
SAMPLE_PARTS = (FileRef("a", "m"), TextPart("t"))


def sample_value(f: s.FieldSpec) -> Any:
    """A non-default value of the field's type (the Python value)."""
    return {
        "str": "s",
        "id": "id-1",
        "int": 1,
        "bool": True,
        "content": SAMPLE_PARTS,
        "trust": TrustLevel.MEMORY,
        "object": {"k": 1},
    }[f.type]


def json_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return [part.to_dict() for part in value]
    if isinstance(value, TrustLevel):
        return value.value
    return value


def sample_dict(spec: s.RecordSpec) -> dict[str, Any]:
    """The dict form of the sample item: every field set."""
    return {"type": spec.kind, **{f.name: json_value(sample_value(f)) for f in spec.fields}}


class Report:
    """Disagreements by table."""

    def __init__(self) -> None:
        self.found: dict[str, list[str]] = {}

    def add(self, table: str, what: str) -> None:
        self.found.setdefault(table, []).append(what)

    def check(self, table: str, what: str, run: Callable[[], Any]) -> None:
        try:
            run()
        except Disagrees as exc:
            self.add(table, f"{what}: {exc}")
        except Exception as exc:  # a table that cannot even take the schema's shape
            self.add(table, f"{what}: {type(exc).__name__}: {exc}")

    def text(self) -> str:
        lines = [f"{len(self.found)} table(s) disagree with rust/core/src/schema.rs:"]
        for table, problems in self.found.items():
            lines.append(f"  {table}")
            lines.extend(f"    - {p}" for p in problems)
        return "\n".join(lines)


class Disagrees(Exception):
    """One table's value is not the schema's (raised, not asserted: one line in the report)."""


def expect(have: object, want: object) -> None:
    if have != want:
        raise Disagrees(f"{have!r} != {want!r} (schema)")


def check_dataclass(r: Report, table: str, cls: type[Any], spec: s.RecordSpec) -> None:
    """A value type's constructor fields, annotations and defaults against a record."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    r.check(table, f"{spec.cls} fields", lambda: expect(tuple(fields), spec.names))
    r.check(table, f"{spec.cls}.kind", lambda: expect(getattr(cls, "kind", None), spec.kind))
    for f in spec.fields:
        d = fields.get(f.name)
        if d is None:
            continue
        want = ANNOTATIONS[f.type] + (" | None" if f.nullable else "")
        r.check(table, f"{spec.cls}.{f.name} type", lambda d=d, want=want: expect(str(d.type), want))
        default = dataclasses.MISSING if f.default is s.REQUIRED else f.default
        r.check(
            table, f"{spec.cls}.{f.name} default", lambda d=d, default=default: expect(d.default, default)
        )


def check_python_items(r: Report) -> None:
    table = "python/ctxengine/model/items.py"
    r.check(table, "ITEM_TYPES", lambda: expect(sorted(ITEM_TYPES), sorted(s.ITEMS)))
    for kind, spec in s.ITEMS.items():
        cls = ITEM_TYPES.get(kind)
        if cls is None:
            continue
        r.check(table, f"{kind} class", lambda cls=cls, spec=spec: expect(cls.__name__, spec.cls))
        check_dataclass(r, table, cls, spec)
        want = sample_dict(spec)

        def round_trip(cls: Any = cls, spec: s.RecordSpec = spec, want: dict[str, Any] = want) -> None:
            item = cls(**{f.name: sample_value(f) for f in spec.fields})
            expect(item.to_dict(), want)
            expect(cls.from_dict(want), item)

        r.check(table, f"{spec.cls} to_dict/from_dict", round_trip)

        def defaults(cls: Any = cls, spec: s.RecordSpec = spec) -> None:
            required = {"type": spec.kind}
            required.update(
                {f.name: json_value(sample_value(f)) for f in spec.fields if f.default is s.REQUIRED}
            )
            d = cls.from_dict(required).to_dict()
            for f in spec.fields:
                have = d.get(f.name, "<absent>")
                if f.default is not s.REQUIRED and have != f.default:
                    raise Disagrees(f"from_dict default of {f.name}: {have!r}")

        r.check(table, f"{spec.cls} defaults", defaults)


def check_parts(r: Report) -> None:
    table = "python/ctxengine/model/content.py"
    for kind, spec in s.PARTS.items():
        cls = PARTS_CLASSES[kind]
        r.check(table, f"{kind} class", lambda cls=cls, spec=spec: expect(cls.__name__, spec.cls))
        check_dataclass(r, table, cls, spec)


def check_trust(r: Report) -> None:
    r.check(
        "python/ctxengine/model/trust.py", "TrustLevel", lambda: expect(tuple(TrustLevel), s.TRUST_LEVELS)
    )


def check_rendered(r: Report) -> None:
    check_dataclass(r, "python/ctxengine/assembly/request.py", RenderedItem, s.RENDERED)
    # The native renderer fills the slots the core's schema declares (`render::slots`)
    # and refuses a RenderedItem whose slots differ.
    r.check(
        "rust/core/src/render.rs (slots)",
        "RenderedItem slots",
        lambda: expect(tuple(RenderedItem.__slots__), (*s.RENDERED.names, "_cj")),
    )
    r.check(
        "rust/py/src/render.rs (render_items)",
        "RenderedItem slots",
        lambda: _core.render_items([], "history", RenderedItem),
    )


def check_decoders(r: Report) -> None:
    table = "python/ctxengine/reference/decode.py"
    r.check(
        table,
        "FIELDS",
        lambda: expect(reference_decode.FIELDS, {k: (*v.names, "_cj") for k, v in s.ITEMS.items()}),
    )
    backends = (("python/ctxengine/reference/decode.py", reference), ("rust/py/src/decode.rs", _core))
    for table, backend in backends:
        for kind, spec in s.ITEMS.items():
            cls = ITEM_TYPES.get(kind)

            def decode(spec: s.RecordSpec = spec, cls: Any = cls, backend: Any = backend) -> None:
                payload = canonical_json({"item": sample_dict(spec)}).decode()
                items, index, reason = backend.decode_items(
                    [payload], [1], ITEM_TYPES, (TextPart, FileRef), tuple(TrustLevel)
                )
                if index is not None:
                    raise Disagrees(str(reason))
                item = items[0]
                for f in spec.fields:
                    have = getattr(item, f.name, "<no slot>")
                    want = 1 if f.name == "seq" else sample_value(f)
                    if have != want:
                        raise Disagrees(f"{f.name}: decoded {have!r}, want {want!r}")

            r.check(table, f"decode {kind}", decode)


def check_rust_tables(r: Report) -> None:
    for table, kind, keys in _core._schema_tables():
        spec = s.ITEMS.get(kind)
        want = sorted((*spec.names, "type")) if spec else ["<no such kind>"]
        r.check(table, f"{kind} dict keys", lambda keys=keys, want=want: expect(keys, want))
    est = _core.TokenEstimator()
    call, result = sample_dict(s.ITEMS["tool_call"]), sample_dict(s.ITEMS["tool_result"])
    for kind, spec in s.ITEMS.items():
        # A mapping that is exactly an item's dict form is measured natively (cut >= 0; the
        # reference's -1 - i otherwise). A pair half goes with its other half.
        history = {"tool_call": [call, result], "tool_result": [call, result]}.get(kind, [sample_dict(spec)])
        r.check(
            "rust/py/src/interop/mappings.rs",
            f"{kind} dict form taken natively",
            lambda history=history: expect(_core.mappings_cut(history, None, 10**6, est, "m") >= 0, True),
        )


def check_json_copy(r: Report) -> None:
    r.check(
        "python/ctxengine/model/schema.json",
        "the extension's schema",
        lambda: expect(_core.item_schema(), s.SCHEMA_TEXT),
    )


def test_every_table_agrees_with_the_item_schema() -> None:
    assert ctxengine  # the package (and its backend switch) is importable
    r = Report()
    check_json_copy(r)
    check_trust(r)
    check_python_items(r)
    check_parts(r)
    check_rendered(r)
    check_decoders(r)
    check_rust_tables(r)
    if r.found:
        pytest.fail(r.text(), pytrace=False)


def test_the_report_names_each_table_and_field() -> None:
    """A disagreement is named by table and field (the failure message the test relies on)."""
    r = Report()
    spec = s.RecordSpec("user_message", "UserMessage", (s.FieldSpec("principal", "str", True, None),))
    check_dataclass(r, "python/ctxengine/model/items.py", ITEM_TYPES["user_message"], spec)
    text = r.text()
    assert "python/ctxengine/model/items.py" in text
    assert "UserMessage fields" in text and "principal" in text
