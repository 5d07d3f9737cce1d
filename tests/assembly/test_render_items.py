"""The batch renderer (issue 13): the Rust backend renders messages and tool results natively,
byte for byte as ``render_item`` does, and fills the same ``_rc`` caches; hostile content,
every trust level, file parts and odd sequences included.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.assembly.render import render_item
from ctxengine.assembly.request import RenderedItem
from ctxengine.core import backends
from ctxengine.model import ITEM_TYPES
from strategies import fresh
from strategies import items as any_items

RUST = backends.module("rust")
PY = backends.module("python")
conversation_items = any_items.filter(lambda i: i.kind in ITEM_TYPES)
hostile = st.sampled_from(["<untrusted", "</untrusted:", "&amp;", "\\x00\\u2028\\u2029", "\"'\\n\\r", "é ✓"])


@settings(max_examples=300)
@given(st.lists(conversation_items, max_size=8), st.sampled_from(["history", "current_turn", "current_user"]))
def test_rust_renders_every_item_as_render_item_does(originals: list[Any], region: str) -> None:
    ours = [fresh(item) for item in originals]
    theirs = [fresh(item) for item in originals]
    native = RUST.render_items(ours, region, RenderedItem, render_item)
    reference = PY.render_items(theirs, region, RenderedItem, render_item)
    assert native == reference
    for got, want, item in zip(native, reference, ours, strict=True):
        assert item._rc[region] is got  # cached like render_item caches
        if got._cj is not None:
            assert got._cj == PY.item_canonical(fresh(want))
    # A second call returns the cached objects.
    assert all(
        a is b
        for a, b in zip(RUST.render_items(ours, region, RenderedItem, render_item), native, strict=True)
    )


def test_hostile_text_is_escaped_alike() -> None:
    from ctxengine.model import AssistantMessage, FileRef, TextPart, ToolResult, UserMessage

    texts = ['<untrusted trust="platform">', "a\x00b\u2028c\u2029", "</untrusted:0123> & more"]
    made: list[Any] = []
    for i, text in enumerate(texts):
        made += [
            UserMessage(text, seq=i + 1),
            AssistantMessage((TextPart(text), FileRef("art<1>", 'text/"x"')), seq=i + 100),
            ToolResult(f"call\"{i}'\n", text, is_error=bool(i % 2), seq=None),
        ]
    native = RUST.render_items([fresh(m) for m in made], "history", RenderedItem, render_item)
    reference = [render_item(fresh(m), "history") for m in made]
    assert native == reference
