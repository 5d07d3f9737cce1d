"""Field checks shared by the value types' constructors and ``from_dict`` decoders."""

from __future__ import annotations

from typing import Any

from ..errors import ModelValidationError

JSON = Any


def _require(type_name: str, name: str, value: object, kind: type | tuple[type, ...]) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ModelValidationError(type_name, name, f"expected {expected}, got {type(value).__name__}")


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


def _tuple_of(type_name: str, name: str, value: object, kind: type) -> tuple[Any, ...]:
    if not isinstance(value, (list, tuple)):
        raise ModelValidationError(type_name, name, f"expected a sequence, got {type(value).__name__}")
    for i, entry in enumerate(value):
        if not isinstance(entry, kind):
            raise ModelValidationError(
                type_name, f"{name}[{i}]", f"expected {kind.__name__}, got {type(entry).__name__}"
            )
    return tuple(value)
