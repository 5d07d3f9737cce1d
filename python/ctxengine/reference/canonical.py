"""RFC 8785 (JCS) canonical JSON and SHA-256 payload hashes, in pure Python.

The contract is ADR 0001; what it accepts, ADR 0010. The walker appends ``str`` fragments to a list and
encodes once; conversation items splice their cached bytes (``_cj``) in
directly. Error paths are built on the way back up the recursion, so the
common, successful case never formats a path.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import OrderedDict, defaultdict
from enum import Enum
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
#
# One nesting budget for the whole value (ADR 0010): every mapping, sequence
# and value type counts one level. A value type's ``to_dict()`` must return a
# dict, which is that same level, so an item is exactly one JSON object and
# its cached bytes nest exactly the levels it takes wherever it is spliced.
# ``depth`` below is always the level of the enclosing value (0 at the root).

# Subclasses of the JSON types are refused (ADR 0010), except enum members
# (their builtin data) and these dicts, which keep their members in the dict.
_PLAIN_DICTS = (dict, OrderedDict, defaultdict)


def has_item_cache(value: object) -> bool:
    """Conversation items and ``ToolSpec`` carry the ``_cj`` slot."""
    return hasattr(type(value), "_cj") and hasattr(value, "to_dict")


def _read_cache(item: object) -> tuple[bytes, bytes] | None:
    """The item's ``_cj`` when well formed: ``(bytes, 32-byte digest)``."""
    cached = getattr(item, "_cj", None)
    if (
        type(cached) is tuple
        and len(cached) == 2
        and type(cached[0]) is bytes
        and type(cached[1]) is bytes
        and len(cached[1]) == 32
    ):
        return cached
    return None


def _write(value: Any, sink: _Sink, depth: int, active: set[int]) -> None:
    """Append ``value``; ``depth`` is the level of its enclosing value (0 at the root)."""
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


def _refuse(value: object, base: str) -> _Failure:
    return _Failure(f"unsupported subclass {type(value).__name__} of {base}")


def _write_other(value: object, sink: _Sink, depth: int, active: set[int]) -> None:
    """Subclasses of the JSON types (enum members and plain dicts only), then value types."""
    if isinstance(value, str):
        if not isinstance(value, Enum):
            raise _refuse(value, "str")
        sink.parts.append(_quote(str.__str__(value)))  # the string data, not Enum.__str__
    elif isinstance(value, int):  # bool cannot be subclassed: the exact check caught it
        if not isinstance(value, Enum):
            raise _refuse(value, "int")
        sink.parts.append(_format_int(int.__int__(value)))
    elif isinstance(value, float):
        if not isinstance(value, Enum):
            raise _refuse(value, "float")
        sink.parts.append(_format_finite(float.__float__(value)))
    elif isinstance(value, dict):
        if type(value) not in _PLAIN_DICTS:
            raise _refuse(value, "dict")
        _write_dict(value, sink, depth, active)
    elif isinstance(value, list):
        raise _refuse(value, "list")
    elif isinstance(value, tuple):
        raise _refuse(value, "tuple")
    elif has_item_cache(value):
        _write_item(value, sink, depth, active)
    elif callable(getattr(value, "to_dict", None)):
        _write_object(value, sink, depth, active, "cycle: value contains itself")
    else:
        raise _Failure(f"unsupported type {type(value).__name__}")


def _enter(container: object, depth: int, active: set[int], cycle: str) -> int:
    """The one gate of every level: cycle first, then the budget."""
    ident = id(container)
    if ident in active:
        raise _Failure(cycle)
    if depth >= MAX_DEPTH:
        raise _Failure(f"nesting deeper than {MAX_DEPTH}")
    active.add(ident)
    return ident


def _utf16_order(entry: tuple[str, Any]) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like UTF-16 code units.
    return entry[0].encode("utf-16-be")


def _write_dict(mapping: dict[Any, Any], sink: _Sink, depth: int, active: set[int]) -> None:
    ident = _enter(mapping, depth, active, "cycle: container contains itself")
    entries: list[tuple[str, Any]] = []
    ascii_only = True
    for key, value in dict.items(mapping):  # the dict's own members, in its own order
        if type(key) is not str:
            if not isinstance(key, str):
                raise _Failure(f"object key {key!r} is not a string")
            if not isinstance(key, Enum):
                raise _Failure(f"object key of unsupported subclass {type(key).__name__} of str")
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
    ident = _enter(items, depth, active, "cycle: container contains itself")
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


def _write_object(value: Any, sink: _Sink, depth: int, active: set[int], cycle: str) -> None:
    """A value type as its ``to_dict()``: the hop and the dict are one level."""
    ident = _enter(value, depth, active, cycle)
    result = value.to_dict()
    if type(result) not in _PLAIN_DICTS:
        raise _Failure(f"{type(value).__name__}.to_dict() returned {type(result).__name__}, not a dict")
    _write_dict(result, sink, depth, active)
    active.discard(ident)


def _write_item(item: Any, sink: _Sink, depth: int, active: set[int]) -> None:
    """An item splices its cached bytes when they fit the budget left here."""
    cached = _read_cache(item)
    if cached is None:
        sink.splice(_item_fresh(item, depth, active)[0])
        return
    if id(item) in active:
        raise _Failure("cycle: item contains itself")
    if depth < MAX_DEPTH and _nesting_within(cached[0], MAX_DEPTH - depth):
        sink.splice(cached[0])
        return
    # Too deep here: walk it to name the path (the cache stays).
    _write_object(item, sink, depth, active, "cycle: item contains itself")


def _item_fresh(item: Any, depth: int, active: set[int]) -> tuple[bytes, bytes]:
    """An item's bytes (at ``depth + 1``, error paths continuing the enclosing
    walk's), then its ``_cj`` filled."""
    sink = _Sink()
    _write_object(item, sink, depth, active, "cycle: item contains itself")
    data = sink.getvalue()
    pair = (data, hashlib.sha256(data).digest())
    object.__setattr__(item, "_cj", pair)
    return pair


def _nesting(data: bytes) -> int:
    """The deepest bracket nesting of canonical JSON (brackets in strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth = max(depth - 1, 0)
    return deepest


def _nesting_within(data: bytes, budget: int) -> bool:
    """``_nesting(data) <= budget``, usually without the scan (a nesting of d
    needs 2d bytes and d opening brackets)."""
    if len(data) // 2 <= budget:
        return True
    return data.count(b"[") + data.count(b"{") <= budget or _nesting(data) <= budget


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
    cached = _read_cache(item)
    if cached is not None:
        return cached
    try:
        return _item_fresh(item, 0, set())
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
