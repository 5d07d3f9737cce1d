"""Exact token counting (ADR 0012): the Rust core (``bpe-openai``) and the reference
(OpenAI's ``tiktoken`` over the shipped rank tables) agree on every input, the
shipped tables are OpenAI's published ones, and the recipe counts what it says."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from make_ranks import PUBLISHED, tiktoken_text

import ctxengine
from ctxengine.assembly.request import RenderedItem
from ctxengine.core import backends
from ctxengine.errors import EstimatorError
from ctxengine.reference import tokenize as ref
from strategies import json_values

RUST = backends.module("rust")
PY = backends.module("python")
ENCODINGS = ("o200k_base", "cl100k_base")
CORPUS = Path(__file__).parent / "corpus"
CORPUS_FILES = sorted(p for p in CORPUS.iterdir() if p.suffix != ".md")
DIFF = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text the pre-tokenizer patterns treat specially: whitespace runs before text,
# contractions in any case, digit runs, CR/LF mixes, letters with marks, CJK,
# emoji sequences (ZWJ, skin tones, flags), special-token text.
_tricky = st.sampled_from(
    [
        " ",
        "  ",
        "\n",
        "\r\n",
        "\t",
        " \n ",
        "'s",
        "'S",
        "'ll",
        "'Re",
        "\u2019s",
        "123",
        "4567",
        "1,000",
        "e\u0301",
        "\u00e9",
        "Ä",
        "ǅ",
        "中文",
        "日本語",
        "한국어",
        "Ωμέγα",
        "Ёжик",
        "🎉",
        "👍🏽",
        "👨‍👩‍👧",
        "🇩🇪",
        "<|endoftext|>",
        "<|fim_prefix|>",
        "\u200b",
        "\u00a0",
        "\x00",
        "/",
        "//",
        "-->",
        "$$",
    ]
)
texts = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=60),
    st.lists(st.one_of(_tricky, st.text(st.characters(codec="utf-8"), max_size=6)), max_size=25).map("".join),
)


def corpus(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_shipped_ranks_are_the_published_tables_and_the_crates(encoding: str) -> None:
    tokens = ref.ranks(encoding)
    # OpenAI's .tiktoken file, rebuilt from the shipped table, has its published hash ...
    assert hashlib.sha256(tiktoken_text(tokens)).hexdigest() == PUBLISHED[encoding]
    # ... and the Rust crate's table is the same, rank for rank.
    assert RUST.encoding_ranks_sha256(encoding) == PY.encoding_ranks_sha256(encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_known_counts(encoding: str, backend: str) -> None:
    core = backends.active()
    assert core.count_tokens(encoding, "") == 0
    assert core.count_tokens(encoding, "hello world") == 2
    for role in ("system", "user", "assistant", "tool"):
        assert core.count_tokens(encoding, role) == 1
    want = {"o200k_base": [24912, 2375], "cl100k_base": [15339, 1917]}[encoding]
    assert core.encode_tokens(encoding, "hello world") == want


@DIFF
@given(text=texts, encoding=st.sampled_from(ENCODINGS))
def test_rust_counts_what_tiktoken_counts(text: str, encoding: str) -> None:
    assert RUST.encode_tokens(encoding, text) == PY.encode_tokens(encoding, text)
    assert RUST.count_tokens(encoding, text) == PY.count_tokens(encoding, text)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_rust_counts_the_corpus_as_tiktoken_does(encoding: str, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert RUST.encode_tokens(encoding, text) == PY.encode_tokens(encoding, text)
    # and in every cut of it, so pieces at arbitrary boundaries agree too
    for start in range(0, len(text), 97):
        piece = text[start : start + 311]
        assert RUST.count_tokens(encoding, piece) == PY.count_tokens(encoding, piece), (start, piece)


def test_long_pathological_text_counts_alike() -> None:
    for text in ("a" * 50_000, " " * 50_000, "ab1" * 20_000, "\n \n" * 10_000, "😀" * 5_000):
        for encoding in ENCODINGS:
            assert RUST.count_tokens(encoding, text) == PY.count_tokens(encoding, text)


# -- the recipe ----------------------------------------------------------------------

rendered = st.builds(
    RenderedItem,
    region_class=st.sampled_from(["history", "current_turn", "working_state", "platform_policy"]),
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    text=st.none() | texts,
    call_id=st.none() | st.text(max_size=12),
    name=st.none() | st.text(max_size=12),
    arguments=st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    is_error=st.booleans(),
    provider=st.none() | st.sampled_from(["openai", "anthropic"]),
    reasoning=st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=2),
    seq=st.none() | st.integers(0, 10**6),
)


def recipe(encoding: str, item: RenderedItem) -> int:
    """The recipe written out from the item's fields (ADR 0012)."""
    count = PY.count_tokens
    tokens = 3 + count(encoding, item.role)
    for text in (item.text, item.call_id, item.name):
        if text is not None:
            tokens += count(encoding, text)
    for value in (item.arguments, item.reasoning):
        if value is not None:
            tokens += count(encoding, ctxengine.canonical_json(value).decode())
    return tokens


@DIFF
@given(item=rendered, encoding=st.sampled_from(ENCODINGS))
def test_a_rendered_message_counts_by_the_recipe(item: RenderedItem, encoding: str) -> None:
    data = ctxengine.canonical_json(item)
    assert RUST.exact_raw(encoding, "rendered_item", data) == recipe(encoding, item)
    assert PY.exact_raw(encoding, "rendered_item", data) == recipe(encoding, item)


# Dicts shaped like messages, with fields of every type (the recipe or the JSON fallback).
message_like = st.dictionaries(
    st.sampled_from(["role", "text", "call_id", "name", "arguments", "reasoning", "seq", "x"]),
    st.one_of(texts, json_values),
    max_size=6,
)


@DIFF
@given(
    value=st.one_of(texts, json_values, message_like),
    kind=st.sampled_from(["text", "json", "tool_spec", "rendered_item"]),
)
def test_any_value_counts_alike_on_both_backends(value: Any, kind: str) -> None:
    data = ctxengine.canonical_json(value)
    for encoding in ENCODINGS:
        got = RUST.exact_raw(encoding, kind, data)
        assert got == PY.exact_raw(encoding, kind, data)
        if kind == "text" and isinstance(value, str):
            assert got == 4 + PY.count_tokens(encoding, value)
        elif not (kind == "rendered_item" and isinstance(value, dict)) and not (
            kind == "text" and isinstance(value, str)
        ):
            assert got == 4 + PY.count_tokens(encoding, data.decode())


def test_a_value_that_is_not_a_message_counts_as_json(backend: str) -> None:
    core = backends.active()
    for data in (b'{"role":7,"text":"x"}', b'{"role":"user","text":[1]}', b'{"text":"x"}', b"[1,2]"):
        assert core.exact_raw("o200k_base", "rendered_item", data) == 4 + core.count_tokens(
            "o200k_base", data.decode()
        )
    with pytest.raises(EstimatorError):
        core.exact_raw("o200k_base", "text", b"\xff")


# -- errors and the table ------------------------------------------------------------


def test_unknown_encodings_are_estimator_errors(backend: str) -> None:
    core = backends.active()
    for call in (
        lambda: core.count_tokens("p50k_base", "x"),
        lambda: core.encode_tokens("O200K_BASE", "x"),
        lambda: core.exact_raw("gpt2", "text", b'"x"'),
        lambda: core.encoding_ranks_sha256("r50k_base"),
        lambda: core.counting_method("m", {"m": "p50k_base"}),
        lambda: core.counting_method("m", {1: "heuristic"}),
        lambda: core.counting_method("m", ["heuristic"]),
    ):
        with pytest.raises(EstimatorError):
            call()


MODEL_IDS = [
    "openai:gpt-4o",
    "openai:gpt-4o-mini",
    "openai:gpt-4.1-nano",
    "openai:gpt-5",
    "openai:o3-mini",
    "openai:gpt-4",
    "openai:gpt-4-turbo",
    "openai:gpt-3.5-turbo",
    "openai:davinci",
    "anthropic:claude",
    "azure:gpt-4o",
    "azure:legacy-3",
    "scripted:fake-32k",
    "",
    "openai:",
]


@pytest.mark.parametrize(
    "table",
    [
        None,
        {},
        {"azure:": "o200k_base", "azure:legacy": "cl100k_base"},
        {"openai:gpt-4o": "heuristic", "": "cl100k_base"},
    ],
)
def test_the_table_resolves_alike(table: dict[str, str] | None) -> None:
    for model_id in MODEL_IDS:
        assert RUST.counting_method(model_id, table) == PY.counting_method(model_id, table), model_id
    assert PY.counting_method("openai:gpt-4o-mini") == "o200k_base"
    assert PY.counting_method("openai:gpt-4-turbo") == "cl100k_base"
    assert PY.counting_method("anthropic:claude") == "heuristic"
    if table and "azure:" in table:
        assert RUST.counting_method("azure:legacy-3", table) == "cl100k_base"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.count_tokens(1, "x"), "count_tokens: encoding_name: expected a str, got int"),
        (lambda c: c.count_tokens("o200k_base", b"x"), "count_tokens: text: expected a str, got bytes"),
        (lambda c: c.count_tokens("o200k_base", "a\ud800"), "count_tokens: text: lone surrogate in string"),
        (lambda c: c.encode_tokens("o200k_base", None), "encode_tokens: text: expected a str, got NoneType"),
        (lambda c: c.exact_raw("o200k_base", 3, b"1"), "exact_raw: kind: expected a str, got int"),
        (lambda c: c.exact_raw("o200k_base", "text", '"x"'), "exact_raw: canonical: expected bytes, got str"),
        (lambda c: c.counting_method(None), "counting_method: model_id: expected a str, got NoneType"),
        (
            lambda c: c.encoding_ranks_sha256(b"o200k_base"),
            "encoding_ranks_sha256: encoding_name: expected a str",
        ),
    ],
)
def test_arguments_are_checked_alike(call: Any, message: str) -> None:
    from ctxengine.errors import ArgumentError

    for core in (RUST, PY):
        with pytest.raises(ArgumentError, match=message.replace("(", r"\(")):
            call(core)
