"""Trust envelopes: content below trusted_configuration is fenced off as data.

``<untrusted trust=".." source=".." nonce="N">`` ... ``</untrusted:N>``. The
nonce is derived from the content's canonical digest, so it is the same on
every build and cannot be predicted by the content itself (it would have to
contain its own hash). Inside the envelope ``&``, ``<`` and ``>`` are
entity-escaped, so no text inside can form any tag, whole, partial, in any
case; NUL and the Unicode line/paragraph separators are escaped too, so
nothing can end a line that a downstream renderer would split on.

Attribute values (``trust``, ``source``: a tool call id, a passage id) and inline
metadata fields are escaped by one rule (ADR 0010): their syntax characters and every
character of ``LINE_UNSAFE_RANGES`` (controls, format characters, line and paragraph
separators), as entities in an attribute and percent-encoded on a metadata line.
"""

from __future__ import annotations

import hashlib
import json
import re

from ..model import TrustLevel

_BODY_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "\x00": "&#0;",
        "\u2028": "&#x2028;",
        "\u2029": "&#x2029;",
    }
)
_BODY_PAIRS = tuple((chr(k), v) for k, v in _BODY_ESCAPES.items())
assert _BODY_PAIRS[0][0] == "&"

#: The characters no attribute value or inline field may carry as themselves, so that none
#: can end a line (``str.splitlines`` splits on some of each kind), reorder one (bidi
#: controls) or hide text (zero-width): the Unicode general categories Cc, Cf, Zl and Zp.
#: Inclusive ranges, pinned at Unicode 15.0 (Python 3.11's database is 14.0; 15.0 added
#: U+13439-U+1343F), so that rendered bytes do not depend on the interpreter's Unicode
#: version. The Rust core holds the same table (``rust/core/src/envelope.rs``).
LINE_UNSAFE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)
_LINE_UNSAFE_CLASS = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in LINE_UNSAFE_RANGES)
NONCE_HEX = 16


def nonce_for(digest: bytes) -> str:
    """The envelope nonce of content whose canonical SHA-256 digest is ``digest``."""
    return hashlib.sha256(b"ctxengine.envelope\x00" + digest).hexdigest()[:NONCE_HEX]


def _replaced(text: str, pairs: tuple[tuple[str, str], ...]) -> str:
    # ``str.translate`` with these tables takes its slow per-character path (a target
    # outside Latin-1): about 20 ns a character, a millisecond for a carried summary.
    # Replacing "&" first and then each other character gives the same text, since no
    # replacement holds a character replaced after it.
    for char, escaped in pairs:
        if char in text:
            text = text.replace(char, escaped)
    return text


def escape_body(text: str) -> str:
    """``text`` with ``&``, ``<``, ``>``, NUL and the Unicode line separators escaped."""
    return _replaced(text, _BODY_PAIRS)


#: What an attribute value may not carry as itself: tag and entity syntax, both quotes,
#: and the line-unsafe characters.
_ATTR_UNSAFE = re.compile(f"[&<>\"'{_LINE_UNSAFE_CLASS}]")
_ATTR_SYNTAX = frozenset("&<>\"'")
_ATTR_NAMED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def _attr_entity(match: re.Match[str]) -> str:
    char = match.group()
    named = _ATTR_NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"&#{code};" if code < 0x80 else f"&#x{code:x};"


def escape_attr(value: str) -> str:
    """An attribute value that cannot end its quotes, its tag or its line (ADR 0010).

    ``& < > "`` as named entities; ``'`` and every line-unsafe character as a numeric
    character reference, decimal below U+0080 (``&#39;``, ``&#10;``) and hexadecimal
    above (``&#x85;``, ``&#x202e;``). Plain values (``tool:call_7``) are unchanged."""
    # Printable ASCII holds no line-unsafe character: most values take this path.
    if value.isascii() and value.isprintable() and _ATTR_SYNTAX.isdisjoint(value):
        return value
    return _ATTR_UNSAFE.sub(_attr_entity, value)


#: What an identifier or metadata value may not carry as itself onto a line of trusted
#: text: tag and entity syntax, quotes, the escape characters, the list separator of a
#: metadata line, and the line-unsafe characters.
_INLINE_UNSAFE = re.compile(f"[%<>&\"'\\\\,{_LINE_UNSAFE_CLASS}]")
_INLINE_SYNTAX = frozenset("%<>&\"'\\,")


def _percent(match: re.Match[str]) -> str:
    return "".join(f"%{b:02X}" for b in match.group().encode("utf-8", "surrogatepass"))


def escape_inline(value: str) -> str:
    """An untrusted identifier or metadata value made safe to print on a line of trusted text.

    Every character that could form delimiter or line structure is percent-encoded
    (its UTF-8 bytes as ``%XX``), ``%`` itself included, so the result is reversible
    and two different values never print the same. Plain ids (``dana``,
    ``web.search``, ``call_7``) are unchanged (ADR 0010)."""
    if value.isascii() and value.isprintable() and _INLINE_SYNTAX.isdisjoint(value):
        return value
    return _INLINE_UNSAFE.sub(_percent, value)


def json_inline(value: object) -> str:
    """``value`` as one line of JSON (sorted keys) in which no string can form a tag or end a line:
    ``<``, ``>`` and ``&`` are written as JSON's own ``\\u003c``-style escapes, so it stays valid
    JSON and decodes to the same value."""
    text = json.dumps(value, sort_keys=True)  # ASCII-only: controls and separators are \\u-escaped
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def needs_envelope(trust: TrustLevel) -> bool:
    return not trust.is_trusted()


def envelope(text: str, *, trust: TrustLevel, source: str, digest: bytes) -> str:
    """``text`` as the model sees it: verbatim when trusted, otherwise fenced and escaped."""
    if not needs_envelope(trust):
        return text
    nonce = nonce_for(digest)
    return (
        f'<untrusted trust="{escape_attr(trust.value)}" source="{escape_attr(source)}" nonce="{nonce}">'
        f"{escape_body(text)}</untrusted:{nonce}>"
    )


def clipped_envelope(
    head: str,
    tail: str,
    *,
    trust: TrustLevel,
    source: str,
    digest: bytes,
    byte_length: int,
    event: int | None,
) -> str:
    """The head and tail of a text of ``byte_length`` UTF-8 bytes, as the model sees an item
    too large to show whole (ADR 0021). Fenced: the item's own envelope (its nonce, from the
    whole item's ``digest``) marked on its opening tag, and the omitted middle as a tag the
    escaped content cannot form. Trusted: a platform line before it and one in the middle."""
    omitted = byte_length - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
    where = "" if event is None else f' event="{event}"'
    if not needs_envelope(trust):
        mark = f"event {event}" if event is not None else "this item"
        return (
            f"[truncated: the head and tail of {mark}, {byte_length} bytes in all]\n{head}"
            f"\n[{omitted} bytes omitted]\n{tail}"
        )
    nonce = nonce_for(digest)
    return (
        f'<untrusted trust="{escape_attr(trust.value)}" source="{escape_attr(source)}" nonce="{nonce}" '
        f'truncated="head+tail" byte_length="{byte_length}"{where}>'
        f'{escape_body(head)}<omitted:{nonce} bytes="{omitted}"/>{escape_body(tail)}</untrusted:{nonce}>'
    )


__all__ = [
    "LINE_UNSAFE_RANGES",
    "clipped_envelope",
    "NONCE_HEX",
    "envelope",
    "escape_attr",
    "escape_body",
    "escape_inline",
    "json_inline",
    "needs_envelope",
    "nonce_for",
]
