"""The cut over the items' dict forms: the Rust path (measured as they stand) equals the
reference (decode with ``item_from_dict``, then cut) and the cut over the items themselves."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.errors import ContextError
from ctxengine.interop import _backend as backends
from ctxengine.interop import mappings, openai_chat

from . import histories

relaxed = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=200)
MODEL = "openai:gpt-x"


def cut_on(name: str, dicts: list[Any], floor: int, budget: int) -> int | str:
    previous = backends.active_name()
    backends.use(name)
    try:
        return mappings.select_history(dicts, floor, budget, ce.TokenEstimator(), MODEL)
    except ContextError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        backends.use(previous)


@relaxed
@given(histories.openai_chat(), st.integers(-1, 8), st.integers(0, 500), st.data())
def test_dict_forms_cut_as_their_items(
    messages: list[dict[str, Any]], floor: int, budget: int, data: st.DataObject
) -> None:
    items = openai_chat.to_items(messages, first_seq=data.draw(st.none() | st.integers(0, 3)))
    if data.draw(st.booleans()):
        items += [ce.ReasoningItem("openai", {"type": "reasoning", "summary": [], "n": 1.5})]
        items += [ce.UserMessage((ce.FileRef("a1", "image/png", None), ce.TextPart("see")))]
    dicts = mappings.from_items(items)
    rust = cut_on("rust", dicts, floor, budget)
    assert rust == cut_on("python", dicts, floor, budget)
    assert rust == ce.select_history(items, floor, budget, ce.TokenEstimator(), MODEL)
    fast = backends.module("rust").mappings_cut(
        dicts, floor, budget, backends.module("rust").TokenEstimator(), MODEL
    )
    assert fast == rust  # the fast path took every exact dict form


@relaxed
@given(histories.openai_chat().filter(bool), st.data())
def test_other_mappings_fail_or_cut_alike(messages: list[dict[str, Any]], data: st.DataObject) -> None:
    dicts = copy.deepcopy(mappings.from_items(openai_chat.to_items(messages)))
    i = data.draw(st.integers(0, len(dicts) - 1))
    change = data.draw(
        st.sampled_from(["drop", "extra", "trust", "seq_bool", "seq_big", "type", "nan", "part"])
    )
    d = dicts[i]
    if change == "drop":
        d.pop(data.draw(st.sampled_from(sorted(d))))
    elif change == "extra":
        d["note"] = "x"
    elif change == "trust" and "trust" in d:
        d["trust"] = data.draw(st.sampled_from(["boss", ce.TrustLevel.USER]))
    elif change == "seq_bool":
        d["seq"] = True
    elif change == "seq_big":
        d["seq"] = 2**60
    elif change == "type":
        d["type"] = "critique"
    elif change == "nan" and "arguments" in d:
        d["arguments"] = {"x": float("nan")}
    elif change == "part" and isinstance(d.get("content"), list):
        d["content"][0]["extra"] = 1
    assert cut_on("rust", dicts, 0, 200) == cut_on("python", dicts, 0, 200)


def test_to_items_names_the_index() -> None:
    good = ce.UserMessage("hi").to_dict()
    try:
        mappings.to_items([good, {"type": "user_message"}])
    except ce.ConversionError as exc:
        assert (exc.index, exc.field) == (1, "content")
    else:
        raise AssertionError("no error")
