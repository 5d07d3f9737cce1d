"""Argument checks of the backend seam's entry points (ADR 0010).

Every entry point checks its arguments in signature order before any work,
and raises ``ArgumentError`` (the estimator's methods: ``EstimatorError``)
naming the argument, with the Rust backend's exact wording.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import ArgumentError, EstimatorError
from ..model import ITEM_TYPES
from ..model.body import BLOCK_KINDS
from .canonical import _SURROGATE, has_item_cache

# 64-bit counts: both backends compute in signed 64-bit integers.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# The tool-pair role of each conversation item kind.
CALL, RESULT, OTHER = 1, 2, 0
_ROLES = {"tool_call": CALL, "tool_result": RESULT}


def type_name(value: object) -> str:
    return type(value).__name__


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _role_of(tp: type, item: object) -> int | None:
    """The tool-pair role of a conversation item type; ``None`` for anything else.

    A conversation item is a value type with the ``_cj`` cache whose class
    ``kind`` names a conversation item (``model.ITEM_TYPES``).
    """
    kind = getattr(tp, "kind", None)
    if hasattr(tp, "_cj") and hasattr(item, "to_dict") and isinstance(kind, str) and kind in ITEM_TYPES:
        return _ROLES.get(kind, OTHER)
    return None


def _iterable(value: object) -> Iterator[Any] | None:
    """An iterator over an iterable other than a string, bytes or a mapping."""
    if isinstance(value, (str, bytes, bytearray, Mapping)):
        return None
    try:
        return iter(value)  # type: ignore[call-overload,no-any-return]
    except TypeError:
        return None


def _elements(value: object) -> list[Any] | None:
    """A list's or tuple's own elements (a subclass's data, as the Rust backend reads them)."""
    if type(value) is list:
        return value
    if isinstance(value, list):
        return list(list.__iter__(value))
    if isinstance(value, tuple):
        return list(tuple.__iter__(value))
    return None


def check_sequence(function: str, name: str, value: object, what: str) -> list[Any]:
    """An iterable other than a string, bytes or a mapping, as a list."""
    elements = _elements(value)
    if elements is not None:
        return elements
    it = _iterable(value)
    if it is None:
        raise ArgumentError(function, name, f"expected a sequence of {what}, got {type_name(value)}")
    return list(it)


def check_items(function: str, items: object, name: str = "items") -> tuple[list[Any], list[tuple[int, Any]]]:
    """Conversation items, with each one's ``(role, call_id)``."""
    values = check_sequence(function, name, items, "conversation items")
    roles: list[tuple[int, Any]] = []
    seen: dict[type, int | None] = {}  # per call: a type's class attributes do not change mid-call
    for index, item in enumerate(values):
        tp = type(item)
        role = seen[tp] if tp in seen else seen.setdefault(tp, _role_of(tp, item))
        if role is None:
            raise ArgumentError(
                function, f"{name}[{index}]", f"expected a conversation item, got {type_name(item)}"
            )
        call_id = None
        if role != OTHER:
            call_id = getattr(item, "call_id", None)
            if not isinstance(call_id, str):
                raise ArgumentError(
                    function, f"{name}[{index}].call_id", f"expected a str, got {type_name(call_id)}"
                )
            if type(call_id) is not str:
                call_id = str.__str__(call_id)  # a subclass counts as its data
        roles.append((role, call_id))
    return values, roles


def check_int(function: str, name: str, value: object) -> int:
    """A signed 64-bit int (not a bool)."""
    if not is_int(value):
        raise ArgumentError(function, name, f"expected an int, got {type_name(value)}")
    assert isinstance(value, int)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ArgumentError(function, name, f"out of range, got {int.__repr__(value)}")
    return int(value)


def check_optional_int(function: str, name: str, value: object) -> int | None:
    if value is None:
        return None
    if not is_int(value):
        raise ArgumentError(function, name, f"expected an int or None, got {type_name(value)}")
    return check_int(function, name, value)


def check_ratio(function: str, name: str, value: object) -> float:
    """An int or a float (not a bool), as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentError(function, name, f"expected a number, got {type_name(value)}")
    try:
        return float.__float__(value) if isinstance(value, float) else int.__float__(value)
    except OverflowError:
        raise ArgumentError(function, name, f"out of range, got {int.__repr__(value)}") from None


def check_token_limit(function: str, name: str, value: object) -> int:
    """A token limit compared with sums of whole-token counts (LangChain's ``max_tokens``):
    an int (a bool counts as one, as in LangChain) or a float, as the 64-bit int that
    compares alike with every count sum: rounded down and clamped, and NaN (which no
    sum is at most) as -1."""
    if isinstance(value, int):
        limit = int.__index__(value)
    elif isinstance(value, float):
        number = float.__float__(value)
        if math.isnan(number):
            return -1
        limit = INT64_MAX if number == math.inf else INT64_MIN if number == -math.inf else math.floor(number)
    else:
        raise ArgumentError(function, name, f"expected a number, got {type_name(value)}")
    return min(max(limit, INT64_MIN), INT64_MAX)


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def check_str(function: str, name: str, value: object) -> str:
    """A str that encodes as UTF-8 (no lone surrogate)."""
    if not isinstance(value, str):
        raise ArgumentError(function, name, f"expected a str, got {type_name(value)}")
    if _has_surrogate(value):
        raise ArgumentError(function, name, "lone surrogate in string")
    return value


def check_estimator(function: str, estimator: object) -> None:
    """Any object with ``raw_estimates(items, model_id)`` and ``corrected(raw_sum, model_id)``."""
    if not (
        callable(getattr(estimator, "raw_estimates", None))
        and callable(getattr(estimator, "corrected", None))
    ):
        raise ArgumentError(function, "estimator", f"expected a token estimator, got {type_name(estimator)}")


def check_cut_arguments(
    function: str, summary_floor: object, history_tokens: object, estimator: object, model_id: object
) -> tuple[int | None, int, str]:
    """The arguments of a cut after its history (``select_history`` and the foreign-history
    cuts), in signature order: ``(summary_floor, history_tokens, model_id)``."""
    floor = check_optional_int(function, "summary_floor", summary_floor)
    tokens = check_int(function, "history_tokens", history_tokens)
    check_estimator(function, estimator)
    return floor, tokens, check_str(function, "model_id", model_id)


def check_raw(function: str, raw: object, count: int) -> list[int]:
    """Measured raw estimates: one non-negative 64-bit int per item."""
    values = check_sequence(function, "raw", raw, "raw estimates")
    if len(values) != count:
        raise ArgumentError(function, "raw", f"{len(values)} estimates for {count} items")
    for index, value in enumerate(values):
        if check_int(function, f"raw[{index}]", value) < 0:
            raise ArgumentError(function, f"raw[{index}]", f"must not be negative, got {int.__repr__(value)}")
    return values


def _field(function: str, owner: str, value: object, field: str) -> Any:
    try:
        return getattr(value, field)
    except AttributeError:
        raise ArgumentError(function, f"{owner}.{field}", f"missing from {type_name(value)}") from None


def _table(function: str, name: str, value: object) -> dict[Any, Any]:
    """A dict (the backends look renders up in it by item digest)."""
    if not isinstance(value, dict):
        raise ArgumentError(function, name, f"expected a dict, got {type_name(value)}")
    return value


def _cap(function: str, name: str, value: object) -> int | None:
    """``None``, or a non-negative 64-bit int."""
    cap = check_optional_int(function, name, value)
    if cap is not None and cap < 0:
        raise ArgumentError(function, name, f"must not be negative, got {cap}")
    return cap


def _line(function: str, value: object) -> tuple[list[Any], list[Any], list[Any]] | None:
    """``None``, or a ``RenderLine``: three sequences of one length."""
    if value is None:
        return None
    parts = [
        check_sequence(function, f"inputs.line.{name}", _field(function, "inputs.line", value, name), name)
        for name in ("items", "renders", "pointers")
    ]
    if not len(parts[0]) == len(parts[1]) == len(parts[2]):
        raise ArgumentError(
            function,
            "inputs.line",
            f"{len(parts[0])} items, {len(parts[1])} renders and {len(parts[2])} pointers",
        )
    return parts[0], parts[1], parts[2]


def check_body_inputs(
    function: str, inputs: object
) -> tuple[
    list[Any],
    list[tuple[int, Any]],
    dict[Any, Any],
    dict[Any, Any],
    tuple[list[Any], list[Any], list[Any]] | None,
    list[Any],
]:
    """``BodyInputs``: the history (conversation items), the two render tables, the
    line (optional) and the blocks, each block a Region-B class of a known kind with
    rendered items."""
    history, roles = check_items(function, _field(function, "inputs", inputs, "history"), "inputs.history")
    renders = _table(function, "inputs.renders", _field(function, "inputs", inputs, "renders"))
    pointers = _table(function, "inputs.pointers", _field(function, "inputs", inputs, "pointers"))
    line = _line(function, getattr(inputs, "line", None))
    blocks = check_sequence(function, "inputs.blocks", _field(function, "inputs", inputs, "blocks"), "blocks")
    counts: dict[str, int] = {}
    for at, block in enumerate(blocks):
        where = f"inputs.blocks[{at}]"
        check_str(function, f"{where}.region_class", _field(function, where, block, "region_class"))
        kind = check_str(function, f"{where}.kind", _field(function, where, block, "kind"))
        if kind not in BLOCK_KINDS:
            raise ArgumentError(function, f"{where}.kind", f"unknown kind {kind!r}")
        items = check_sequence(function, f"{where}.items", _field(function, where, block, "items"), "items")
        for index, item in enumerate(items):
            if not has_item_cache(item):
                raise ArgumentError(
                    function, f"{where}.items[{index}]", f"expected a rendered item, got {type_name(item)}"
                )
        ids = check_sequence(function, f"{where}.ids", _field(function, where, block, "ids"), "ids")
        if kind == "passages" and len(ids) != len(items):
            raise ArgumentError(function, f"{where}.ids", f"{len(ids)} ids for {len(items)} passages")
        for index, ident in enumerate(ids):
            check_str(function, f"{where}.ids[{index}]", ident)
        _cap(function, f"{where}.max_items", _field(function, where, block, "max_items"))
        _cap(function, f"{where}.max_tokens", _field(function, where, block, "max_tokens"))
        counts[kind] = counts.get(kind, 0) + 1
        if kind in ("history", "working_state", "skills") and counts[kind] > 1:
            raise ArgumentError(function, f"{where}.kind", f"a second {kind} block")
    if counts.get("history", 0) != 1:
        raise ArgumentError(function, "inputs.blocks", "expected one history block")
    return history, roles, renders, pointers, line, blocks


def check_limits(function: str, limits: object) -> tuple[int, int, int, int | None, bool]:
    """``BodyLimits``."""
    usable = check_int(function, "limits.usable", _field(function, "limits", limits, "usable"))
    history_cap = check_int(function, "limits.history_cap", _field(function, "limits", limits, "history_cap"))
    tool_cap = check_int(function, "limits.tool_cap", _field(function, "limits", limits, "tool_cap"))
    floor = check_optional_int(
        function, "limits.summary_floor", _field(function, "limits", limits, "summary_floor")
    )
    compactable = _field(function, "limits", limits, "summary_compactable")
    if not isinstance(compactable, bool):
        raise ArgumentError(
            function, "limits.summary_compactable", f"expected a bool, got {type_name(compactable)}"
        )
    return usable, history_cap, tool_cap, floor, compactable


def estimator_raws(raws: object, count: int) -> list[int]:
    """What a foreign estimator's ``raw_estimates`` returned, checked."""
    if not isinstance(raws, (list, tuple)) or len(raws) != count:
        got = len(raws) if isinstance(raws, (list, tuple)) else type_name(raws)
        raise EstimatorError(f"estimator.raw_estimates returned {got} estimates for {count} items")
    for value in raws:
        if not is_int(value) or not 0 <= value <= INT64_MAX:
            raise EstimatorError(f"estimator.raw_estimates returned {value!r}, not a count")
    return list(raws)


def estimator_int(value: object, method: str) -> int:
    """What a foreign estimator's ``corrected`` returned, checked."""
    if not is_int(value):
        raise EstimatorError(f"estimator.{method} returned {type_name(value)}, not an int")
    assert isinstance(value, int)
    return value


def check_model_id(value: object) -> str:
    """The estimator methods' ``model_id``."""
    if not isinstance(value, str):
        raise EstimatorError(f"model_id: expected a str, got {type_name(value)}")
    if _has_surrogate(value):
        raise EstimatorError("model_id: lone surrogate in string")
    return value


def check_values(name: str, value: object) -> list[Any]:
    """The estimator methods' sequences of values (any canonicalizable values)."""
    elements = _elements(value)
    if elements is not None:
        return elements
    it = _iterable(value)
    if it is None:
        raise EstimatorError(f"{name}: expected a sequence of values, got {type_name(value)}")
    return list(it)


__all__ = [
    "CALL",
    "INT64_MAX",
    "INT64_MIN",
    "OTHER",
    "RESULT",
    "check_body_inputs",
    "check_cut_arguments",
    "check_estimator",
    "check_int",
    "check_items",
    "check_limits",
    "check_model_id",
    "check_optional_int",
    "check_ratio",
    "check_raw",
    "check_sequence",
    "check_str",
    "check_token_limit",
    "check_values",
    "estimator_int",
    "estimator_raws",
    "is_int",
    "type_name",
]
