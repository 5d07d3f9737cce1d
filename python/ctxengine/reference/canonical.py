"""RFC 8785 (JCS) canonical JSON and SHA-256 payload hashes, in pure Python.

The contract is ADR 0001. The walker appends ``str`` fragments to a list and
encodes once; conversation items splice their cached bytes (``_cj``) in
directly. Error paths are built on the way back up the recursion, so the
common, successful case never formats a path.
"""

from __future__ import annotations

import hashlib
import math
import re
from operator import itemgetter
from typing import Any

from ..errors import CanonicalizationError

MAX_SAFE_INTEGER = 2**53 - 1
MAX_DEPTH = 128

# JCS string escaping: the two mandatory escapes, the five short forms, and
# ``\u00xx`` (lowercase hex) for every other code point below U+0020.
_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f]')
_CONTROL = re.compile("[\x00-\x1f]")
_CONTROL_ESCAPES: dict[int, str] = {code: f"\\u{code:04x}" for code in range(0x20)}
_CONTROL_ESCAPES.update({ord("\b"): "\\b", ord("\f"): "\\f"})
# A Python str holds code points, so any surrogate in it is unpaired in UTF-8 terms.
_SURROGATE = re.compile("[\ud800-\udfff]")


_first = itemgetter(0)


class _Failure(Exception):
    """Internal: a rejected value. ``segments`` collect the path innermost first."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str] = []

    def to_error(self) -> CanonicalizationError:
        return CanonicalizationError("$" + "".join(reversed(self.segments)), self.reason)


class _Sink:
    """Output buffer: ``str`` fragments, plus already-encoded chunks spliced in."""

    __slots__ = ("chunks", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.chunks: list[bytes] = []

    def splice(self, data: bytes) -> None:
        if self.parts:
            self.chunks.append("".join(self.parts).encode("utf-8"))
            self.parts.clear()
        self.chunks.append(data)

    def getvalue(self) -> bytes:
        tail = "".join(self.parts).encode("utf-8")
        if not self.chunks:
            return tail
        if tail:
            self.chunks.append(tail)
        return b"".join(self.chunks)


# --------------------------------------------------------------------------
# scalars


def _quote(text: str) -> str:
    """The JCS string literal of ``text`` (quotes included)."""
    if not text.isascii() and _SURROGATE.search(text):
        raise _Failure("lone surrogate in string")
    if _NEEDS_ESCAPE.search(text):
        # str.replace is fast; the rarer control characters go through a table.
        text = (
            text.replace("\\", "\\\\")
            .replace('"', '\\"')
            .replace("\n", "\\n")
            .replace("\r", "\\r")
            .replace("\t", "\\t")
        )
        if _CONTROL.search(text):
            text = text.translate(_CONTROL_ESCAPES)
    return f'"{text}"'


def format_float(value: float) -> str:
    """ECMAScript ``Number.prototype.toString`` of a finite float (RFC 8785 §3.2.2.3)."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{value!r} is not a finite number")
    if value == 0.0:
        return "0"  # covers -0.0
    sign = "-" if value < 0.0 else ""
    # repr() gives the shortest round-trip digits; only the layout differs.
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    digits = significant.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        fraction_part = f".{digits[1:]}" if k > 1 else ""
        body = f"{digits[0]}{fraction_part}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def _format_int(value: int) -> str:
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return int.__repr__(value)
    raise _Failure("integer outside ±(2**53-1)")


def _format_finite(value: float) -> str:
    try:
        return format_float(value)
    except ValueError:
        raise _Failure(f"{value!r} is not a finite number") from None


# --------------------------------------------------------------------------
# the walker


def has_item_cache(value: object) -> bool:
    """Conversation items and ``ToolSpec`` carry the ``_cj`` slot."""
    return hasattr(type(value), "_cj") and hasattr(value, "to_dict")


def _write(value: Any, sink: _Sink, depth: int, active: set[int]) -> None:
    """Append ``value``; ``depth`` is the depth of its enclosing container (0 at the root)."""
    kind = type(value)
    # exact types first, most frequent first
    if kind is str:
        sink.parts.append(_quote(value))
    elif kind is dict:
        _write_dict(value, sink, depth, active)
    elif kind is list or kind is tuple:
        _write_array(value, sink, depth, active)
    elif kind is int:
        sink.parts.append(_format_int(value))
    elif kind is bool:
        sink.parts.append("true" if value else "false")
    elif value is None:
        sink.parts.append("null")
    elif kind is float:
        sink.parts.append(_format_finite(value))
    else:
        _write_other(value, sink, depth, active)


def _write_other(value: object, sink: _Sink, depth: int, active: set[int]) -> None:
    """Subclasses of the JSON types, then value types."""
    if isinstance(value, str):
        sink.parts.append(_quote(str.__str__(value)))  # the string data, not Enum.__str__
    elif isinstance(value, int):  # bool cannot be subclassed: the exact check caught it
        sink.parts.append(_format_int(int.__int__(value)))
    elif isinstance(value, float):
        sink.parts.append(_format_finite(float.__float__(value)))
    elif isinstance(value, dict):
        _write_dict(value, sink, depth, active)
    elif isinstance(value, (list, tuple)):
        _write_array(value, sink, depth, active)
    elif has_item_cache(value):
        sink.splice(_item_cache(value, active)[0])
    elif callable(getattr(value, "to_dict", None)):
        ident = id(value)
        if ident in active:
            raise _Failure("cycle: value contains itself")
        active.add(ident)
        _write(value.to_dict(), sink, depth, active)  # type: ignore[attr-defined]
        active.discard(ident)
    else:
        raise _Failure(f"unsupported type {type(value).__name__}")


def _enter(container: object, depth: int, active: set[int]) -> int:
    """Check a container before writing it: cycle first, then depth."""
    ident = id(container)
    if ident in active:
        raise _Failure("cycle: container contains itself")
    if depth >= MAX_DEPTH:
        raise _Failure(f"nesting deeper than {MAX_DEPTH}")
    active.add(ident)
    return ident


def _utf16_order(entry: tuple[str, Any]) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like UTF-16 code units.
    return entry[0].encode("utf-16-be")


def _write_dict(mapping: dict[Any, Any], sink: _Sink, depth: int, active: set[int]) -> None:
    ident = _enter(mapping, depth, active)
    entries: list[tuple[str, Any]] = []
    ascii_only = True
    for key, value in mapping.items():
        if type(key) is not str:
            if not isinstance(key, str):
                raise _Failure(f"object key {key!r} is not a string")
            key = str.__str__(key)
        if not key.isascii():
            ascii_only = False
            if _SURROGATE.search(key):
                raise _Failure(f"lone surrogate in object key {key!r}")
        entries.append((key, value))
    # Code point order equals UTF-16 order unless a key has a non-BMP character.
    entries.sort(key=_first if ascii_only else _utf16_order)
    parts = sink.parts  # splice() clears this list in place, never replaces it
    parts.append("{")
    for index, (key, value) in enumerate(entries):
        parts.append(f",{_quote(key)}:" if index else f"{_quote(key)}:")
        try:
            _write(value, sink, depth + 1, active)
        except _Failure as failure:
            failure.segments.append("." + key)
            raise
    parts.append("}")
    active.discard(ident)


def _write_array(items: list[Any] | tuple[Any, ...], sink: _Sink, depth: int, active: set[int]) -> None:
    ident = _enter(items, depth, active)
    sink.parts.append("[")
    for index, item in enumerate(items):
        if index:
            sink.parts.append(",")
        try:
            _write(item, sink, depth + 1, active)
        except _Failure as failure:
            failure.segments.append(f"[{index}]")
            raise
    sink.parts.append("]")
    active.discard(ident)


def _item_cache(item: Any, active: set[int]) -> tuple[bytes, bytes]:
    """The item's ``(canonical_bytes, sha256_digest)``, filling ``_cj`` on first use.

    An item is canonicalized as a root of its own (depth starts again at 1),
    so its bytes never depend on where it sits and the cache is always valid.
    """
    cached: tuple[bytes, bytes] | None = item._cj
    if cached is not None:
        return cached
    ident = id(item)
    if ident in active:
        raise _Failure("cycle: item contains itself")
    active.add(ident)
    sink = _Sink()
    _write(item.to_dict(), sink, 0, active)
    active.discard(ident)
    data = sink.getvalue()
    pair = (data, hashlib.sha256(data).digest())
    object.__setattr__(item, "_cj", pair)
    return pair


# --------------------------------------------------------------------------
# public API


def canonical_json(value: object) -> bytes:
    """RFC 8785 canonical bytes of ``value``; ``CanonicalizationError`` names the bad path."""
    sink = _Sink()
    try:
        _write(value, sink, 0, set())
    except _Failure as failure:
        raise failure.to_error() from None
    return sink.getvalue()


def payload_hash(value: object) -> str:
    """Lowercase SHA-256 hex of ``canonical_json(value)`` (items reuse their cached digest)."""
    if has_item_cache(value):
        return item_canonical(value)[1].hex()
    return hashlib.sha256(canonical_json(value)).hexdigest()


def item_canonical(item: object) -> tuple[bytes, bytes]:
    """``(canonical_bytes, sha256_digest)`` of a conversation item or ``ToolSpec``, cached in ``_cj``."""
    if not has_item_cache(item):
        raise CanonicalizationError("$", f"{type(item).__name__} has no canonical cache slot")
    try:
        return _item_cache(item, set())
    except _Failure as failure:
        raise failure.to_error() from None


__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "canonical_json",
    "format_float",
    "has_item_cache",
    "item_canonical",
    "payload_hash",
]
