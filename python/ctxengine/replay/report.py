"""The replay's report (issue 42; the schema is in ``docs/replay.md``): one JSON object per
request, one per session and configuration, one summary per configuration, as JSON lines;
a Markdown summary table; PNG plots of one session with matplotlib when it is installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..core.prompt_cache import PriceTable
from .api import Outcome
from .fast import Request

REGIONS = ("prefix", "summary", "history", "blocks", "current_turn")
_CACHE = (
    "wire_tokens",
    "shared",
    "ceiling",
    "openai",
    "anthropic_tokens",
    "anthropic_read",
    "anthropic_write",
    "vllm",
)


def _figures(o: Outcome, j: int) -> tuple[Request, int, int, int]:
    """Request ``j`` and its Anthropic total, read and write (its own body's on the exact path)."""
    r = o.requests[j]
    assert r.cache is not None
    if o.anthropic is not None:
        return (r, *o.anthropic[j])
    return r, r.cache.total, r.cache.anthropic_read, r.cache.anthropic_write


def _costs(r: Request, a_total: int, read: int, write: int, prices: PriceTable) -> tuple[float, float, float]:
    """The request's effective input cost: OpenAI's rule, Anthropic's, nothing cached."""
    g = r.cache
    assert g is not None
    return prices.cost(g.total, g.openai), prices.cost(a_total, read, write), prices.cost(g.total)


@dataclass(slots=True)
class Totals:
    """Sums over requests (a session's or a configuration's)."""

    requests: int = 0
    fits: int = 0
    compactions: int = 0
    cut: int = 0
    pointers: int = 0
    clipped: int = 0
    cleared: int = 0
    folded: int = 0
    overflows: dict[str, int] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=lambda: [0] * 6)
    cache: list[int] = field(default_factory=lambda: [0] * 8)
    cost: list[float] = field(default_factory=lambda: [0.0] * 3)

    def add(self, o: Outcome, prices: PriceTable) -> None:
        for j in range(len(o.requests)):
            r, a_total, read, write = _figures(o, j)
            self.add_one(r, a_total, read, write, _costs(r, a_total, read, write, prices))

    def add_one(
        self, r: Request, a_total: int, read: int, write: int, costs: tuple[float, float, float]
    ) -> None:
        """One request, with its Anthropic figures and its costs (``_costs``)."""
        g = r.cache
        assert g is not None
        t, ca, co = self.tokens, self.cache, self.cost
        self.requests += 1
        if r.fits:
            self.fits += 1
        else:
            self.overflows[r.reason] = self.overflows.get(r.reason, 0) + 1
        self.compactions += r.compactions
        self.cut += r.cut > 0
        self.pointers += r.pointers
        self.clipped += r.clipped
        self.cleared += r.cleared
        self.folded += r.folded
        t[0] += r.prefix
        t[1] += r.summary
        t[2] += r.history
        t[3] += r.blocks
        t[4] += r.turn
        t[5] += r.total
        ca[0] += g.total
        ca[1] += g.shared
        ca[2] += g.ceiling
        ca[3] += g.openai
        ca[4] += a_total
        ca[5] += read
        ca[6] += write
        ca[7] += g.vllm
        co[0] += costs[0]
        co[1] += costs[1]
        co[2] += costs[2]

    def merge(self, other: Totals) -> None:
        for name in ("requests", "fits", "compactions", "cut", "pointers", "clipped", "cleared", "folded"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for k, v in other.overflows.items():
            self.overflows[k] = self.overflows.get(k, 0) + v
        self.tokens = [a + b for a, b in zip(self.tokens, other.tokens, strict=True)]
        self.cache = [a + b for a, b in zip(self.cache, other.cache, strict=True)]
        self.cost = [a + b for a, b in zip(self.cost, other.cost, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        wire = self.cache[0]

        def share(n: int, of: int = wire) -> float:
            return round(n / of, 4) if of else 0.0

        return {
            "requests": self.requests,
            "fits": self.fits,
            "overflows": dict(sorted(self.overflows.items())),
            "compactions": self.compactions,
            "requests_cut": self.cut,
            "history_pointers": self.pointers,
            "turn": {"clipped": self.clipped, "cleared": self.cleared, "folded": self.folded},
            "tokens": dict(zip((*REGIONS, "total"), self.tokens, strict=True)),
            "tokens_per_request": round(self.tokens[5] / self.requests, 1) if self.requests else 0.0,
            "cache": dict(zip(_CACHE, self.cache, strict=True)),
            "cached_fraction": {
                "openai": share(self.cache[3]),
                "anthropic": share(self.cache[5], self.cache[4]),
                "vllm": share(self.cache[7]),
                "ceiling": share(self.cache[2]),
            },
            "cost": dict(
                zip(("openai", "anthropic", "uncached"), (round(c, 1) for c in self.cost), strict=True)
            ),
        }


def request_row(o: Outcome, j: int, prices: PriceTable) -> dict[str, Any]:
    """Request ``j`` of ``o`` as the report's object."""
    r, a_total, read, write = _figures(o, j)
    g = r.cache
    assert g is not None
    return {
        "kind": "request",
        "config": o.name,
        "session": o.session.session_id,
        "request": r.index,
        "item": r.item,
        "run": r.run,
        "step": r.step,
        "tokens": dict(
            zip((*REGIONS, "total"), (r.prefix, r.summary, r.history, r.blocks, r.turn, r.total), strict=True)
        ),
        "capacity": r.capacity,
        "fits": r.fits,
        "reason": r.reason,
        "history_items": r.history_items,
        "cut": r.cut,
        "dropped_tokens": r.dropped_tokens,
        "pointers": r.pointers,
        "compactions": r.compactions,
        "turn": {"clipped": r.clipped, "cleared": r.cleared, "folded": r.folded},
        "cache": dict(
            zip(_CACHE, (g.total, g.shared, g.ceiling, g.openai, a_total, read, write, g.vllm), strict=True)
        ),
        "cost": {
            "openai": round(prices.cost(g.total, g.openai), 3),
            "anthropic": round(prices.cost(a_total, read, write), 3),
            "uncached": round(prices.cost(g.total), 3),
        },
    }


def request_lines(o: Outcome, prices: PriceTable, totals: Totals | None = None) -> Iterator[str]:
    """``request_row`` of every request of ``o`` as JSON text (``json.dumps`` of the row,
    without building it: a report of hundreds of thousands of requests is written fast),
    each request added to ``totals`` on the way."""
    name, sid = json.dumps(o.name), json.dumps(o.session.session_id)
    head = f'{{"kind": "request", "config": {name}, "session": {sid}, '
    p = prices
    for j in range(len(o.requests)):
        r, a_total, read, write = _figures(o, j)
        g = r.cache
        assert g is not None
        costs = _costs(r, a_total, read, write, p)
        if totals is not None:
            totals.add_one(r, a_total, read, write, costs)
        yield (
            f'{head}"request": {r.index}, "item": {r.item}, "run": {r.run}, "step": {r.step}, '
            f'"tokens": {{"prefix": {r.prefix}, "summary": {r.summary}, "history": {r.history}, '
            f'"blocks": {r.blocks}, "current_turn": {r.turn}, "total": {r.total}}}, '
            f'"capacity": {r.capacity}, "fits": {"true" if r.fits else "false"}, "reason": "{r.reason}", '
            f'"history_items": {r.history_items}, "cut": {r.cut}, "dropped_tokens": {r.dropped_tokens}, '
            f'"pointers": {r.pointers}, "compactions": {r.compactions}, '
            f'"turn": {{"clipped": {r.clipped}, "cleared": {r.cleared}, "folded": {r.folded}}}, '
            f'"cache": {{"wire_tokens": {g.total}, "shared": {g.shared}, "ceiling": {g.ceiling}, '
            f'"openai": {g.openai}, "anthropic_tokens": {a_total}, "anthropic_read": {read}, '
            f'"anthropic_write": {write}, "vllm": {g.vllm}}}, '
            f'"cost": {{"openai": {round(costs[0], 3)!r}, "anthropic": {round(costs[1], 3)!r}, '
            f'"uncached": {round(costs[2], 3)!r}}}}}'
        )


def session_row(o: Outcome, totals: Totals) -> dict[str, Any]:
    s = o.session
    return {
        "kind": "session",
        "config": o.name,
        "session": s.session_id,
        "source": s.source,
        "method": o.method,
        "issues": [i.to_dict() for i in s.issues],
        **totals.to_dict(),
    }


class Report:
    """Collects a replay's outcomes: the per-configuration totals, the rows or lines, and
    the series of one session for the plots."""

    def __init__(self, names: Sequence[str], settings: dict[str, dict[str, Any]], prices: PriceTable) -> None:
        self.names = list(names)
        self.settings = settings
        self.prices = prices
        self.totals = {name: Totals() for name in names}
        self.sessions = 0
        self.plotted: list[Outcome] = []

    def add(self, outcomes: Sequence[Outcome], *, rows: bool = True) -> list[Any]:
        """The session's rows (dicts), or its JSON lines with ``rows=False``."""
        self.sessions += 1
        if not self.plotted:
            self.plotted = list(outcomes)
        out: list[Any] = []
        for o in outcomes:
            t = Totals()
            if rows:
                t.add(o, self.prices)
                out += [request_row(o, j, self.prices) for j in range(len(o.requests))]
                out.append(session_row(o, t))
            else:
                out += request_lines(o, self.prices, t)
                out.append(json.dumps(session_row(o, t)))
            self.totals[o.name].merge(t)
        return out

    def summaries(self) -> list[dict[str, Any]]:
        return [
            {
                "kind": "summary",
                "config": name,
                "sessions": self.sessions,
                "settings": self.settings.get(name, {"baseline": name}),
                **self.totals[name].to_dict(),
            }
            for name in self.names
        ]


def write_lines(fh: TextIO, lines: Iterable[str]) -> None:
    for line in lines:
        fh.write(line)
        fh.write("\n")


def markdown(summaries: Sequence[dict[str, Any]]) -> str:
    """The summary rows as a Markdown table."""
    lines = [
        "| configuration | sessions | requests | fit | compactions | tokens/request | OpenAI cached "
        "| Anthropic cached | vLLM cached | ceiling | cost OpenAI | cost Anthropic | cost uncached |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        f, c = s["cached_fraction"], s["cost"]
        lines.append(
            f"| {s['config']} | {s['sessions']} | {s['requests']:,} | {s['fits']:,} | {s['compactions']:,} "
            f"| {s['tokens_per_request']:,.0f} | {100 * f['openai']:.1f}% | {100 * f['anthropic']:.1f}% "
            f"| {100 * f['vllm']:.1f}% | {100 * f['ceiling']:.1f}% | {c['openai']:,.0f} "
            f"| {c['anthropic']:,.0f} | {c['uncached']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def plots(outcomes: Sequence[Outcome], out: Path, prices: PriceTable) -> list[Path]:
    """Three PNGs of one session under every configuration: tokens per request by region,
    cached against uncached tokens (OpenAI's rule), cumulative effective cost (OpenAI).
    Nothing (an empty list) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    n = max(1, len(outcomes))
    fig, axes = plt.subplots(n, 1, figsize=(10, 2.6 * n), squeeze=False, sharex=True)
    for ax, o in zip(axes[:, 0], outcomes, strict=False):
        xs = range(len(o.requests))
        series = [
            [getattr(r, a) for r in o.requests] for a in ("prefix", "summary", "history", "blocks", "turn")
        ]
        ax.stackplot(xs, *series, labels=list(REGIONS))
        ax.set_title(o.name, fontsize=9)
        ax.set_ylabel("tokens")
    axes[0, 0].legend(loc="upper left", fontsize=7)
    axes[-1, 0].set_xlabel("request")
    written.append(_save(fig, out / "replay-regions.png", plt))
    fig, ax = plt.subplots(figsize=(10, 4))
    for o in outcomes:
        cached = [r.cache.openai if r.cache else 0 for r in o.requests]
        total = [r.cache.total if r.cache else 0 for r in o.requests]
        ax.plot(cached, label=f"{o.name} cached")
        ax.plot(
            [t - c for t, c in zip(total, cached, strict=True)], linestyle="--", label=f"{o.name} uncached"
        )
    ax.set_xlabel("request")
    ax.set_ylabel("tokens (OpenAI rule)")
    ax.legend(fontsize=7)
    written.append(_save(fig, out / "replay-cache.png", plt))
    fig, ax = plt.subplots(figsize=(10, 4))
    for o in outcomes:
        running, ys = 0.0, []
        for r in o.requests:
            running += prices.cost(r.cache.total, r.cache.openai) if r.cache else 0.0
            ys.append(running)
        ax.plot(ys, label=o.name)
    ax.set_xlabel("request")
    ax.set_ylabel("effective input cost (OpenAI)")
    ax.legend(fontsize=7)
    written.append(_save(fig, out / "replay-cost.png", plt))
    return written


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


__all__ = [
    "REGIONS",
    "Report",
    "Totals",
    "markdown",
    "plots",
    "request_lines",
    "request_row",
    "session_row",
    "write_lines",
]
