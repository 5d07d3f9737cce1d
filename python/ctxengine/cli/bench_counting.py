"""``ctxengine bench``, issue 14 rows: what exact token counting costs.

- the tokenizer's throughput, MB/s on one core, per content class of the accuracy
  corpus (``o200k_base``; the Rust backend's ``bpe-openai`` against the reference's
  ``tiktoken``);
- the 10,000-item cut cold on an OpenAI model, with nothing counted yet and with the
  counts already held (a worker primed with the stored counts), against the byte
  heuristic's cold cut; and the warm cut, which must not change.

Shared with ``benches/bench_counting.py`` and ``benches/bench_tokenize.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxengine.cli.synthetic import synthetic_session
from ctxengine.core import backends

CORPUS = Path(__file__).resolve().parents[3] / "tests" / "core" / "corpus"
CLASSES = {
    "code": "code.py.txt",
    "prose": "prose.txt",
    "json": "data.json",
    "cjk": "cjk.txt",
    "ru_el": "ru_el.txt",
    "emoji": "emoji.txt",
}
ENCODING = "o200k_base"
EXACT_MODEL = "openai:gpt-4o"
HEURISTIC_MODEL = "bench:model-200k"
CUT_ITEMS = 10_000
CUT_BUDGET = 600_000


def corpus_items(name: str, target: int = 1_000_000, size: int = 2_000) -> list[str]:
    """About ``target`` bytes of a class as items of about ``size`` bytes (cut on line ends)."""
    lines = (CORPUS / CLASSES[name]).read_text(encoding="utf-8").splitlines(keepends=True)
    items: list[str] = []
    current: list[str] = []
    held = total = 0
    while total < target:
        for line in lines:
            current.append(line)
            n = len(line.encode("utf-8"))
            held += n
            total += n
            if held >= size:
                items.append("".join(current))
                current, held = [], 0
    if current:
        items.append("".join(current))
    return items


def run_counting(
    repeats: Callable[[int], int],
    time_call: Callable[..., Any],
    max_seconds: float,
    quick: bool,
    progress: Callable[[str], None] = lambda _label: None,
) -> dict[str, dict[str, Any]]:
    """``{measure: {impl: Timing}}``: ``tokenize_<class>`` (1 MB, or 100 kB when quick),
    ``cut_cold_heuristic``, ``cut_cold_exact``, ``cut_cold_exact_counted``, ``cut_warm_heuristic``,
    ``cut_warm_exact``."""
    out: dict[str, dict[str, Any]] = {}
    if not CORPUS.is_dir():  # an installed package without the repository's tests
        return out
    target = 100_000 if quick else 1_000_000
    n = 1_000 if quick else CUT_ITEMS
    for name in backends.BACKENDS:
        core = backends.module(name)
        core.count_tokens(ENCODING, "warm up")
        for cls in CLASSES:
            progress(f"{name}: tokenizer, {cls}")
            texts = corpus_items(cls, target)
            out.setdefault(f"tokenize_{cls}", {})[name] = time_call(
                lambda texts=texts, core=core: [core.count_tokens(ENCODING, t) for t in texts],
                repeats=3 if name == "python" else 7,
                max_seconds=max_seconds,
            )
        progress(f"{name}: cut cold, exact")
        for measure, model, counted in (
            ("cut_cold_heuristic", HEURISTIC_MODEL, False),
            ("cut_cold_exact", EXACT_MODEL, False),
            ("cut_cold_exact_counted", EXACT_MODEL, True),
        ):
            out.setdefault(measure, {})[name] = _cold_cut(
                core, n, model, counted, time_call, repeats(n), max_seconds
            )
        # Both warm cuts here, on the same items, one after the other: a warm cut's time
        # depends on the heap the process has churned, not only on the counting method.
        items = synthetic_session(n, tag=f"count-warm-{name}")
        for measure, model in (("cut_warm_heuristic", HEURISTIC_MODEL), ("cut_warm_exact", EXACT_MODEL)):
            estimator = core.TokenEstimator()
            core.select_history(items, 0, CUT_BUDGET, estimator, model)
            out.setdefault(measure, {})[name] = time_call(
                lambda items=items, est=estimator, core=core, model=model: core.select_history(
                    items, 0, CUT_BUDGET, est, model
                ),
                repeats=repeats(n) * 3,
                max_seconds=max_seconds,
            )
    return out


def _cold_cut(
    core: Any, n: int, model: str, counted: bool, time_call: Callable[..., Any], reps: int, max_seconds: float
) -> Any:
    counter = iter(range(1_000_000))
    warmed = None
    if counted:
        # The counts of this content already held, as a worker primed with the stored counts.
        warmed = core.TokenEstimator()
        warmed.raw_estimates(synthetic_session(n, tag="count-counted"), model)

    def fresh() -> tuple[Any, ...]:
        tag = "count-counted" if counted else f"count-cold-{model}-{next(counter)}"
        return (synthetic_session(n, tag=tag), warmed or core.TokenEstimator())

    return time_call(
        lambda items, est: core.select_history(items, 0, CUT_BUDGET, est, model),
        repeats=reps,
        max_seconds=max_seconds,
        setup=fresh,
    )


def counting_markdown(spec: dict[str, dict[str, Any]], quick: bool) -> list[str]:
    """The "Token counting" tables."""
    if not any(k.startswith("tokenize_") for k in spec):
        return []
    mb = 0.1 if quick else 1.0

    def rate(t: Any) -> str:
        return "-" if t is None or t.median_ms <= 0 else f"{mb / (t.median_ms / 1000):,.1f}"

    def ms(t: Any) -> str:
        if t is None:
            return "-"
        return f"{t.median_ms:,.3f} ms" if t.median_ms < 10 else f"{t.median_ms:,.1f} ms"

    lines = [
        "## Token counting (issue 14)",
        "",
        f"Exact counting with `{ENCODING}`, MB/s on one core, items of about 2 kB from the accuracy corpus.",
        "",
        "| content | rust (bpe-openai) | reference (tiktoken) |",
        "|---|---:|---:|",
    ]
    for cls in CLASSES:
        row = spec.get(f"tokenize_{cls}", {})
        lines.append(f"| {cls} | {rate(row.get('rust'))} | {rate(row.get('python'))} |")
    base = spec.get("cut_cold_heuristic", {}).get("rust")
    lines += [
        "",
        "`select_history` on 10,000 items never seen (fresh items and estimator), on an OpenAI model:",
        "",
        "| what | rust | reference | rust / heuristic cold | target | |",
        "|---|---:|---:|---:|---|---|",
    ]
    for measure, label, target in (
        ("cut_cold_heuristic", "byte heuristic (the baseline)", None),
        ("cut_cold_exact", "exact, nothing counted yet", None),
        ("cut_cold_exact_counted", "exact, counts already held", 2.0),
        ("cut_warm_heuristic", "byte heuristic, memo warm (seen before)", None),
        ("cut_warm_exact", "exact, memo warm (seen before)", None),
    ):
        row = spec.get(measure, {})
        rust = row.get("rust")
        x = None if rust is None or base is None or base.median_ms <= 0 else rust.median_ms / base.median_ms
        verdict = "-" if target is None or x is None else ("met" if x <= target else "**missed**")
        goal = f"≤ {target:.0f}x" if target else "-"
        lines.append(
            f"| {label} | {ms(rust)} | {ms(row.get('python'))} | "
            f"{'-' if x is None else f'{x:,.2f}x'} | {goal} | {verdict} |"
        )
    return lines


__all__ = ["CLASSES", "CORPUS", "corpus_items", "counting_markdown", "run_counting"]
