"""Text a model wrote, or a store holds, made safe to print on a terminal.

A working state, a plan's reason, a run id, an event type, an error naming a row: printed
as they are, ESC and the other C0 and C1 controls drive the terminal (clear the screen,
set the window title, OSC 8 links, CSI cursor moves), bidi and other format characters
reorder or hide what is shown, line separators break lines. ``visible`` writes each such
character (the line-unsafe class of the envelopes, ``plan.envelope.LINE_UNSAFE_RANGES``:
Unicode categories Cc, Cf, Zl, Zp; and lone surrogates) as its Python escape
(``\\x1b``, ``\\u202e``, ``\\n``) and a backslash as two, so two different texts never
print the same and a printed escape is never mistaken for one of ours. Every string from
a model or a store that ``ctxengine`` prints goes through it; ``inspect`` hands the result
to rich as ``Text``, never as markup.
"""

from __future__ import annotations

import re

from ..plan.envelope import LINE_UNSAFE_RANGES

#: The envelopes' line-unsafe class (controls, format characters, line and paragraph
#: separators), lone surrogates, and the backslash (so a printed escape is always ours).
_SHOWN_ESCAPED = re.compile(
    "[\\\\" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in LINE_UNSAFE_RANGES) + "\ud800-\udfff]"
)
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def visible(text: str) -> str:
    """``text`` with every control, format and separator character written as its escape."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    return _SHOWN_ESCAPED.sub(_shown, text)


def _shown(match: re.Match[str]) -> str:
    ch = match.group()
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


__all__ = ["visible"]
