"""The ``ctxengine`` command line (SPEC section 9): ``demo``, ``inspect``, ``migrate``, ``bench``
and ``replay``.

Exit codes: 0 success; 1 an invariant broke (``demo``); 2 bad input or an
unreachable store (the message names it; arguments that cannot run are argparse's
usage errors). ``inspect`` and ``migrate --dry-run`` open the store read-only: they
create no file and change nothing (ADR 0010). Every message that may hold text from a
store or a model is printed through ``terminal.visible``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core import backends
from ..errors import ContextError, ModelValidationError
from ..stores import DEFAULT_STATEMENT_TIMEOUT
from .console import RICH, Console
from .terminal import visible

EXIT_OK = 0
EXIT_INVARIANT = 1
EXIT_USAGE = 2


@contextmanager
def _progress(total: int | None, enabled: bool) -> Iterator[Callable[[str], None]]:
    """A progress bar on stderr (only on a terminal, with rich); yields ``advance(description)``."""
    console = Console(stderr=True)
    if not enabled or not RICH or not console.is_terminal:
        yield lambda _description: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("starting", total=total)

        def advance(description: str) -> None:
            progress.update(task, advance=1, description=description)

        yield advance


#: What ``--store`` takes (three slashes: relative to the working directory; four: absolute).
_STORE_HELP = "sqlite:///relative.db, sqlite:////absolute/path.db, memory:// or postgresql://..."

#: The ``demo`` flag of each ``DemoConfig`` field.
_DEMO_FLAGS = {
    "turns": "--turns",
    "context_window": "--window",
    "session_id": "--session",
    "summarizer": "--summarizer",
}


def _demo(args: argparse.Namespace) -> int:
    from .demo import DemoConfig, TurnRecord, check_config, run_demo
    from .demo_checks import check, report_dict
    from .demo_view import print_report

    config = DemoConfig(
        turns=args.turns,
        store_url=args.store,
        backend=args.backend,
        session_id=args.session,
        context_window=args.window,
        summarizer=args.summarizer,
    )
    try:
        check_config(config)
    except ModelValidationError as exc:  # a usage error: argparse's message and exit code 2
        args.parser.error(f"argument {_DEMO_FLAGS.get(exc.field, exc.field)}: {visible(exc.reason)}")
    with _progress(config.turns, enabled=True) as advance:

        def on_turn(turn: TurnRecord) -> None:
            advance(f"turn {turn.turn}/{config.turns}")

        record = asyncio.run(run_demo(config, on_turn=on_turn))
    checks = check(record)
    report = report_dict(record, checks)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print_report(report, checks, Console(), inspect_url=args.store or record.store)
    return EXIT_OK if report["ok"] else EXIT_INVARIANT


def _inspect(args: argparse.Namespace) -> int:
    from ..core.prompt_cache import PriceTable
    from ..stores import open_store
    from .inspection import inspect_session, print_summary

    prices = PriceTable(args.input_price, args.cached_read_price, args.cache_write_price)

    async def read() -> dict[str, object] | None:
        # Read-only: a missing file is an error, an older schema is read as it is, nothing is written.
        store = await open_store(args.store, read_only=True, statement_timeout=args.statement_timeout)
        try:
            summary = await inspect_session(store, args.session, prices=prices)
        finally:
            await store.close()
        if args.json:
            return summary.to_dict()
        print_summary(summary, Console())
        return None

    data = asyncio.run(read())
    if data is not None:
        print(json.dumps(data, sort_keys=True, default=str))
    return EXIT_OK


def _migrate(args: argparse.Namespace) -> int:
    from ..stores import migrate_store

    report = asyncio.run(
        migrate_store(args.store, dry_run=args.dry_run, statement_timeout=args.statement_timeout)
    )
    if args.json:
        print(json.dumps(report.to_dict(), sort_keys=True))
        return EXIT_OK
    steps = report.applied if not args.dry_run else report.pending
    verb = "would apply" if args.dry_run else "applied"
    print(f"{report.store}: schema level {report.level}, revision {report.from_revision}")
    if not steps:
        print("up to date: nothing to migrate")
    for step in steps:
        print(f"{verb} migration {step}")
    if steps and not args.dry_run:
        print(f"now at revision {report.to_revision}")
    return EXIT_OK


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes {text!r}: expected comma-separated integers") from None
    if not sizes or any(n < 8 for n in sizes):
        raise argparse.ArgumentTypeError(f"--sizes {text!r}: every size must be at least 8 items")
    return tuple(sorted(set(sizes)))


def _bench_cache(args: argparse.Namespace) -> int:
    """``ctxengine bench --cache``: the prompt-cache workloads alone (issue 39)."""
    from .bench_cache import CacheSettings, cache_markdown, run_cache

    results = run_cache(CacheSettings.for_run(args.quick, peers=not args.no_peers))
    report = results.to_dict()
    section = "\n".join(cache_markdown(results)) + "\n"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cache.md").write_text(section)
    (out / "cache.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return EXIT_OK
    print(section)
    Console().print(f"wrote cache markdown: {out / 'cache.md'}")
    Console().print(f"wrote cache json: {out / 'cache.json'}")
    return EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    if args.cache:
        return _bench_cache(args)
    from .bench import DEFAULT_SIZES, Settings, run_bench
    from .bench_report import markdown, write_outputs
    from .bench_runtime import RuntimeSettings, run_runtime, runtime_markdown

    out = Path(args.out)
    report: dict[str, Any] = {}
    lines: list[str] = []
    written: dict[str, Path] = {}
    if not args.runtime_only:
        settings = Settings(sizes=args.sizes or DEFAULT_SIZES, quick=args.quick, peers=not args.no_peers)
        with _progress(None, enabled=True) as advance:
            results = run_bench(settings, progress=advance)
        written = write_outputs(results, out)
        report = results.to_dict()
        lines.append(markdown(results))
    if not args.no_runtime:
        with _progress(None, enabled=True) as advance:
            runtime = run_runtime(RuntimeSettings.for_run(args.quick), progress=advance)
        report["runtime"] = runtime.to_dict()
        section = "\n".join(runtime_markdown(runtime)) + "\n"
        lines.append(section)
        out.mkdir(parents=True, exist_ok=True)
        written["runtime markdown"] = out / "runtime.md"
        written["runtime markdown"].write_text(section)
        written["runtime json"] = out / "runtime.json"
        written["runtime json"].write_text(json.dumps(report["runtime"], indent=2, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return EXIT_OK
    # Plain Markdown, so the tables can be pasted as they are (the README's come from here).
    print("\n".join(lines))
    console = Console()
    for kind, path in written.items():
        console.print(f"wrote {kind}: {path}")
    if not args.runtime_only and "plot" not in written:
        console.print("no plot: matplotlib is not installed (pip install 'ctxengine[peers]')")
    return EXIT_OK


def _seconds(text: str) -> float | None:
    """``--statement-timeout``: seconds, or 0 for no limit."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds") from None
    if not 0 <= seconds <= 86_400:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 0 (no limit) to 86400 seconds")
    return seconds or None


def _price(text: str) -> float:
    """A price flag: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite price >= 0")
    return value


def _add_prices(parser: argparse.ArgumentParser) -> None:
    """The price table of an effective input cost (ADR 0020)."""
    parser.add_argument(
        "--input-price",
        type=_price,
        default=1.0,
        metavar="PRICE",
        help="price of an uncached input token (default 1: costs read as input-token equivalents)",
    )
    parser.add_argument(
        "--cached-read-price",
        type=_price,
        default=0.1,
        metavar="RATIO",
        help="a cached input token's price as a multiple of the input price (default 0.1)",
    )
    parser.add_argument(
        "--cache-write-price",
        type=_price,
        default=1.25,
        metavar="RATIO",
        help="a cache-write token's price as a multiple of the input price (default 1.25, Anthropic)",
    )


def _add_statement_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--statement-timeout",
        type=_seconds,
        default=DEFAULT_STATEMENT_TIMEOUT,
        metavar="SECONDS",
        help=f"interrupt a statement that runs longer (default {DEFAULT_STATEMENT_TIMEOUT:g}; 0: no limit)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxengine", description="The context engine of an agent runtime.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the scripted fifty-turn session and check its invariants")
    demo.add_argument("--turns", type=int, default=50, help="turns to run (default 50)")
    demo.add_argument("--store", metavar="URL", help=_STORE_HELP + " (default: a new SQLite file)")
    demo.add_argument(
        "--backend", choices=backends.BACKENDS, help="core backend (default: CTXENGINE_BACKEND)"
    )
    demo.add_argument("--session", metavar="ID", help="session id (default: demo-<random>)")
    demo.add_argument("--window", type=int, default=32_000, help="the fake model's context window in tokens")
    demo.add_argument(
        "--summarizer",
        choices=("extractive", "scripted"),
        default="extractive",
        help="compaction: the extractive default, or a model-backed compactor on a scripted model",
    )
    demo.add_argument("--json", action="store_true", help="print the report as one JSON object")
    demo.set_defaults(run=_demo, parser=demo)

    inspect = sub.add_parser(
        "inspect", help="show a session's plan, epochs, compactions and events (read-only)"
    )
    inspect.add_argument("--store", metavar="URL", required=True, help=_STORE_HELP)
    inspect.add_argument("session", metavar="SESSION", help="the session id")
    inspect.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    _add_prices(inspect)
    _add_statement_timeout(inspect)
    inspect.set_defaults(run=_inspect)

    migrate = sub.add_parser("migrate", help="apply a store's pending schema migrations (ADR 0009)")
    migrate.add_argument("store", metavar="URL", help=_STORE_HELP)
    migrate.add_argument(
        "--dry-run", action="store_true", help="list what would be applied; open read-only, change nothing"
    )
    migrate.add_argument("--json", action="store_true", help="print the report as one JSON object")
    _add_statement_timeout(migrate)
    migrate.set_defaults(run=_migrate)

    bench = sub.add_parser("bench", help="SPEC section 11 on this machine: both backends and installed peers")
    bench.add_argument("--out", default="bench-out", help="output directory (default bench-out/)")
    bench.add_argument("--sizes", type=_sizes, help="growth-curve history lengths, e.g. 1000,3000,10000")
    bench.add_argument(
        "--quick", action="store_true", help="smaller payloads and fewer repeats (a smoke run)"
    )
    bench.add_argument("--no-peers", action="store_true", help="skip LangChain even when installed")
    runtime = bench.add_mutually_exclusive_group()
    runtime.add_argument(
        "--no-runtime", action="store_true", help="skip the runtime section (first request, workers)"
    )
    runtime.add_argument(
        "--runtime-only", action="store_true", help="only the runtime section (issue 13 acceptance)"
    )
    runtime.add_argument(
        "--cache",
        action="store_true",
        help="only the prompt-cache workloads: a long run and a session on a 32k window, "
        "cached fraction and effective cost per provider rule against trim_messages (issue 39)",
    )
    bench.add_argument("--json", action="store_true", help="print the results as one JSON object")
    bench.set_defaults(run=_bench)

    from .replay import add_parser as add_replay

    add_replay(sub, _STORE_HELP, _add_prices)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except ContextError as exc:
        print(f"ctxengine {args.command}: {type(exc).__name__}: {visible(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
