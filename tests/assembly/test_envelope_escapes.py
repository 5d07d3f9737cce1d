"""The envelope escapes replace character by character: the body as ``str.translate`` with
its table, attributes by the one rule of ADR 0010 (named entities for ``& < > "``, numeric
references for ``'`` and every line-unsafe character)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxengine.plan import envelope

SPECIAL = "&<>\"'\x00\n\r\u2028\u2029\x85\x0b\u202e\u2066\ufeff"
UNSAFE = {chr(c) for a, b in envelope.LINE_UNSAFE_RANGES for c in range(a, b + 1)}


def attr_char(ch: str) -> str:
    named = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
    if ch in named:
        return named[ch]
    if ch == "'" or ch in UNSAFE:
        return f"&#{ord(ch)};" if ord(ch) < 0x80 else f"&#x{ord(ch):x};"
    return ch


@given(st.text(alphabet=st.sampled_from(SPECIAL + "a&amp;lt#;")) | st.text())
def test_escapes_equal_translate(text: str) -> None:
    assert envelope.escape_body(text) == text.translate(envelope._BODY_ESCAPES)
    assert envelope.escape_attr(text) == "".join(attr_char(ch) for ch in text)
