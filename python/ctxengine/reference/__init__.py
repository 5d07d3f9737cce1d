"""The pure-Python backend: everything ``ctxengine._core`` does, byte for byte.

The contract both backends implement is ``adr/0001-two-backends-one-contract.md``.
This module is the readable specification and the fallback when the Rust
extension is not built; select it with ``CTXENGINE_BACKEND=python`` or
``ctxengine.use_backend("python")``.
"""

from __future__ import annotations

from .assembly import fit_body
from .budget import allocate_tokens
from .canonical import canonical_json, item_canonical, payload_hash
from .cut import select_history, shared_prefix, validate_tool_pairs
from .decode import decode_items
from .estimate import TokenEstimator
from .render import render_items, render_pointers
from .tokenize import (
    count_tokens,
    counting_method,
    encode_tokens,
    encoding_ranks_sha256,
    exact_raw,
    load_encoding,
)

__all__ = [
    "TokenEstimator",
    "allocate_tokens",
    "canonical_json",
    "count_tokens",
    "counting_method",
    "encode_tokens",
    "load_encoding",
    "encoding_ranks_sha256",
    "exact_raw",
    "decode_items",
    "fit_body",
    "item_canonical",
    "payload_hash",
    "render_items",
    "render_pointers",
    "select_history",
    "shared_prefix",
    "validate_tool_pairs",
]
