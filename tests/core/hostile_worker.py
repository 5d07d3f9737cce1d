"""The subprocess side of ``test_hostile_values.py``.

Reads one JSON request per line on stdin: a recipe for a hostile value (or
a call with hostile arguments) and the entry points to run it through. It
builds the value afresh for each backend, runs every entry point under both,
and writes one JSON line of outcomes: ``["ok", result]`` or ``["error",
type name, message]``. A native crash kills this process, never the test run.
"""

from __future__ import annotations

import collections
import enum
import json
import sys
import threading
from typing import Any

from ctxengine.core import backends
from ctxengine.model import ReasoningItem, ToolCall, ToolResult, UserMessage

MODEL = "hostile:model"


class Hop:
    """A value type (not an item): ``to_dict()`` wraps what it holds."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def to_dict(self) -> Any:
        return {"x": self.inner}


class RawHop(Hop):
    """A value type whose ``to_dict()`` returns what it holds, dict or not."""

    def to_dict(self) -> Any:
        return self.inner


class MyStr(str):
    def __str__(self) -> str:
        return "forged"


class MyInt(int):
    def __str__(self) -> str:
        return "forged"


class MyFloat(float):
    pass


class MyDict(dict):  # type: ignore[type-arg]
    def items(self) -> Any:  # type: ignore[override]
        return [("forged", 1)]


class MyList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        return iter(["forged"])


class MyTuple(tuple):  # type: ignore[type-arg]
    pass


class Colour(enum.IntEnum):
    RED = 7


class Tone(enum.StrEnum):
    LOW = "low"


class Scale(float, enum.Enum):
    HALF = 0.5


def build(recipe: Any) -> Any:
    """A value from its recipe (nesting in recipes is shallow; ``deep`` is iterative)."""
    tag = recipe[0]
    if tag == "null":
        return None
    if tag in ("bool", "int", "str"):
        return recipe[1]
    if tag == "float":
        return float(recipe[1])
    if tag == "bad_str":
        return "a\ud800b"
    if tag == "list":
        return [build(r) for r in recipe[1]]
    if tag == "tuple":
        return tuple(build(r) for r in recipe[1])
    if tag == "dict":
        return {build(k): build(v) for k, v in recipe[1]}
    if tag == "call":
        return ToolCall("c", "f", {"x": build(recipe[1])})
    if tag == "reasoning":
        return ReasoningItem("p", {"x": build(recipe[1])})
    if tag == "hop":
        return Hop(build(recipe[1]))
    if tag == "raw_hop":
        return RawHop(build(recipe[1]))
    if tag == "sub":
        return subclass(recipe[1], build(recipe[2]) if len(recipe) > 2 else None)
    if tag == "deep":
        return deep(recipe[1], recipe[2], build(recipe[3]))
    if tag == "cycle":
        return cycle(recipe[1])
    raise ValueError(f"unknown recipe {tag!r}")


def subclass(kind: str, inner: Any) -> Any:
    return {
        "str": lambda: MyStr("s"),
        "int": lambda: MyInt(3),
        "float": lambda: MyFloat(0.25),
        "dict": lambda: MyDict(a=inner),
        "list": lambda: MyList([inner]),
        "tuple": lambda: MyTuple([inner]),
        "intenum": lambda: Colour.RED,
        "strenum": lambda: Tone.LOW,
        "floatenum": lambda: Scale.HALF,
        "ordered": lambda: collections.OrderedDict([("b", inner), ("a", 1)]),
        "default": lambda: collections.defaultdict(list, {"k": inner}),
        "str_key": lambda: {MyStr("k"): inner},
        "enum_key": lambda: {Tone.LOW: inner},
    }[kind]()


def deep(via: str, n: int, leaf: Any) -> Any:
    value = leaf
    for i in range(n):
        step = via if via != "mixed" else ("list", "dict", "call", "hop", "reasoning")[i % 5]
        if step == "list":
            value = [value]
        elif step == "dict":
            value = {"k": value}
        elif step == "call":
            value = ToolCall(f"c{i}", "f", {"x": value})
        elif step == "reasoning":
            value = ReasoningItem("p", {"x": value})
        elif step == "hop":
            value = Hop(value)
        elif step == "raw_hop":
            value = RawHop(value)
        elif step == "to_dict_chain":  # to_dict() results of items, nested
            value = ToolCall(f"c{i}", "f", {"x": value}).to_dict()
    return value


def cycle(via: str) -> Any:
    if via == "list":
        a: list[Any] = [1]
        a.append(a)
        return a
    if via == "dict":
        d: dict[str, Any] = {}
        d["self"] = [d]
        return d
    if via == "call":
        c = ToolCall("c", "f", {})
        c.arguments["self"] = [c]
        return c
    if via == "hop":
        h = Hop(None)
        h.inner = {"again": h}
        return h
    if via == "raw_hop":
        r = RawHop(None)
        r.inner = r
        return r
    raise ValueError(via)


def entry(core: Any, name: str, value: Any) -> Any:
    """Run one entry point; the result as JSON data."""
    if name == "canonical_json":
        return core.canonical_json(value).hex()
    if name == "payload_hash":
        return core.payload_hash(value)
    if name == "raw":
        return core.TokenEstimator().raw(value, MODEL)
    if name == "estimate":
        return core.TokenEstimator().estimate([value, value], MODEL)
    if name == "select_history":
        return core.select_history([value], None, 100, core.TokenEstimator(), MODEL)
    if name == "select_history_wrapped":
        items = [UserMessage("u", seq=1), ToolCall("w", "f", {"x": value}), ToolResult("w", "r")]
        return core.select_history(items, 0, 50, core.TokenEstimator(), MODEL)
    if name == "validate_tool_pairs":
        return core.validate_tool_pairs(value)
    if name == "item_canonical":
        return core.item_canonical(ToolCall("w", "f", {"x": value}))[1].hex()
    if name == "thread":
        return in_thread(core, value, 0)
    if name == "small_thread":
        return in_thread(core, value, 512 * 1024)
    if name.startswith("args:"):
        return call_with(core, name[5:], value)
    raise ValueError(name)


def in_thread(core: Any, value: Any, stack: int) -> Any:
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(("ok", core.payload_hash(value)))
        except Exception as exc:
            box.append(("error", exc))

    previous = threading.stack_size(stack)
    try:
        t = threading.Thread(target=run)
        t.start()
    finally:
        threading.stack_size(previous)
    t.join()
    kind, result = box[0]
    if kind == "error":
        raise result
    return result


def call_with(core: Any, function: str, args: list[Any]) -> Any:
    """An entry point called with hostile arguments (positional)."""
    est = core.TokenEstimator()
    swap = {"<estimator>": est, "<items>": [UserMessage("a", seq=1), UserMessage("b", seq=2)]}
    args = [swap.get(a, a) if isinstance(a, str) else a for a in args]
    if function.startswith("estimator."):
        result = getattr(est, function[10:])(*args)
    else:
        result = getattr(core, function)(*args)
    return result if isinstance(result, (int, float, str, type(None), list, tuple)) else repr(result)


def outcome(core: Any, name: str, recipe: Any) -> list[Any]:
    try:
        value = [build(a) for a in recipe] if name.startswith("args:") else build(recipe)
        result = entry(core, name, value)
    except Exception as exc:
        return ["error", type(exc).__name__, str(exc)]
    return ["ok", result if isinstance(result, (int, float, str, type(None))) else repr(result)]


def main() -> None:
    cores = {name: backends.module(name) for name in backends.BACKENDS}
    for line in sys.stdin:
        request = json.loads(line)
        reply = {
            name: [outcome(core, entry_name, request["recipe"]) for entry_name in request["entries"]]
            for name, core in cores.items()
        }
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
