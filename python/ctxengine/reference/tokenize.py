"""Exact token counts for the public OpenAI encodings: the reference twin of
``rust/core/src/tokenize`` (ADR 0012).

The reference counts with OpenAI's own ``tiktoken`` over rank tables shipped in
this package (``encodings/NAME.ranks.xz``, checked against their SHA-256 on
load), so nothing is downloaded at run time; the Rust core counts with the
``bpe-openai`` crate over the same published tables. Both apply the same
recipe: what text of a value is encoded, and the framing a message adds.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ArgumentError, EstimatorError
from .arguments import _has_surrogate, check_str, type_name

HEURISTIC = "heuristic"

# The pre-tokenization patterns of the encodings (as published with tiktoken).
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

# name -> (pattern, number of ranks, SHA-256 of the table: each rank in order as
# one length byte and its bytes; the Rust core reports the same digest).
ENCODINGS: dict[str, tuple[str, int, str]] = {
    "o200k_base": (
        _O200K_PATTERN,
        199_998,
        "bac143fe7fe950090c6e4ed9a2f80de5412a92495758b52becbbe5a7eea25ecb",
    ),
    "cl100k_base": (
        _CL100K_PATTERN,
        100_256,
        "6bfd43f7b31b50b645b3228413547e662af1ae4801e9b192b9791680a71d650c",
    ),
}
METHODS = frozenset({HEURISTIC, *ENCODINGS})

# OpenAI's model families (the longest matching prefix wins; the caller's entries
# are laid over these).
DEFAULT_TABLE: tuple[tuple[str, str], ...] = (
    ("openai:gpt-5", "o200k_base"),
    ("openai:gpt-4.1", "o200k_base"),
    ("openai:gpt-4.5", "o200k_base"),
    ("openai:gpt-4o", "o200k_base"),
    ("openai:chatgpt-4o", "o200k_base"),
    ("openai:gpt-oss", "o200k_base"),
    ("openai:o1", "o200k_base"),
    ("openai:o3", "o200k_base"),
    ("openai:o4", "o200k_base"),
    ("openai:gpt-4", "cl100k_base"),
    ("openai:gpt-3.5", "cl100k_base"),
    ("openai:text-embedding-3", "cl100k_base"),
    ("openai:text-embedding-ada-002", "cl100k_base"),
)

# The recipe (OpenAI's published counting of chat messages).
# The version of the recipe below: part of a stored exact count's id (the estimator's
# ``_Counter.stored_id``), so a count stored under another recipe is never read back as
# this one's. Change it with any change to what is counted.
RECIPE_VERSION = 1
TOKENS_PER_MESSAGE = 3
REPLY_PRIMING_TOKENS = 3
VALUE_FRAMING_TOKENS = TOKENS_PER_MESSAGE + 1

_DATA = Path(__file__).resolve().parent / "encodings"
_loaded: dict[str, Any] = {}
_lock = threading.Lock()


def ranks(name: str) -> list[bytes]:
    """The encoding's tokens in rank order, from the shipped table (checked)."""
    pattern_count_digest = ENCODINGS.get(name)
    if pattern_count_digest is None:
        raise EstimatorError(f"unknown encoding {name!r}; known: {', '.join(sorted(ENCODINGS))}")
    _, count, digest = pattern_count_digest
    raw = lzma.decompress((_DATA / f"{name}.ranks.xz").read_bytes())
    if hashlib.sha256(raw).hexdigest() != digest:
        raise EstimatorError(f"the shipped rank table of {name} is damaged (SHA-256 mismatch)")
    tokens: list[bytes] = []
    at = 0
    while at < len(raw):
        size = raw[at]
        tokens.append(raw[at + 1 : at + 1 + size])
        at += 1 + size
    if len(tokens) != count:
        raise EstimatorError(f"the shipped rank table of {name} has {len(tokens)} ranks, not {count}")
    return tokens


def _encoding(name: str) -> Any:
    enc = _loaded.get(name)
    if enc is not None:
        return enc
    with _lock:
        enc = _loaded.get(name)
        if enc is None:
            import tiktoken

            pattern = ENCODINGS[name][0]
            mergeable = {token: rank for rank, token in enumerate(ranks(name))}
            enc = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=mergeable, special_tokens={})
            _loaded[name] = enc
    return enc


def _check(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise EstimatorError(f"unknown encoding {encoding!r}; known: {', '.join(sorted(ENCODINGS))}")


def _encoding_arg(function: str, encoding_name: object) -> str:
    name = check_str(function, "encoding_name", encoding_name)
    _check(name)
    return name


def count_tokens(encoding_name: str, text: str) -> int:
    """Tokens of ``text`` in an encoding, as ordinary text (special-token text is plain text)."""
    name = _encoding_arg("count_tokens", encoding_name)
    return len(_encoding(name).encode_ordinary(check_str("count_tokens", "text", text)))


def load_encoding(encoding_name: str) -> None:
    """Build an encoding's tables now (else on first use)."""
    _encoding(_encoding_arg("load_encoding", encoding_name))


def encode_tokens(encoding_name: str, text: str) -> list[int]:
    """The token ids of ``text`` in an encoding, as ordinary text."""
    name = _encoding_arg("encode_tokens", encoding_name)
    tokens: list[int] = _encoding(name).encode_ordinary(check_str("encode_tokens", "text", text))
    return tokens


def encoding_ranks_sha256(encoding_name: str) -> str:
    """SHA-256 hex over the encoding's ranks in order (length byte, bytes), checked on load."""
    name = _encoding_arg("encoding_ranks_sha256", encoding_name)
    _encoding(name)
    return ENCODINGS[name][2]


def _count(encoding: str, text: str) -> int:
    return len(_encoding(encoding).encode_ordinary(text))


# -- the recipe --------------------------------------------------------------------


def _clean(text: str) -> bool:
    """A decoded string the Rust reader would also have produced (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _canonical(value: object) -> str:
    # The value as the canonical JSON it was read from (canonical bytes round-trip).
    from .canonical import canonical_json

    return canonical_json(value).decode("utf-8")


def _message_tokens(encoding: str, text: str) -> int | None:
    """The recipe's count of a rendered message, or None when ``text`` is not one."""
    try:
        # Numbers as floats: canonical JSON writes every number the way ECMAScript
        # writes a double, so a float reads back to the same digits (an int would not
        # past 2**53, where a float like 2.0**53 prints as "9007199254740992").
        members = json.loads(text, parse_int=float, parse_constant=_no_constant)
    except ValueError:
        return None
    if not isinstance(members, dict):
        return None
    role = members.get("role")
    if not isinstance(role, str) or not _clean(role):
        return None
    tokens = TOKENS_PER_MESSAGE + _count(encoding, role)
    for name in ("text", "call_id", "name"):
        value = members.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not _clean(value):
            return None
        tokens += _count(encoding, value)
    for name in ("arguments", "reasoning"):
        value = members.get(name)
        if value is not None:
            tokens += _count(encoding, _canonical(value))
    return tokens


def exact_raw(encoding_name: str, kind: str, canonical: bytes) -> int:
    """The exact raw count of a value of ``kind`` whose canonical JSON is ``canonical``."""
    encoding = _encoding_arg("exact_raw", encoding_name)
    check_str("exact_raw", "kind", kind)
    if not isinstance(canonical, bytes):
        raise ArgumentError("exact_raw", "canonical", f"expected bytes, got {type_name(canonical)}")
    return raw_count(encoding, kind, canonical)


def raw_count(encoding: str, kind: str, canonical: bytes) -> int:
    """``exact_raw`` without the argument checks (the estimator's memo miss)."""
    try:
        text = canonical.decode("utf-8")
    except UnicodeDecodeError:
        raise EstimatorError("canonical bytes are not UTF-8") from None
    counted: int | None = None
    if kind == "rendered_item":
        counted = _message_tokens(encoding, text)
    elif kind == "text":
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except ValueError:
            value = None
        if isinstance(value, str) and _clean(value):
            counted = VALUE_FRAMING_TOKENS + _count(encoding, value)
    if counted is None:
        counted = VALUE_FRAMING_TOKENS + _count(encoding, text)
    return counted


# -- model id -> method -----------------------------------------------------------


def check_table(entries: object, where: str) -> dict[str, str]:
    """The caller's entries, checked: a mapping of prefix (str) -> a known method."""
    if entries is None:
        return {}
    if not isinstance(entries, Mapping):
        raise EstimatorError(f"{where}: expected a mapping")
    pairs = entries.items()
    checked: dict[str, str] = {}
    for prefix, method in pairs:
        if not isinstance(prefix, str):
            raise EstimatorError(f"{where}: prefix {prefix!r} is not a string")
        if _has_surrogate(prefix):
            raise EstimatorError(f"{where}: lone surrogate in prefix {prefix!r}")
        if not isinstance(method, str) or method not in METHODS:
            raise EstimatorError(
                f"{where}[{prefix!r}]: unknown counting method {method!r}; "
                f"known: {', '.join(sorted(METHODS))}"
            )
        checked[prefix] = method
    return checked


def counting_method(model_id: str, table: Mapping[str, str] | None = None) -> str:
    """The counting method of ``model_id`` under the built-in table and ``table``."""
    check_str("counting_method", "model_id", model_id)
    return resolve(model_id, check_table(table, "table"))


def resolve(model_id: str, extra: Mapping[str, str]) -> str:
    """The counting method of ``model_id``: the longest matching prefix's (the
    caller's entry on a tie with a default), the heuristic when none matches."""
    best: tuple[int, str] | None = None
    for prefix, method in (*DEFAULT_TABLE, *extra.items()):
        if model_id.startswith(prefix) and (best is None or len(prefix) >= best[0]):
            best = (len(prefix), method)
    return HEURISTIC if best is None else best[1]


__all__ = [
    "DEFAULT_TABLE",
    "ENCODINGS",
    "HEURISTIC",
    "METHODS",
    "RECIPE_VERSION",
    "REPLY_PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "VALUE_FRAMING_TOKENS",
    "check_table",
    "count_tokens",
    "counting_method",
    "encode_tokens",
    "encoding_ranks_sha256",
    "exact_raw",
    "load_encoding",
    "ranks",
    "raw_count",
    "resolve",
]
