"""Replays with their report: as rows in memory (``replay_sessions``, ``replay_store``,
``replay_transcripts``), or streamed to a JSON-lines file from a store by worker processes
(``replay_store_to``: the command line's and the benchmark's path)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

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
    with open(path, "w", encoding="utf-8") as fh:
        return asyncio.run(_stream(url, ids, options, fh, plot))


async def _stream(
    url: str,
    ids: Sequence[str],
    options: ReplayOptions,
    fh: TextIO,
    plot: bool,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Totals], int, list[Outcome]]:
    """Sessions read a slice at a time, replayed, their lines written to ``fh``."""
    rp = Replayer(options)
    report = Report(rp.names(), _settings(options), options.prices)
    counter = stored_counter(options)
    for start in range(0, len(ids), _READ):
        for session, stored in await _read(url, ids[start : start + _READ], counter):
            write_lines(fh, report.add(await rp.session(session, stored), rows=False))
        if on_progress is not None:
            on_progress(len(ids[start : start + _READ]))
    return report.totals, report.sessions, report.plotted if plot else []


#: Sessions read from the store at a time by one process.
_READ = 50


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
    rows, then the summaries); with ``workers`` > 1, worker processes take ``chunk`` sessions
    at a time."""
    out = Path(path)
    names = Replayer(options).names()
    totals = {name: Totals() for name in names}
    sessions = 0
    plotted: list[Outcome] = []
    files: list[Path] = []
    try:
        with out.open("w", encoding="utf-8") as fh:
            if workers <= 1:
                got = asyncio.run(_stream(url, session_ids, options, fh, True, on_progress))
                sessions = _merge(totals, got, sessions, plotted, None)
            else:
                # A part per worker and four more for the progress line, each at least 50
                # sessions (a part pays for its own plans and estimators).
                size = chunk or max(50, -(-len(session_ids) // (workers * 4)))
                parts = [list(session_ids[i : i + size]) for i in range(0, len(session_ids), size)]
                files = [out.with_name(f".{out.name}.part{n}") for n in range(len(parts))]
                with ProcessPoolExecutor(max_workers=workers) as pool:
                    futures = [
                        pool.submit(_part, url, ids, options, str(f), n == 0)
                        for n, (ids, f) in enumerate(zip(parts, files, strict=True))
                    ]
                    for future, f in zip(futures, files, strict=True):
                        sessions = _merge(totals, future.result(), sessions, plotted, on_progress)
                        with f.open(encoding="utf-8") as part:
                            shutil.copyfileobj(part, fh, 1 << 20)
                        f.unlink()
            report = Report(names, _settings(options), options.prices)
            report.totals, report.sessions = totals, sessions
            summaries = report.summaries()
            write_lines(fh, (json.dumps(s) for s in summaries))
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
