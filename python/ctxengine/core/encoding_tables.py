"""A tokenizer's table loaded off the event loop (issue 40).

Exact counting (ADR 0012) builds an encoding's table the first time the process
counts with it: tens of milliseconds (``o200k_base`` about 50 ms). Done by the
first count of a build, that held the event loop. ``load_encoding`` builds it on
a thread instead, before the first count: on the Rust backend with the GIL
released (``_core.encode_tokens`` counts detached), so the loop runs meanwhile.
"""

from __future__ import annotations

import asyncio

from . import backends

#: The exact encodings (``ContextPlan.counting_method``) whose table is loaded.
ENCODINGS = frozenset({"o200k_base", "cl100k_base"})

#: Encodings loaded in this process, per backend.
_loaded: set[tuple[str, str]] = set()


async def load_encoding(name: str) -> None:
    """Build ``name``'s table on a thread, once per backend (nothing for the heuristic)."""
    if name not in ENCODINGS:
        return
    key = (backends.backend(), name)
    if key in _loaded:
        return
    await asyncio.to_thread(backends.active().encode_tokens, name, "")
    _loaded.add(key)


__all__ = ["ENCODINGS", "load_encoding"]
