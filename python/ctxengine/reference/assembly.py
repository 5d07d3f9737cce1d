"""The builder's batched per-item work (ADR 0001, "Assembly hot path")."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from .canonical import item_canonical


def render_measure(
    items: Sequence[Any],
    region_class: str,
    render: Callable[[Any, str], Any],
    estimator: Any,
    model_id: str,
) -> tuple[list[Any], list[int]]:
    """Each item's cached rendered form for ``region_class`` (rendering on a miss) and its raw estimate."""
    rendered = []
    for item in items:
        cache = item._rc
        hit = cache.get(region_class) if cache is not None else None
        rendered.append(hit if hit is not None else render(item, region_class))
    return rendered, estimator.raw_estimates(rendered, model_id)


def digest_list(values: Sequence[Any]) -> str:
    """SHA-256 over the values' canonical digests, in order."""
    h = hashlib.sha256()
    for value in values:
        h.update(item_canonical(value)[1])
    return h.hexdigest()


__all__ = ["digest_list", "render_measure"]
