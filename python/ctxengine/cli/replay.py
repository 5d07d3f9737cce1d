"""``ctxengine replay``: recorded sessions rebuilt under named configurations (issue 42).

    ctxengine replay --store sqlite:///runs.db --session s1 --session s2 --config configs.toml
    ctxengine replay --transcript run.jsonl --window 16000 --json

Inputs: a store (``--store`` with ``--session`` / ``--sessions FILE``, opened read-only)
or foreign transcripts (``--transcript``, one session per JSON-lines file; ``--format``).
Configurations: a TOML or JSON file (``--config``) and/or one from flags (``--window``,
``--reserve``, ``--max-output``, ``--model``, ``--counting``, ``--policy``, ``--name``).
Outputs in ``--out``: ``replay.jsonl`` (the report rows), ``replay.md`` (the summary
table) and PNG plots of the first session when matplotlib is installed; ``--json`` prints
the summaries as one JSON object. A progress line goes to stderr on a terminal or with
``--progress``.

    ctxengine replay --store sqlite:///runs.db --session s1 --check

``--check`` is the determinism check (ADR 0024): every recorded request of the sessions
rebuilt under its recorded configuration to its recorded prefix and body hashes; a
mismatch names the first differing region and exits 1. Requests recorded before format 6
are listed with the reason they cannot be rebuilt, and do not fail the check.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.budget import BudgetPolicy
from ..core.prompt_cache import PriceTable
from ..errors import PolicyError


def add_parser(sub: Any, store_help: str, add_prices: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "replay", help="rebuild recorded sessions' requests under other configurations (issue 42)"
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--store", metavar="URL", help=store_help)
    source.add_argument("--transcript", metavar="FILE", action="append", help="a foreign transcript (JSONL)")
    p.add_argument("--session", metavar="ID", action="append", default=[], help="a session of --store")
    p.add_argument("--sessions", metavar="FILE", help="a file of session ids of --store, one a line")
    p.add_argument(
        "--format", default="auto", help="transcript format: auto, openai_chat, openai_responses, anthropic"
    )
    p.add_argument("--config", metavar="FILE", help="named configurations (TOML or JSON)")
    p.add_argument("--name", default="cli", help="the name of the configuration the flags make (default cli)")
    p.add_argument("--model", help="provider:model of the flags' configuration (default openai:gpt-4o-mini)")
    p.add_argument("--window", type=int, help="context window of the flags' configuration")
    p.add_argument("--max-output", type=int, help="the model's largest output")
    p.add_argument("--reserve", type=int, help="output reserve")
    p.add_argument("--counting", choices=("exact", "estimate", "auto"), help="counting method")
    p.add_argument(
        "--policy", metavar="FILE", help="BudgetPolicy overrides (TOML) for the flags' configuration"
    )
    p.add_argument(
        "--method", choices=("fast", "exact"), default="fast", help="per-item arithmetic or the real loop"
    )
    p.add_argument(
        "--no-baselines", action="store_true", help="skip the full-history and trim_messages baselines"
    )
    p.add_argument("--workers", type=int, default=1, help="worker processes for a store replay (default 1)")
    p.add_argument("--out", default="replay-out", help="output directory (default replay-out/)")
    p.add_argument("--json", action="store_true", help="print the summaries as one JSON object")
    p.add_argument("--progress", action="store_true", help="a progress line on stderr even off a terminal")
    p.add_argument(
        "--check",
        action="store_true",
        help="rebuild each recorded request of --store's sessions to its recorded hashes (1: one differs)",
    )
    add_prices(p)
    p.set_defaults(run=run, parser=p)


def _configs(args: argparse.Namespace) -> list[Any]:
    from ..replay import ReplayConfig, load_configs

    configs = load_configs(args.config) if args.config else []
    flags = (args.model, args.window, args.max_output, args.reserve, args.counting, args.policy)
    if not configs or any(v is not None for v in flags):
        table: dict[str, Any] = {}
        for key, value in (("model", args.model), ("window", args.window), ("max_output", args.max_output)):
            if value is not None:
                table[key] = value
        if args.reserve is not None:
            table["output_reserve"] = args.reserve
        if args.counting is not None:
            table["counting"] = args.counting
        from ..replay.config import config_from_dict

        config = config_from_dict(args.name, table)
        if args.policy:
            config = ReplayConfig(
                config.name,
                config.model,
                config.counting,
                BudgetPolicy.from_toml(args.policy),
                config.compaction,
            )
        configs.append(config)
    return configs


def _ids(args: argparse.Namespace) -> list[str]:
    ids = list(args.session)
    if args.sessions:
        try:
            text = Path(args.sessions).read_text()
        except OSError as exc:
            raise PolicyError(args.sessions, f"cannot read: {exc.strerror}") from None
        ids += [line.strip() for line in text.splitlines() if line.strip()]
    if not ids:
        args.parser.error("--store needs --session or --sessions")
    return ids


class Progress:
    """``replay: N/M sessions`` on stderr, at most five times a second."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled, self.last = total, 0, enabled, 0.0

    def __call__(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self.last > 0.2 or self.done == self.total):
            self.last = now
            print(f"\rreplay: {self.done}/{self.total} sessions", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled and self.done:
            print(file=sys.stderr)


async def _verify(url: str, ids: list[str]) -> list[Any]:
    from ..replay import verify_session
    from ..stores import open_store

    store = await open_store(url, read_only=True)
    try:
        return [await verify_session(store, sid) for sid in ids]
    finally:
        await store.close()


def check(args: argparse.Namespace) -> int:
    """``--check``: 0 when every request with a record reproduced, 1 otherwise."""
    if not args.store:
        args.parser.error("--check needs --store")
    checks = asyncio.run(_verify(args.store, _ids(args)))
    status = 1 if any(r.first_differing_region for c in checks for r in c.requests) else 0
    if args.json:
        print(json.dumps({"sessions": [c.to_dict() for c in checks]}, sort_keys=True))
        return status
    for c in checks:
        print(
            f"{c.session_id}: {c.reproduced} of {len(c.requests)} requests reproduced, "
            f"{len(c.unreproducible)} without what a rebuild needs"
        )
        for r in (r for r in c.requests if not r.ok):
            region = r.first_differing_region
            why = f"first differing region {region}" if region else r.reason
            print(f"  request {r.index} (event {r.sequence}, run {r.run_id} step {r.step}): {why}")
    return status


def run(args: argparse.Namespace) -> int:
    if args.check:
        return check(args)
    from ..replay import ReplayOptions, load_transcript, markdown, plots, replay_sessions, replay_store_to

    prices = PriceTable(args.input_price, args.cached_read_price, args.cache_write_price)
    options = ReplayOptions(_configs(args), not args.no_baselines, args.method, prices)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "replay.jsonl"
    enabled = args.progress or sys.stderr.isatty()
    if args.store:
        ids = _ids(args)
        progress = Progress(len(ids), enabled)
        streamed = replay_store_to(
            jsonl, args.store, ids, options, workers=args.workers, on_progress=progress
        )
        progress.close()
        summaries, plotted = streamed.summaries, streamed.plotted
    else:
        sessions = [load_transcript(p, args.format) for p in args.transcript]
        progress = Progress(len(sessions), enabled)
        rows = asyncio.run(replay_sessions(sessions, options, on_session=lambda _s: progress()))
        progress.close()
        with jsonl.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
        summaries = [r for r in rows if r["kind"] == "summary"]
        plotted = []
        if sessions:
            from ..replay import Replayer

            plotted = asyncio.run(Replayer(options).session(sessions[0]))
    table = markdown(summaries)
    (out / "replay.md").write_text(table)
    written = plots(plotted, out, prices)
    if args.json:
        print(json.dumps({"summaries": summaries}, sort_keys=True))
        return 0
    print(table)
    print(f"wrote {jsonl} and {out / 'replay.md'}")
    if written:
        print("wrote plots: " + ", ".join(str(p) for p in written))
    else:
        print("no plots: matplotlib is not installed (pip install 'ctxengine[peers]')")
    return 0


__all__ = ["add_parser", "run"]
