"""Replays with their report: as rows in memory (``replay_sessions``, ``replay_store``,
``replay_transcripts``), or streamed to a JSON-lines file from a store by worker processes
(``replay_store_to``: the command line's and the benchmark's path)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .api import Outcome, Replayer, ReplayOptions
from .report import Report, Totals, write_lines
from .setup import make_estimator
from .sources import ReplaySession, load_transcript, read_sessions


def _settings(options: ReplayOptions) -> dict[str, dict[str, Any]]:
    return {c.name: c.to_dict() for c in options.configs}


async def replay_sessions(
    sessions: Sequence[ReplaySession | tuple[ReplaySession, Sequence[int | None] | None]],
    options: ReplayOptions,
    *,
    on_session: Callable[[ReplaySession], None] | None = None,
) -> list[dict[str, Any]]:
    """Every report row of ``sessions``: the request and session rows in session order,
    then one summary per configuration and baseline."""
    rp = Replayer(options)
    report = Report(rp.names(), _settings(options), options.prices)
    rows: list[dict[str, Any]] = []
    for entry in sessions:
        session, stored = entry if isinstance(entry, tuple) else (entry, None)
        rows += report.add(await rp.session(session, stored))
        if on_session is not None:
            on_session(session)
    return rows + report.summaries()


def stored_counter(options: ReplayOptions) -> str | None:
    """The stored-count counter of the first configuration (``None``: counted afresh)."""
    first = options.configs[0]
    if first.encoding is None:
        return None
    return make_estimator(first).counter_id(f"{first.model.model_id}#{first.encoding}", "history")


async def _read(url: str, session_ids: Sequence[str], counter: str | None) -> list[Any]:
    from ..stores import open_store

    store = await open_store(url, read_only=True)
    try:
        return await read_sessions(store, session_ids, counter)
    finally:
        await store.close()


async def replay_store(
    url: str,
    session_ids: Sequence[str],
    options: ReplayOptions,
    *,
    on_session: Callable[[ReplaySession], None] | None = None,
) -> list[dict[str, Any]]:
    """The report rows of the sessions ``session_ids`` of the store at ``url`` (opened
    read-only; each session's items read once, with their stored counts)."""
    sessions = await _read(url, session_ids, stored_counter(options))
    return await replay_sessions(sessions, options, on_session=on_session)


async def replay_transcripts(
    paths: Sequence[str | Path], options: ReplayOptions, *, fmt: str = "auto"
) -> list[dict[str, Any]]:
    """The report rows of foreign transcripts, one session per file."""
    return await replay_sessions([load_transcript(p, fmt) for p in paths], options)


@dataclass(slots=True)
class Streamed:
    """What a streamed replay leaves besides its file: the summaries and one session's
    outcomes (for the plots)."""

    summaries: list[dict[str, Any]]
    plotted: list[Outcome]
    sessions: int


def _part(
    url: str, ids: Sequence[str], options: ReplayOptions, path: str, plot: bool
) -> tuple[dict[str, Totals], int, list[Outcome]]:
    """One worker's share: its sessions replayed, their lines written to ``path``."""

    async def run() -> tuple[dict[str, Totals], int, list[Outcome]]:
        sessions = await _read(url, ids, stored_counter(options))
        rp = Replayer(options)
        report = Report(rp.names(), _settings(options), options.prices)
        with open(path, "w", encoding="utf-8") as fh:
            for session, stored in sessions:
                write_lines(fh, report.add(await rp.session(session, stored), rows=False))
        return report.totals, report.sessions, report.plotted if plot else []

    return asyncio.run(run())


def replay_store_to(
    path: str | Path,
    url: str,
    session_ids: Sequence[str],
    options: ReplayOptions,
    *,
    workers: int = 1,
    chunk: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> Streamed:
    """Replay the sessions of a store into the JSON-lines file ``path`` (request and session
    rows, then the summaries), with ``workers`` processes taking ``chunk`` sessions at a time."""
    out = Path(path)
    names = Replayer(options).names()
    totals = {name: Totals() for name in names}
    # A part per worker and four more for the progress line, each at least 50 sessions
    # (a part pays for its own read, plans and estimators).
    size = chunk or max(50, -(-len(session_ids) // (max(1, workers) * 4)))
    parts = [list(session_ids[i : i + size]) for i in range(0, len(session_ids), size)]
    files = [out.with_name(f".{out.name}.part{n}") for n in range(len(parts))]
    sessions = 0
    plotted: list[Outcome] = []
    try:
        if workers <= 1:
            results = (
                _part(url, ids, options, str(f), n == 0)
                for n, (ids, f) in enumerate(zip(parts, files, strict=True))
            )
            for got in results:
                sessions = _merge(totals, got, sessions, plotted, on_progress)
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [
                    pool.submit(_part, url, ids, options, str(f), n == 0)
                    for n, (ids, f) in enumerate(zip(parts, files, strict=True))
                ]
                for future in futures:
                    sessions = _merge(totals, future.result(), sessions, plotted, on_progress)
        report = Report(names, _settings(options), options.prices)
        report.totals, report.sessions = totals, sessions
        summaries = report.summaries()
        with out.open("wb") as fh:
            for f in files:
                fh.write(f.read_bytes())
            for s in summaries:
                fh.write((json.dumps(s) + "\n").encode())
    finally:
        for f in files:
            f.unlink(missing_ok=True)
    return Streamed(summaries, plotted, sessions)


def _merge(
    totals: dict[str, Totals],
    got: tuple[dict[str, Totals], int, list[Outcome]],
    sessions: int,
    plotted: list[Outcome],
    on_progress: Callable[[int], None] | None,
) -> int:
    part, n, shown = got
    for name, t in part.items():
        totals[name].merge(t)
    if shown and not plotted:
        plotted.extend(shown)
    if on_progress is not None:
        on_progress(n)
    return sessions + n


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


__all__ = [
    "Streamed",
    "default_workers",
    "replay_sessions",
    "replay_store",
    "replay_store_to",
    "replay_transcripts",
    "stored_counter",
]
