"""Field checks shared by the value types' constructors and ``from_dict`` decoders."""

from __future__ import annotations

from typing import Any

from ..errors import ModelValidationError

JSON = Any


def _require(type_name: str, name: str, value: object, kind: type | tuple[type, ...]) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ModelValidationError(type_name, name, f"expected {expected}, got {type(value).__name__}")


def _text(type_name: str, name: str, value: object) -> None:
    """``value`` is a str that UTF-8 can hold: a lone surrogate (from a ``surrogateescape``
    decode or a ``\\ud800`` JSON escape) is refused here, at construction, not at the append
    that would write it. Cheap on the hot path: ASCII text is never encoded."""
    _require(type_name, name, value, str)
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            char = ord(exc.object[exc.start])
            raise ModelValidationError(
                type_name,
                name,
                f"lone surrogate U+{char:04X} at index {exc.start}: the text is not valid UTF-8 and "
                "cannot be stored; decode the source with errors='replace' (or drop the character)",
            ) from None


def _optional_int(type_name: str, name: str, value: object) -> None:
    if value is not None:
        _require(type_name, name, value, int)


def _get(d: dict[str, Any], type_name: str, key: str, default: Any = ...) -> Any:
    if not isinstance(d, dict):
        raise ModelValidationError(type_name, "<dict>", f"expected a dict, got {type(d).__name__}")
    if key in d:
        return d[key]
    if default is ...:
        raise ModelValidationError(type_name, key, "missing")
    return default


def _get_list(d: dict[str, Any], type_name: str, key: str) -> list[Any]:
    """``d[key]`` when it is a JSON array; missing means empty; anything else names the field."""
    value = _get(d, type_name, key, [])
    if not isinstance(value, list):
        raise ModelValidationError(type_name, key, f"expected a list, got {type(value).__name__}")
    return value


def _str_set(type_name: str, name: str, value: object) -> frozenset[str]:
    """A frozenset of strings from any iterable of them; anything else names the field."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ModelValidationError(
            type_name, name, f"expected a collection of str, got {type(value).__name__}"
        )
    for entry in value:
        if not isinstance(entry, str):
            raise ModelValidationError(type_name, name, f"expected str entries, got {type(entry).__name__}")
    return frozenset(value)


def _tuple_of(type_name: str, name: str, value: object, kind: type | tuple[type, ...]) -> tuple[Any, ...]:
    if not isinstance(value, (list, tuple)):
        raise ModelValidationError(type_name, name, f"expected a sequence, got {type(value).__name__}")
    for i, entry in enumerate(value):
        if not isinstance(entry, kind):
            expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise ModelValidationError(
                type_name, f"{name}[{i}]", f"expected {expected}, got {type(entry).__name__}"
            )
    return tuple(value)
