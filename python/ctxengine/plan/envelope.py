"""Trust envelopes: content below trusted_configuration is fenced off as data.

``<untrusted trust=".." source=".." nonce="N">`` ... ``</untrusted:N>``. The
nonce is derived from the content's canonical digest, so it is the same on
every build and cannot be predicted by the content itself (it would have to
contain its own hash). Inside the envelope ``&``, ``<`` and ``>`` are
entity-escaped, so no text inside can form any tag, whole, partial, in any
case; NUL and the Unicode line/paragraph separators are escaped too, so
nothing can end a line that a downstream renderer would split on. Attribute
values get the same escaping plus ``"``.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata

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
_ATTR_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        '"': "&quot;",
        "'": "&#39;",
        "\x00": "&#0;",
        "\n": "&#10;",
        "\r": "&#13;",
        "\u2028": "&#x2028;",
        "\u2029": "&#x2029;",
    }
)
_BODY_PAIRS = tuple((chr(k), v) for k, v in _BODY_ESCAPES.items())
_ATTR_PAIRS = tuple((chr(k), v) for k, v in _ATTR_ESCAPES.items())
assert _BODY_PAIRS[0][0] == _ATTR_PAIRS[0][0] == "&"
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


def escape_attr(value: str) -> str:
    """``escape_body`` plus quotes, CR and LF (for attribute values)."""
    return _replaced(value, _ATTR_PAIRS)


#: Characters an identifier or metadata value may not carry as themselves into rendered
#: text outside an envelope: tag and entity syntax, quotes, the escape characters, and
#: the list separator of a metadata line.
_INLINE_UNSAFE = frozenset("%<>&\"'\\,")
#: Unicode categories that can end or reshape a line: controls (newlines included),
#: format characters (bidi overrides, zero-width), line and paragraph separators.
_INLINE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def escape_inline(value: str) -> str:
    """An untrusted identifier or metadata value made safe to print on a line of trusted text.

    Every character that could form delimiter or line structure is percent-encoded
    (its UTF-8 bytes as ``%XX``), ``%`` itself included, so the result is reversible
    and two different values never print the same. Plain ids (``dana``,
    ``web.search``, ``call_7``) are unchanged (ADR 0010)."""
    if value.isascii() and value.isprintable() and not _INLINE_UNSAFE.intersection(value):
        return value
    out = []
    for ch in value:
        if ch in _INLINE_UNSAFE or unicodedata.category(ch) in _INLINE_CATEGORIES:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return "".join(out)


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


__all__ = [
    "NONCE_HEX",
    "envelope",
    "escape_attr",
    "escape_body",
    "escape_inline",
    "json_inline",
    "needs_envelope",
    "nonce_for",
]
