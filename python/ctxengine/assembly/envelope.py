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
NONCE_HEX = 16


def nonce_for(digest: bytes) -> str:
    """The envelope nonce of content whose canonical SHA-256 digest is ``digest``."""
    return hashlib.sha256(b"ctxengine.envelope\x00" + digest).hexdigest()[:NONCE_HEX]


def escape_body(text: str) -> str:
    return text.translate(_BODY_ESCAPES)


def escape_attr(value: str) -> str:
    return value.translate(_ATTR_ESCAPES)


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


__all__ = ["NONCE_HEX", "envelope", "escape_attr", "escape_body", "needs_envelope", "nonce_for"]
