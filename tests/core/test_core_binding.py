"""Checks specific to the Rust binding ``ctxengine._core``: typed errors cross
the boundary as the classes of ``ctxengine.errors``, pathological inputs never
panic, the ``_cj`` caches it writes equal the reference's, the fast paths
(direct slot reads, its own estimator) agree with the generic ones, and the
estimator is safe to share between threads."""

from __future__ import annotations

import math
import os
import signal
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxengine.core import backends
from ctxengine.errors import (
    ArgumentError,
    CanonicalizationError,
    ContextError,
    ContextOverflow,
    EstimatorError,
    OrphanedToolPair,
    PolicyError,
)
from ctxengine.model import (
    AssistantMessage,
    FileRef,
    ReasoningItem,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserMessage,
)

try:
    core: Any = backends.module("rust")
except Exception:  # pragma: no cover - the extension is not built
    pytest.skip("ctxengine._core is not built", allow_module_level=True)

ref: Any = backends.module("python")
MODEL = "m:a"


def session(n: int) -> list[Any]:
    items: list[Any] = [SystemMessage("rules", seq=0)]
    for i in range(n):
        items.append(UserMessage(f"question {i} " * 5, seq=4 * i + 1))
        items.append(ToolCall(f"c{i}", "search", {"q": f"q{i}", "n": i}, seq=4 * i + 2))
        items.append(ToolResult(f"c{i}", (TextPart(f"r{i}"), FileRef("a1", "text/plain")), seq=4 * i + 3))
        items.append(AssistantMessage(f"answer {i}", seq=4 * i + 4))
    return items


# ---------------------------------------------------------------------------
# errors cross as the package's classes


def test_canonicalization_error_is_the_package_class() -> None:
    with pytest.raises(CanonicalizationError) as info:
        core.canonical_json({"a": [1, {"b": math.nan}]})
    assert type(info.value) is CanonicalizationError
    assert isinstance(info.value, ContextError) and isinstance(info.value, ValueError)
    assert info.value.path == "$.a[1].b"
    assert info.value.reason == "nan is not a finite number"


def test_overflow_policy_orphan_estimator_errors() -> None:
    with pytest.raises(ContextOverflow) as overflow:
        core.allocate_tokens(1000, 100, 100, 2000, 100, 0.05, 0.25, 0, 0, 1500)
    assert (overflow.value.budget_class, overflow.value.tokens, overflow.value.cap) == ("prefix", 2000, 1500)
    with pytest.raises(PolicyError):
        core.allocate_tokens(100_000, 100, 100, 10, 100, math.nan, 0.25, 0, 0, 1500)
    with pytest.raises(OrphanedToolPair) as orphan:
        core.validate_tool_pairs([UserMessage("x"), ToolResult("c9", "r")])
    assert (orphan.value.call_id, orphan.value.index) == ("c9", 1)
    with pytest.raises(EstimatorError):
        core.TokenEstimator(bytes_per_token=0)
    with pytest.raises(EstimatorError):
        core.TokenEstimator().reconcile(MODEL, True, 1)
    with pytest.raises(EstimatorError):
        core.TokenEstimator.restore({"version": 2})


@pytest.mark.parametrize(
    "value",
    [
        2**63,
        -(2**63) - 1,
        2**200,
        {"k": 2**64},
        [1.5, -0.0, 1e308, 5e-324],
        "\ud800",
        {"\udfff": 1},
        {(1, 2): 3},
        {1.5: 3},
        {None: 1},
        bytearray(b"x"),
        {1, 2},
        range(3),
    ],
)
def test_odd_values_raise_or_match_never_panic(value: Any) -> None:
    outcomes: list[tuple[Any, ...]] = []
    for module in (core, ref):
        try:
            outcomes.append(("ok", module.canonical_json(value)))
        except CanonicalizationError as error:
            outcomes.append(("error", error.path, error.reason))
    assert outcomes[0] == outcomes[1]


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    value: Any = None
    for _ in range(10_000):
        value = [value]
    with pytest.raises(CanonicalizationError) as info:
        core.canonical_json(value)
    assert info.value.reason == "nesting deeper than 128"
    assert info.value.path == "$" + "[0]" * 128


def test_cycles_through_dicts_lists_and_to_dict() -> None:
    d: dict[str, Any] = {}
    d["self"] = [d]
    with pytest.raises(CanonicalizationError) as info:
        core.canonical_json(d)
    assert info.value.path == "$.self[0]"

    class Loop:
        def to_dict(self) -> Any:
            return {"again": self}

    with pytest.raises(CanonicalizationError) as info:
        core.canonical_json([Loop()])
    assert (info.value.path, info.value.reason) == (
        ref_error(lambda: ref.canonical_json([Loop()])).path,
        ref_error(lambda: ref.canonical_json([Loop()])).reason,
    )


def ref_error(call: Any) -> CanonicalizationError:
    try:
        call()
    except CanonicalizationError as error:
        return error
    raise AssertionError("no error")


def test_python_exceptions_from_to_dict_propagate() -> None:
    class Broken:
        def to_dict(self) -> Any:
            raise KeyError("boom")

    with pytest.raises(KeyError):
        core.canonical_json({"x": Broken()})


def test_containers_mutated_mid_walk_do_not_crash() -> None:
    parent: dict[str, Any] = {}
    items: list[Any] = []

    class Mutator:
        def to_dict(self) -> Any:
            parent.clear()
            items.clear()
            return {"m": 1}

    parent.update({"a": Mutator(), "b": list(range(100)), "c": "x" * 100})
    items.extend([Mutator(), *range(50)])
    core.canonical_json(parent)  # the walk keeps its own references
    core.canonical_json(items)


# ---------------------------------------------------------------------------
# the per-item cache


@pytest.mark.parametrize(
    "item",
    [
        SystemMessage("s", seq=1),
        UserMessage((TextPart("t"), FileRef("a", "b/c", "f.txt")), principal_id="p"),
        AssistantMessage('a\n"quoted"\u2028'),
        ToolCall("c1", "f", {"z": [1, 2.5, None], "a": {"\U0001f600": True, "\uffff": False}}),
        ToolResult("c1", "r", is_error=True),
        ReasoningItem("prov", {"blob": "x" * 1000}),
        ToolSpec("t", "d", {"type": "object"}),
    ],
)
def test_item_cache_equals_reference(item: Any) -> None:
    twin = type(item).from_dict(item.to_dict())
    mine = core.item_canonical(item)
    assert item._cj is mine
    assert core.item_canonical(item) is mine  # reused, not recomputed
    assert ref.item_canonical(twin) == mine
    assert core.payload_hash(item) == mine[1].hex() == ref.payload_hash(item)
    assert core.canonical_json([item]) == b"[" + mine[0] + b"]"


def test_item_canonical_rejects_values_without_the_slot() -> None:
    with pytest.raises(CanonicalizationError) as info:
        core.item_canonical(TextPart("x"))
    assert info.value.reason == "TextPart has no canonical cache slot"


def test_nested_item_errors_carry_the_outer_path() -> None:
    bad = ToolCall("c1", "f", {"x": math.inf})
    for module in (core, ref):
        with pytest.raises(CanonicalizationError) as info:
            module.canonical_json({"items": [UserMessage("ok"), bad]})
        assert info.value.path == "$.items[1].arguments.x"
    assert bad._cj is None


# ---------------------------------------------------------------------------
# fast paths agree with generic ones


@dataclass(frozen=True, slots=True, eq=True)
class Note(UserMessage):
    """A subclass: extra slot, same item protocol."""

    tag: str = "n"


@dataclass(frozen=True, slots=True)
class PropertySeq:
    """An item-like value whose ``seq`` is a property, not a slot (a conversation
    item by its ``kind``, as the backends recognise items)."""

    text: str
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, compare=False)
    kind: ClassVar[str] = "user_message"

    @property
    def seq(self) -> int:
        return 1

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "seq": self.seq}


def test_subclasses_and_property_attributes_cut_alike() -> None:
    items = [Note("a", seq=1), PropertySeq("b"), *session(3), Note("z", seq=99)]
    for floor in (-1, 0, 1, 5, 200):
        for budget in (0, 50, 200, 10_000):
            got = core.select_history(items, floor, budget, core.TokenEstimator(), MODEL)
            want = ref.select_history(fresh_like(items), floor, budget, ref.TokenEstimator(), MODEL)
            assert got == want, (floor, budget)


def fresh_like(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, PropertySeq):
            out.append(PropertySeq(item.text))
        elif isinstance(item, Note):
            out.append(Note(item.content, seq=item.seq, tag=item.tag))
        else:
            out.append(type(item).from_dict(item.to_dict()))
    return out


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 12),
    floor=st.integers(-1, 60),
    budget=st.integers(-5, 2000),
    steps=st.lists(st.tuples(st.integers(1, 500), st.integers(0, 1500)), max_size=3),
    warm=st.booleans(),
)
def test_rust_cut_fast_path_equals_every_mix(
    n: int, floor: int, budget: int, steps: list[tuple[int, int]], warm: bool
) -> None:
    items = session(n)
    if warm:
        core.TokenEstimator().raw_estimates(items, MODEL)  # fill the _cj caches
    results = set()
    for cut_module in (core, ref):
        for est_module in (core, ref):
            est = est_module.TokenEstimator()
            for estimated, actual in steps:
                est.reconcile(MODEL, estimated, actual)
            results.add(cut_module.select_history(list(items), floor, budget, est, MODEL))
    assert len(results) == 1


def test_iterables_and_tuples_are_accepted() -> None:
    items = session(4)
    want = core.select_history(items, 2, 120, core.TokenEstimator(), MODEL)
    assert core.select_history(tuple(items), 2, 120, core.TokenEstimator(), MODEL) == want
    assert core.select_history(iter(items), 2, 120, core.TokenEstimator(), MODEL) == want
    assert core.TokenEstimator().raw_estimates(iter(items), MODEL) == ref.TokenEstimator().raw_estimates(
        items, MODEL
    )


def test_memo_stats_follow_the_reference_on_repeats() -> None:
    items = session(20)
    mine, theirs = core.TokenEstimator(memo_capacity=30), ref.TokenEstimator(memo_capacity=30)
    for _ in range(3):
        for est, module in ((mine, core), (theirs, ref)):
            module.select_history(items, -1, 10_000, est, MODEL)
            est.raw_estimates(list(reversed(items)), MODEL)
            est.estimate_text("hello", MODEL)
    assert mine.memo_stats() == theirs.memo_stats()


def test_select_history_with_measured_raw() -> None:
    items = session(6)
    raw = [3 + i % 5 for i in range(len(items))]
    for budget in (0, 10, 40, 1000):
        want = ref.select_history(items, 2, budget, ref.TokenEstimator(), MODEL, raw)
        assert core.select_history(items, 2, budget, core.TokenEstimator(), MODEL, raw) == want
        assert core.select_history(items, 2, budget, ref.TokenEstimator(), MODEL, raw=raw) == want
    est = core.TokenEstimator()
    core.select_history(items, 2, 40, est, MODEL, raw)
    assert est.memo_stats()["misses"] == 0  # measured numbers are not re-estimated
    with pytest.raises(ArgumentError, match="raw: 2 estimates for 25 items"):
        core.select_history(items, 2, 40, est, MODEL, [1, 2])


# ---------------------------------------------------------------------------
# threads


def test_one_estimator_shared_by_threads() -> None:
    items = session(200)
    est = core.TokenEstimator(memo_capacity=500)
    want = core.select_history(items, 10, 3000, core.TokenEstimator(), MODEL)
    results: list[int] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                results.append(core.select_history(items, 10, 3000, est, MODEL))
                core.payload_hash({"items": items[:50], "n": len(results)})
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [want] * 80


def test_large_payload_hash_is_stable_across_threads() -> None:
    payload = {"messages": [{"role": "user", "content": "x" * 400 + str(i)} for i in range(3000)]}
    want = ref.payload_hash(payload)
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(core.payload_hash(payload))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want] * 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_large_payload_hash_after_fork() -> None:
    # The hashing thread does not survive a fork; the child must not wait on it.
    payload = {"m": ["x" * 400 + str(i) for i in range(3000)]}
    want = ref.payload_hash(payload)
    assert core.payload_hash(payload) == want  # the parent's thread is running
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        signal.alarm(20)  # a hang fails the test instead of blocking it
        os._exit(0 if core.payload_hash(payload) == want else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert core.payload_hash(payload) == want


def test_type_facts_follow_class_changes() -> None:
    """The binding keeps per-type facts between calls; a class change shows."""

    @dataclass(frozen=True, slots=True)
    class Note:
        text: str
        kind: ClassVar[str] = "note"

        def to_dict(self) -> dict[str, Any]:
            return {"text": self.text}

    notes = [Note("a"), Note("bb")]
    mine, theirs = core.TokenEstimator(), ref.TokenEstimator()
    for _ in range(2):
        for est in (mine, theirs):
            est.raw_estimates(notes, MODEL)
        Note.kind = "memo"  # type: ignore[misc]  # a new memo key: misses again
    assert mine.memo_stats() == theirs.memo_stats()
    assert mine.memo_stats()["misses"] == 4
