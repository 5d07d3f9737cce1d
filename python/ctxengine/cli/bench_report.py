"""``ctxengine bench`` output: the Markdown tables, the growth plot and the raw JSON."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from .bench import FIFTY_TURN_ITEMS, BenchResults, Timing

#: The warm cut's old target (a log-log slope below it was sublinear); SPEC section 11 replaced
#: that row, and the warm cut's slope is now reported only.
SUBLINEAR_SLOPE = 0.9
#: A log-log slope up to this counts as linear.
LINEAR_SLOPE = 1.15


@dataclass(frozen=True, slots=True)
class Row:
    what: str
    rust: str
    reference: str
    ratio: str
    target: str
    verdict: str

    def markdown(self) -> str:
        cells = (self.what, self.rust, self.reference, self.ratio, self.target, self.verdict)
        return "| " + " | ".join(cells) + " |"


def _ms(t: Timing | None) -> str:
    if t is None:
        return "-"
    return f"{t.median_ms:,.3f} ms" if t.median_ms < 10 else f"{t.median_ms:,.1f} ms"


def _verdict(*conditions: bool | None) -> str:
    known = [c for c in conditions if c is not None]
    if not known:
        return "-"
    return "met" if all(known) else "**missed**"


def slope(points: dict[int, Timing]) -> float | None:
    """Least-squares slope of log(time) over log(size): 1 is linear, below 1 sublinear."""
    pairs = [(math.log(n), math.log(max(t.median_ms, 1e-6))) for n, t in sorted(points.items())]
    if len(pairs) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    den = sum((x - mx) ** 2 for x, _ in pairs)
    return None if den == 0 else sum((x - mx) * (y - my) for x, y in pairs) / den


def spec_rows(r: BenchResults) -> list[Row]:
    spec = r.spec
    n_cut = f"{r.settings.cut_items:,}"
    payload = f"{r.settings.payload_bytes // 1000:,} KB" if r.settings.quick else "1 MB"

    def get(measure: str, impl: str) -> Timing | None:
        return spec.get(measure, {}).get(impl)

    def ratio(measure: str) -> tuple[str, float | None]:
        rust, ref = get(measure, "rust"), get(measure, "python")
        if rust is None or ref is None or rust.median_ms <= 0:
            return "-", None
        value = ref.median_ms / rust.median_ms
        return f"{value:,.1f}x", value

    def timed(measure: str, label: str, target: str, max_ms: float | None, min_ratio: float | None) -> Row:
        """A row comparing one measure on both backends against its absolute and ratio targets."""
        rust = get(measure, "rust")
        text, x = ratio(measure)
        checks = []
        if max_ms is not None:
            checks.append(None if rust is None else rust.median_ms <= max_ms)
        if min_ratio is not None:
            checks.append(None if x is None else x >= min_ratio)
        return Row(label, _ms(rust), _ms(get(measure, "python")), text, target, _verdict(*checks))

    rows: list[Row] = [
        timed("payload_hash", f"`payload_hash`, {payload} chat payload", "≥ 20x the reference", None, 20)
    ]
    rust_hash, sha = get("payload_hash", "rust"), get("payload_hash", "hashlib")
    over_sha = None if rust_hash is None or sha is None else rust_hash.median_ms / sha.median_ms
    rows.append(
        Row(
            "`payload_hash` / `hashlib.sha256` of the canonical bytes",
            _ms(rust_hash),
            f"{_ms(sha)} (sha256)",
            "-" if over_sha is None else f"{over_sha:,.2f}x",
            "≤ 3x",
            _verdict(None if over_sha is None else over_sha <= 3),
        )
    )
    rows += [
        timed("cut_warm", f"`select_history`, {n_cut} items, memo warm", "≤ 1 ms; ≥ 50x", 1, 50),
        timed("cut_cold", f"`select_history`, {n_cut} items, memo cold", "≤ 15 ms", 15, None),
        timed("assemble_50_turns", "`assemble`, fifty-turn session", "≤ 1 ms; ≥ 10x", 1, 10),
        timed("assemble_10k", f"`assemble`, {n_cut}-item session", "≤ 10 ms", 10, None),
    ]
    rates = r.rates
    sessions = r.settings.sessions
    rust_rate, ref_rate = rates.get("rust"), rates.get("python")
    rows.append(
        Row(
            f"many sessions: {sessions['rust']:,} interleaved fifty-turn sessions "
            f"(reference: {sessions['python']:,})",
            "-" if rust_rate is None else f"{rust_rate:,.0f} assembles/s",
            "-" if ref_rate is None else f"{ref_rate:,.0f} assembles/s",
            "-" if not rust_rate or not ref_rate else f"{rust_rate / ref_rate:,.1f}x",
            f"≥ 1,000 assembles/s on one core; memo within its cap ({_memo(r)})",
            _verdict(None if rust_rate is None else rust_rate >= 1_000),
        )
    )
    cold_slope = slope(r.growth.get("rust cut cold", {}))
    warm_slope = slope(r.growth.get("rust cut warm", {}))
    ref_cold, ref_warm = (
        slope(r.growth.get("python cut cold", {})),
        slope(r.growth.get("python cut warm", {})),
    )
    rows.append(
        Row(
            "growth: cold cut over history length (log-log slope)",
            _fmt_slope(cold_slope),
            _fmt_slope(ref_cold),
            "-",
            f"linear (slope ≈ 1, ≤ {LINEAR_SLOPE})",
            _verdict(None if cold_slope is None else cold_slope <= LINEAR_SLOPE),
        )
    )
    rows.append(
        Row(
            "growth: warm cut over history length (log-log slope)",
            _fmt_slope(warm_slope),
            _fmt_slope(ref_warm),
            "-",
            "reported: SPEC section 11 replaced this row (warm cut sublinear) with a flat "
            "per-turn cost of a new run (the first-request slope, `--runtime-only`)",
            "-",
        )
    )
    return rows


def _memo(r: BenchResults) -> str:
    size, cap = r.memo_entries.get("rust", 0), r.memo_entries.get("rust_capacity", 0)
    return f"{size:,} of {cap:,} entries"


def _fmt_slope(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def growth_columns(r: BenchResults) -> list[str]:
    preferred = [
        "rust cut warm", "rust cut cold", "rust assemble",
        "python cut warm", "python cut cold", "python assemble",
        "langchain trim_messages",
    ]  # fmt: skip
    return [c for c in preferred if c in r.growth]


def markdown(r: BenchResults) -> str:
    m = r.machine
    lines = [
        "# ctxengine benchmarks",
        "",
        f"`ctxengine bench` on {m.get('date', '?')}: Python {m.get('python', '?')}, "
        f"{m.get('platform', '?')} ({m.get('machine', '?')}, {m.get('cpus', '?')} CPUs); "
        f"langchain-core {m.get('langchain_core', '?')}. "
        f"Medians; {r.elapsed_s:,.0f} s in all.",
    ]
    if r.settings.quick:
        lines += ["", "_Quick run: sizes reduced, so the verdicts are indicative only._"]
    lines += [
        "",
        "## SPEC section 11",
        "",
        "| what | rust | reference | reference / rust | target | |",
        "|---|---:|---:|---:|---|---|",
        *(row.markdown() for row in spec_rows(r)),
    ]
    peer = _peer_table(r)
    if peer:
        lines += ["", *peer]
    from ctxengine.cli.bench_interop import TRIM_SIZES, interop_markdown

    foreign = interop_markdown(r.spec, TRIM_SIZES[:1] if r.settings.quick else TRIM_SIZES)
    if foreign:
        lines += ["", *foreign]
    from ctxengine.cli.bench_counting import counting_markdown

    counting = counting_markdown(r.spec, r.settings.quick)
    if counting:
        lines += ["", *counting]
    columns = growth_columns(r)
    if columns:
        lines += [
            "",
            "## Growth over history length (median ms)",
            "",
            "Cut budget: the history budget of a 200k-token window. Cold: fresh items and estimator.",
            "",
            "| items | " + " | ".join(c.replace("python", "reference") for c in columns) + " |",
            "|---:|" + "---:|" * len(columns),
        ]
        for size in r.settings.sizes:
            cells = [_cell(r.growth[c].get(size)) for c in columns]
            lines.append(f"| {size:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(t: Timing | None) -> str:
    return "-" if t is None else f"{t.median_ms:,.3f}" if t.median_ms < 10 else f"{t.median_ms:,.1f}"


def _peer_table(r: BenchResults) -> list[str]:
    trim_big = r.spec.get("trim_10k", {}).get("langchain")
    trim_small = r.spec.get("trim_50_turns", {}).get("langchain")
    if trim_big is None and trim_small is None:
        return []
    n = r.settings.cut_items
    lines = [
        "## Against LangChain `trim_messages` (same sessions, approximate token counter)",
        "",
        "| history | rust cut (warm) | rust cut (cold) | reference cut (cold) | `trim_messages` "
        "| trim / rust cold |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    cold = r.spec.get("cut_cold", {}).get("rust")
    ratio = "-" if cold is None or trim_big is None else f"{trim_big.median_ms / cold.median_ms:,.1f}x"
    lines.append(
        f"| {n:,} items | {_ms(r.spec.get('cut_warm', {}).get('rust'))} | {_ms(cold)} | "
        f"{_ms(r.spec.get('cut_cold', {}).get('python'))} | {_ms(trim_big)} | {ratio} |"
    )
    fifty = r.spec.get("assemble_50_turns", {}).get("rust")
    lines.append(
        f"| fifty turns ({FIFTY_TURN_ITEMS} items) | whole `assemble`: {_ms(fifty)} | - | "
        f"{_ms(r.spec.get('assemble_50_turns', {}).get('python'))} (assemble) | {_ms(trim_small)} | - |"
    )
    return lines


def plot(r: BenchResults, path: Path) -> bool:
    """The growth curves as a PNG (log-log); False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (cut_ax, asm_ax) = plt.subplots(1, 2, figsize=(12, 4.8), dpi=120)
    styles = {
        "rust cut warm": ("tab:orange", "-", "o"),
        "rust cut cold": ("tab:orange", "--", "s"),
        "python cut warm": ("tab:blue", "-", "o"),
        "python cut cold": ("tab:blue", "--", "s"),
        "langchain trim_messages": ("tab:green", ":", "^"),
        "rust assemble": ("tab:orange", "-", "o"),
        "python assemble": ("tab:blue", "-", "o"),
    }
    for curve, points in r.growth.items():
        ax = asm_ax if curve.endswith("assemble") else cut_ax
        colour, line, marker = styles.get(curve, ("tab:gray", "-", "x"))
        sizes = sorted(points)
        label = curve.replace("python", "reference")
        ax.plot(sizes, [points[n].median_ms for n in sizes], line, color=colour, marker=marker, label=label)
    cut_ax.set_title("History cut: select_history vs trim_messages")
    asm_ax.set_title("assemble (whole request, warm)")
    for ax in (cut_ax, asm_ax):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("history length (items)")
        ax.set_ylabel("median time (ms)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"ctxengine growth curves ({r.machine.get('cpus', '?')} CPUs, {r.machine.get('date', '')})")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def write_outputs(r: BenchResults, out: Path) -> dict[str, Path]:
    """Write ``bench.md``, ``bench.json`` and (with matplotlib) ``growth.png`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = {"markdown": out / "bench.md", "json": out / "bench.json"}
    written["markdown"].write_text(markdown(r))
    written["json"].write_text(json.dumps(r.to_dict(), indent=2, sort_keys=True) + "\n")
    if plot(r, out / "growth.png"):
        written["plot"] = out / "growth.png"
    return written


__all__ = [
    "LINEAR_SLOPE",
    "SUBLINEAR_SLOPE",
    "Row",
    "growth_columns",
    "markdown",
    "plot",
    "slope",
    "spec_rows",
    "write_outputs",
]
