"""Issue 11, acceptance 1: hostile values and hostile arguments through every
entry point, both backends, in a subprocess (``hostile_worker.py``).

Deep and wide nesting through items, mappings, sequences, ``to_dict`` hops
and chains of ``to_dict()`` results; subclasses; cycles; non-items; wrong
argument types; threads. No worker may die by a signal; both backends give
the same result, or the same error type, with the same message where the
contract fixes one (paths of ``CanonicalizationError``, argument errors).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

HERE = Path(__file__).parent
MODEL = "hostile:model"
# Errors whose message is part of the contract: both backends word them alike.
WORDED = {"CanonicalizationError", "ArgumentError", "EstimatorError", "OrphanedToolPair", "PolicyError"}
TYPED = WORDED | {"ContextOverflow"}

VALUE_ENTRIES = [
    "canonical_json",
    "payload_hash",
    "raw",
    "estimate",
    "select_history",
    "select_history_wrapped",
    "validate_tool_pairs",
    "item_canonical",
]
DEEP_ENTRIES = [*VALUE_ENTRIES, "thread", "small_thread"]


class Worker:
    """A long-lived worker process, restarted after it dies."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> subprocess.Popen[str]:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
        return subprocess.Popen(
            [sys.executable, str(HERE / "hostile_worker.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, recipe: Any, entries: list[str]) -> dict[str, list[Any]]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self.start()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"recipe": recipe, "entries": entries}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait(timeout=30)
            err = self.proc.stderr.read() if self.proc.stderr else ""
            self.proc = None
            signal = -code if code < 0 else None
            pytest.fail(f"worker died (exit {code}, signal {signal}) on {recipe!r}\n{err[-2000:]}")
        reply: dict[str, list[Any]] = json.loads(line)
        return reply

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    w = Worker()
    try:
        yield w
    finally:
        w.close()


def check_same(recipe: Any, entries: list[str], reply: dict[str, list[Any]], typed_only: bool) -> None:
    for name, rust, ref in zip(entries, reply["rust"], reply["python"], strict=True):
        where = f"{name} of {recipe!r}"
        assert rust[0] == ref[0], f"{where}: rust {rust} vs reference {ref}"
        if rust[0] == "ok":
            assert rust[1] == ref[1], where
            continue
        assert rust[1] == ref[1], f"{where}: rust {rust} vs reference {ref}"
        if rust[1] in WORDED:
            assert rust[2] == ref[2], f"{where}: rust {rust} vs reference {ref}"
        if typed_only:
            assert rust[1] in TYPED, f"{where}: untyped error {rust}"


# --------------------------------------------------------------------------
# recipes (see hostile_worker.build)

floats = st.sampled_from(["0.5", "-0.0", "1e300", "5e-324", "nan", "inf", "-inf", "123456789.125"])
leaves = st.one_of(
    st.just(["null"]),
    st.booleans().map(lambda b: ["bool", b]),
    st.one_of(st.integers(-(2**60), 2**60), st.sampled_from([2**53 - 1, 2**53, -(2**53), 2**64, 10**30])).map(
        lambda n: ["int", n]
    ),
    floats.map(lambda f: ["float", f]),
    st.text(max_size=6).map(lambda s: ["str", s]),
    st.just(["bad_str"]),
)
keys = st.one_of(
    st.text(max_size=4).map(lambda s: ["str", s]),
    st.sampled_from(
        [["int", 1], ["null"], ["bad_str"], ["sub", "str"], ["sub", "strenum"], ["float", "0.5"]]
    ),
)
SUBCLASSES = [
    "str",
    "int",
    "float",
    "dict",
    "list",
    "tuple",
    "intenum",
    "strenum",
    "floatenum",
    "ordered",
    "default",
]


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4).map(lambda c: ["list", c]),
        st.lists(children, max_size=3).map(lambda c: ["tuple", c]),
        st.lists(st.tuples(keys, children).map(list), max_size=3).map(lambda c: ["dict", c]),
        children.map(lambda c: ["call", c]),
        children.map(lambda c: ["reasoning", c]),
        children.map(lambda c: ["hop", c]),
        children.map(lambda c: ["raw_hop", c]),
        st.tuples(st.sampled_from(SUBCLASSES), children).map(lambda t: ["sub", t[0], t[1]]),
    )


values = st.recursive(leaves, containers, max_leaves=12)
VIAS = ["list", "dict", "call", "hop", "raw_hop", "reasoning", "mixed", "to_dict_chain"]
deep_values = st.tuples(
    st.sampled_from(VIAS), st.sampled_from([1, 63, 64, 65, 127, 128, 129, 400, 1000, 5000]), leaves
).map(lambda t: ["deep", *t])
cycles = st.sampled_from(["list", "dict", "call", "hop", "raw_hop"]).map(lambda v: ["cycle", v])
hostile = st.one_of(
    values,
    deep_values,
    cycles,
    st.tuples(values, deep_values).map(lambda t: ["list", list(t)]),
    st.tuples(deep_values, values).map(lambda t: ["dict", [[["str", "a"], t[0]], [["str", "b"], t[1]]]]),
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(recipe=hostile)
# The cases: items in items 5,000 deep, a chain of to_dict() results,
# and 1,000 deep (where the backends used to disagree).
@example(recipe=["deep", "call", 5000, ["null"]])
@example(recipe=["deep", "to_dict_chain", 5000, ["int", 1]])
@example(recipe=["deep", "call", 1000, ["str", "x"]])
@example(recipe=["deep", "mixed", 5000, ["null"]])
@example(recipe=["deep", "raw_hop", 5000, ["null"]])
@example(recipe=["cycle", "call"])
@example(recipe=["sub", "dict", ["int", 1]])
@example(recipe=["sub", "list", ["int", 1]])
def test_hostile_values_never_crash_and_agree(worker: Worker, recipe: Any) -> None:
    entries = DEEP_ENTRIES if recipe[0] == "deep" else VALUE_ENTRIES
    check_same(recipe, entries, worker.ask(recipe, entries), typed_only=True)


# --------------------------------------------------------------------------
# hostile arguments

junk = st.one_of(
    st.just(["null"]),
    st.booleans().map(lambda b: ["bool", b]),
    st.sampled_from([-1, 0, 7, 2**63, 2**70, -(2**70)]).map(lambda n: ["int", n]),
    floats.map(lambda f: ["float", f]),
    st.sampled_from(["", "abc", MODEL, "<estimator>", "<items>"]).map(lambda s: ["str", s]),
    st.lists(st.one_of(st.just(["null"]), st.just(["int", 1]), st.just(["str", "x"])), max_size=3).map(
        lambda c: ["list", c]
    ),
    st.just(["dict", []]),
    st.just(["bad_str"]),
)

BASE: dict[str, list[Any]] = {
    "select_history": [["str", "<items>"], ["int", 0], ["int", 100], ["str", "<estimator>"], ["str", MODEL]],
    "validate_tool_pairs": [["str", "<items>"]],
    "allocate_tokens": [
        ["int", 200_000],
        ["int", 16_000],
        ["int", 8_000],
        ["int", 1_000],
        ["int", 8_000],
        ["float", "0.5"],
        ["float", "0.5"],
        ["int", 1_000],
        ["int", 100],
        ["int", 5_000],
    ],
    "canonical_json": [["null"]],
    "estimator.raw": [["str", "x"], ["str", MODEL]],
    "estimator.raw_estimates": [["str", "<items>"], ["str", MODEL]],
    "estimator.estimate": [["str", "<items>"], ["str", MODEL]],
    "estimator.estimate_text": [["str", "text"], ["str", MODEL]],
    "estimator.estimate_tools": [["list", []], ["str", MODEL]],
    "estimator.corrected": [["int", 10], ["str", MODEL]],
    "estimator.reconcile": [["str", MODEL], ["int", 10], ["int", 12]],
    "estimator.correction": [["str", MODEL]],
    "estimator.error_ratio": [["str", MODEL]],
}


@st.composite
def hostile_calls(draw: st.DrawFn) -> tuple[str, list[Any]]:
    function = draw(st.sampled_from(sorted(BASE)))
    args = list(BASE[function])
    for _ in range(draw(st.integers(1, 2))):
        args[draw(st.integers(0, len(args) - 1))] = draw(junk)
    return function, args


@SETTINGS
@given(call=hostile_calls())
@example(
    call=(
        "select_history",
        [["list", [["null"]]], ["int", 0], ["int", 100], ["str", "<estimator>"], ["str", MODEL]],
    )
)
@example(
    call=(
        "select_history",
        [["list", [["str", "x"]]], ["int", 0], ["int", 100], ["str", "<estimator>"], ["str", MODEL]],
    )
)
@example(
    call=(
        "select_history",
        [["list", [["int", 1]]], ["int", 0], ["int", 100], ["str", "<estimator>"], ["str", MODEL]],
    )
)
@example(
    call=("select_history", [["null"], ["int", 0], ["int", 100], ["str", "<estimator>"], ["str", MODEL]])
)
@example(
    call=(
        "select_history",
        [["str", "<items>"], ["null"], ["int", 100], ["str", "<estimator>"], ["str", MODEL]],
    )
)
@example(
    call=(
        "select_history",
        [["str", "<items>"], ["int", 0], ["float", "0.5"], ["str", "<estimator>"], ["str", MODEL]],
    )
)
@example(
    call=(
        "select_history",
        [["str", "<items>"], ["int", 0], ["int", 100], ["str", "<estimator>"], ["int", 5]],
    )
)
@example(call=("validate_tool_pairs", [["str", "abc"]]))
def test_hostile_arguments_agree(worker: Worker, call: tuple[str, list[Any]]) -> None:
    function, args = call
    entries = [f"args:{function}"]
    check_same(args, entries, worker.ask(args, entries), typed_only=True)
