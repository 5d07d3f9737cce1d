"""Two-sided calibration of the byte heuristic: the reference twin of
``rust/core/src/calibrate.rs`` (ADR 0012).

``reconcile(estimated, actual)`` is told the engine's estimate as sent (corrected by
the factor then in force). Each reconcile adds one sample to a bounded window per
model: the actual count against the uncorrected estimate, ``estimated / factor``
rounded down (so the ratio errs high). With fewer than ``MIN_SAMPLES`` samples the
factor is ADR 0001's upward-only ``max(1, A / E)`` over the cumulative sums, so a
version-1 snapshot restores and behaves exactly as before. With enough samples the
factor may fall below 1, but never below the window's 95th-percentile ratio plus
``MARGIN``, nor below its mean ratio, nor below ``MIN_FACTOR``. All of it is exact
rational arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cmp_to_key

WINDOW = 64
MIN_SAMPLES = 8
MARGIN = (1, 25)
MIN_FACTOR = (1, 2)
SAMPLE_MAX = 1 << 40
STORED_MAX = SAMPLE_MAX << 1

Ratio = tuple[int, int]


def _ge(a: Ratio, b: Ratio) -> bool:
    return a[0] * b[1] >= b[0] * a[1]


def _max(a: Ratio, b: Ratio) -> Ratio:
    return a if _ge(a, b) else b


def sampled(estimated: int, actual: int) -> bool:
    """Whether one reconcile enters the window."""
    return 0 < estimated <= SAMPLE_MAX and actual <= SAMPLE_MAX


def push(window: list[tuple[int, int]], estimated: int, actual: int, factor: Ratio) -> None:
    """Push the sample of a reconcile whose estimate was corrected by ``factor`` (the one
    in force), dropping the oldest beyond ``WINDOW``."""
    if not sampled(estimated, actual):
        return
    num, den = factor
    raw = max(1, estimated * den // num)
    if len(window) == WINDOW:
        del window[0]
    window.append((raw, actual))


def p95(window: Sequence[tuple[int, int]]) -> Ratio | None:
    """The 95th-percentile ratio by nearest rank (the ``ceil(0.95 n)``-th smallest)."""
    if not window:
        return None
    ratios = [(a, e) for e, a in window]
    ratios.sort(key=cmp_to_key(_compare))
    rank = -(-95 * len(ratios) // 100)
    return ratios[rank - 1]


def _compare(x: Ratio, y: Ratio) -> int:
    left, right = x[0] * y[1], y[0] * x[1]
    return (left > right) - (left < right)


def factor(estimated: int, actual: int, window: Sequence[tuple[int, int]], two_sided: bool) -> Ratio:
    """The factor for cumulative sums and a window; exact models keep the upward-only rule."""
    if not two_sided or len(window) < MIN_SAMPLES:
        return (actual, estimated) if estimated > 0 and actual > estimated else (1, 1)
    worst = p95(window)
    if worst is None:
        return (1, 1)
    pn, pd = worst
    floor = (pn * MARGIN[1] + MARGIN[0] * pd, pd * MARGIN[1])
    mean = (sum(a for _, a in window), sum(e for e, _ in window))
    return _max(_max(floor, mean), MIN_FACTOR)


def apply(raw_sum: int, ratio: Ratio) -> int:
    """``ceil(raw_sum * num / den)`` with floor division."""
    num, den = ratio
    if num == den:
        return raw_sum
    return (raw_sum * num + den - 1) // den


__all__ = [
    "MARGIN",
    "MIN_FACTOR",
    "MIN_SAMPLES",
    "SAMPLE_MAX",
    "STORED_MAX",
    "WINDOW",
    "apply",
    "factor",
    "p95",
    "push",
]
