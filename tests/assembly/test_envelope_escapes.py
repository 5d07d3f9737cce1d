"""The envelope escapes replace character by character, as ``str.translate`` with their tables."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxengine.plan import envelope

SPECIAL = "&<>\"'\x00\n\r\u2028\u2029"


@given(st.text(alphabet=st.sampled_from(SPECIAL + "a&amp;lt#;")) | st.text())
def test_escapes_equal_translate(text: str) -> None:
    assert envelope.escape_body(text) == text.translate(envelope._BODY_ESCAPES)
    assert envelope.escape_attr(text) == text.translate(envelope._ATTR_ESCAPES)
