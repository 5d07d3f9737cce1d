"""The ``ctxengine`` command line: ``demo`` (more commands arrive with later features)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import backends
from .budget import BudgetPolicy, allocate
from .model import ResolvedModel
from .synthetic import chat_payload, synthetic_session


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def _core_demo(n_items: int) -> dict[str, Any]:
    """Cut, budget and hash on a synthetic session, timed on each backend."""
    model = ResolvedModel("demo", "model-200k", 200_000, 16_384, 8_192)
    policy = BudgetPolicy()
    payload = chat_payload(1_000_000)
    report: dict[str, Any] = {"items": n_items, "model_id": model.model_id, "backends": {}}
    cuts = set()
    hashes = set()
    for name in backends.BACKENDS:
        backends.use_backend(name)
        core = backends.active()
        budget = allocate(model, 6_000, policy)
        estimator = core.TokenEstimator()
        cold_items = synthetic_session(n_items, tag=f"cold-{name}")
        start = time.perf_counter()
        cut = core.select_history(cold_items, 0, budget.history_tokens, estimator, model.model_id)
        cold_ms = (time.perf_counter() - start) * 1000.0

        def warm_cut(
            core: Any = core,
            items: Any = cold_items,
            est: Any = estimator,
            tokens: int = budget.history_tokens,
        ) -> None:
            core.select_history(items, 0, tokens, est, model.model_id)

        def hash_payload(core: Any = core) -> None:
            core.payload_hash(payload)

        warm_ms = _median_ms(warm_cut, repeat=7)
        hash_ms = _median_ms(hash_payload, repeat=3)
        cuts.add((n_items - cut, budget.history_tokens))
        hashes.add(core.payload_hash(payload))
        report["backends"][name] = {
            "history_tokens": budget.history_tokens,
            "retained_items": n_items - cut,
            "cut_cold_ms": round(cold_ms, 3),
            "cut_warm_ms": round(warm_ms, 3),
            "hash_1mb_ms": round(hash_ms, 3),
        }
    report["backends_agree"] = len(cuts) == 1 and len(hashes) == 1
    return report


def _print_core_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"ctxengine core on a synthetic {report['items']:,}-item session")
    for column in ("backend", "history budget", "retained", "cut cold ms", "cut warm ms", "hash 1 MB ms"):
        table.add_column(column, justify="right")
    for name, row in report["backends"].items():
        table.add_row(
            name,
            f"{row['history_tokens']:,}",
            f"{row['retained_items']:,}",
            f"{row['cut_cold_ms']:.3f}",
            f"{row['cut_warm_ms']:.3f}",
            f"{row['hash_1mb_ms']:.3f}",
        )
    console = Console()
    console.print(table)
    verdict = "identical" if report["backends_agree"] else "DIFFERENT"
    console.print(f"cut index and payload hash on both backends: {verdict}")


def _demo(args: argparse.Namespace) -> int:
    report = _core_demo(args.items)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        _print_core_report(report)
    return 0 if report["backends_agree"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ctxengine", description="The context engine of an agent runtime.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demonstration session and print a report")
    demo.add_argument("--items", type=int, default=10_000, help="synthetic session length")
    demo.add_argument("--json", action="store_true", help="print the report as one JSON object")
    demo.set_defaults(run=_demo)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
