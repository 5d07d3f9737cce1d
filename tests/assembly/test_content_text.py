"""The content text of a message is written in one place per backend: the Rust core's
``ctxengine_core::render::content_text`` and the reference's ``model.content.content_text``
(issue 38). A trusted message renders its content text verbatim, so the native render of
one is the Rust backend's content text; a pointer's ``byte_length`` measures it too."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.assembly.render import render_pointer
from ctxengine.assembly.request import RenderedItem
from ctxengine.core import backends
from ctxengine.model import (
    FileRef,
    SystemMessage,
    TextPart,
    ToolResult,
    TrustLevel,
    UserMessage,
    content_text,
)

RUST = backends.module("rust")
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
parts = st.lists(
    st.builds(TextPart, texts) | st.builds(FileRef, texts, texts, st.none() | texts), max_size=5
).map(tuple)
contents = texts | parts


@settings(max_examples=300)
@given(contents)
def test_the_native_content_text_is_the_references(content: str | tuple[TextPart | FileRef, ...]) -> None:
    items = [
        UserMessage(content, trust=TrustLevel.PLATFORM),
        SystemMessage(content, trust=TrustLevel.TRUSTED_CONFIGURATION),
    ]
    for rendered in RUST.render_items(items, "history", RenderedItem):
        assert rendered.text == content_text(content)


@settings(max_examples=200)
@given(contents)
def test_a_native_pointer_measures_the_references_content_text(
    content: str | tuple[TextPart | FileRef, ...],
) -> None:
    item = ToolResult("c", content, seq=3)
    (native,) = RUST.render_pointers([item], RenderedItem)
    assert native == render_pointer(item)
    prefix = "[tool result elided under context pressure] "
    pointer = json.loads(native.text.removeprefix(prefix))
    assert pointer["byte_length"] == len(content_text(content).encode("utf-8"))


def test_file_references_and_parts() -> None:
    content = (TextPart("see"), FileRef("art-1", "image/png", "a.png"), TextPart(""), FileRef("é ]", "x/y"))
    (rendered,) = RUST.render_items(
        [UserMessage(content, trust=TrustLevel.PLATFORM)], "history", RenderedItem
    )
    assert rendered.text == content_text(content) == "see\n[file art-1 image/png]\n\n[file é ] x/y]"
