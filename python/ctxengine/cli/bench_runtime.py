"""``ctxengine bench``'s runtime section (issue 13): what a runtime sees, not what the core does.

1. The first request of a new run in a fresh process, on SQLite and PostgreSQL, for
   sessions of 1,000 / 10,000 / 100,000 events (200k window; the longer ones already
   compacted by earlier runs), with the log-log slope over session length.
2. A 500-turn scripted session: the engine time of turn 500 against turn 50, and
   compactions per turn once the history first fills.
3. Stored-item decode rate on both backends.
4. Many workers on one PostgreSQL server (1, 2, 4, 8 processes, 2 sessions x 200 turns
   each, synchronous commit on), and one writer on SQLite.
5. Equal windows: a turn of a session twice as long, with a window of the same size, side by
   side in one worker (both after the first compaction): what a turn costs over session
   length alone.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import backends
from ..core.canonical import canonical_json
from ..core.decode import decode_stored_items
from ..runtime.session import item_payload
from ..stores import open_store
from .bench_first import Fixture, build_fixture, history_items, measure
from .bench_workers import WINDOW, WorkersResult, run_workers, schedule
from .pgserver import PostgresServer, postgres_bin
from .turns import ScriptedWorker


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    quick: bool = False
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    workers: tuple[int, ...] = (1, 2, 4, 8)
    turns: int = 200
    long_turns: int = 500
    repeats: int = 7
    postgres: bool = True
    #: Equal windows: sessions, the younger ones' first compared turn, the older ones' last.
    #: The 200k window first compacts at turn 391, then about every 213 turns: turns 401-420
    #: and 827-846 hold windows of about 380-440 items, in logs of about 1,500 and 3,100 events.
    equal: tuple[int, int, int] = (8, 401, 846)

    @classmethod
    def for_run(cls, quick: bool) -> RuntimeSettings:
        if not quick:
            return cls()
        return cls(True, (1_000, 3_000), (1, 2), 30, 80, 3, equal=(2, 11, 60))


@dataclass(slots=True)
class RuntimeResults:
    settings: RuntimeSettings
    first: dict[str, dict[int, dict[str, float]]] = field(default_factory=dict)
    long_session: dict[str, float] = field(default_factory=dict)
    equal_windows: dict[str, float] = field(default_factory=dict)
    decode: dict[str, float] = field(default_factory=dict)
    workers: list[WorkersResult] = field(default_factory=list)
    sqlite_writer: WorkersResult | None = None
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    elapsed_s: float = 0.0

    def slope(self, store: str) -> float | None:
        points = self.first.get(store, {})
        xs = [math.log(n) for n in points]
        ys = [math.log(max(p["first_ms"], 1e-6)) for p in points.values()]
        if len(xs) < 2:
            return None
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        den = sum((x - mx) ** 2 for x in xs)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "quick": self.settings.quick,
            "first_request": {s: {str(n): v for n, v in d.items()} for s, d in self.first.items()},
            "first_request_slope": {s: self.slope(s) for s in self.first},
            "long_session": self.long_session,
            "equal_windows": self.equal_windows,
            "decode_items_per_s": self.decode,
            "workers": [w.to_dict() for w in self.workers],
            "sqlite_writer": self.sqlite_writer.to_dict() if self.sqlite_writer else None,
            "load": list(self.load),
            "elapsed_s": round(self.elapsed_s, 1),
        }


def decode_rate(n: int = 20_000, repeats: int = 5) -> dict[str, float]:
    """Stored-item payloads decoded per second, per backend (median of ``repeats``)."""
    items = history_items(n, "decode")
    payloads = [canonical_json(item_payload(item)).decode("utf-8") for item in items]
    seqs = list(range(1, len(payloads) + 1))
    rates: dict[str, float] = {}
    previous = backends.backend()
    try:
        for name in backends.BACKENDS:
            backends.use_backend(name)
            times = []
            for _ in range(repeats if name == "rust" else 1):
                start = time.perf_counter()
                decoded, index, _ = decode_stored_items(payloads, seqs)
                times.append(time.perf_counter() - start)
                assert index is None and len(decoded) == len(payloads)
            rates[name] = len(payloads) / statistics.median(times)
    finally:
        backends.use_backend(previous)
    return rates


async def long_session(url: str, turns: int) -> dict[str, float]:
    """One worker, one session, ``turns`` turns: turn 50 against turn ``turns``, compactions."""
    store = await open_store(url)
    try:
        worker = ScriptedWorker(store, owner="long")
        timings = [await worker.turn("long-session", t) for t in range(1, turns + 1)]
    finally:
        await store.close()

    def around(turn: int) -> float:
        near = [t.turn_s * 1e3 for t in timings if abs(t.turn - turn) <= 10]
        return statistics.median(near)

    first_fill = next((t.turn for t in timings if t.compactions), None)
    after = [t for t in timings if first_fill is not None and t.turn >= first_fill]
    compactions = sum(t.compactions for t in after)
    early, late = around(50), around(turns)
    return {
        "turns": turns,
        "turn_50_ms": early,
        f"turn_{turns}_ms": late,
        "ratio": late / early if early else 0.0,
        "first_compaction_turn": float(first_fill or 0),
        "compactions_after_fill": float(compactions),
        "compactions_per_turn_after_fill": compactions / len(after) if after else 0.0,
        "history_items_last": float(timings[-1].history_items),
    }


async def equal_windows(url: str, sessions: int, early: int, turns: int) -> dict[str, float]:
    """Turns ``early`` to ``early + 19`` of half the sessions against the last twenty of the
    other half, side by side in one worker (``bench_workers.schedule``): the worker's CPU per
    turn (median; the store's thread included), each side's window and log length."""
    store = await open_store(url)
    cpu: dict[str, list[float]] = {"early": [], "late": []}
    items: dict[str, list[int]] = {"early": [], "late": []}
    events: dict[str, list[int]] = {"early": [], "late": []}
    try:
        worker = ScriptedWorker(store, owner="equal")
        names = [f"equal-{i}" for i in range(sessions)]
        for session, turn, side in schedule(names, turns, early=early):
            timing = await worker.turn(session, turn)
            if side is not None:
                cpu[side].append(timing.cpu_s * 1e3)
                items[side].append(timing.history_items)
                events[side].append(max(seq for seq, _ in timing.acked))
    finally:
        await store.close()
    out: dict[str, float] = {"early_turn": float(early), "late_turn": float(turns - WINDOW + 1)}
    for side in ("early", "late"):
        out[f"{side}_cpu_ms"] = statistics.median(cpu[side])
        out[f"{side}_items_min"] = float(min(items[side]))
        out[f"{side}_items_max"] = float(max(items[side]))
        out[f"{side}_events"] = statistics.median(events[side])
    out["ratio"] = out["late_cpu_ms"] / out["early_cpu_ms"] if out["early_cpu_ms"] else 0.0
    return out


#: The first request's log-log slope over session length that counts as flat (issue 13).
FLAT_SLOPE = 0.1


def run_runtime(settings: RuntimeSettings, progress: Callable[[str], None] | None = None) -> RuntimeResults:
    say = progress or (lambda _label: None)
    started = time.perf_counter()
    results = RuntimeResults(settings)
    root = Path(tempfile.mkdtemp(prefix="ctxengine-runtime-"))
    server: PostgresServer | None = None
    try:
        say("runtime: decode rate")
        results.decode = decode_rate(2_000 if settings.quick else 20_000)
        say("runtime: first request, SQLite")
        results.first["sqlite"] = _first(lambda n: f"sqlite:///{root / f'first-{n}.db'}", settings, say)
        bin_dir = postgres_bin() if settings.postgres else None
        if bin_dir is not None:
            server = PostgresServer(bin_dir, Path(tempfile.mkdtemp(prefix="ctxengine-pg-")), durable=True)
            server.start()
            say("runtime: first request, PostgreSQL")
            dsn = server.dsn
            results.first["postgresql"] = _first(lambda n: dsn, settings, say)
        say(f"runtime: a {settings.long_turns}-turn session")
        results.long_session = asyncio.run(long_session(f"sqlite:///{root / 'long.db'}", settings.long_turns))
        say("runtime: equal windows")
        equal = f"sqlite:///{root / 'equal.db'}"
        results.equal_windows = asyncio.run(equal_windows(equal, *settings.equal))
        if server is not None:
            for n in settings.workers:
                say(f"runtime: {n} worker(s) on PostgreSQL")
                tag = f"w{n}-{time.time_ns()}"
                ran = run_workers(server.dsn, n, turns=settings.turns, tag=tag, data_dir=server.data)
                results.workers.append(ran)
        say("runtime: one writer on SQLite")
        writer = f"sqlite:///{root / 'writer.db'}"
        results.sqlite_writer = run_workers(writer, 1, turns=settings.turns, tag="sqlite")
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(server.root, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    results.load = os.getloadavg()
    results.elapsed_s = time.perf_counter() - started
    return results


def _first(
    url_of: Callable[[int], str], settings: RuntimeSettings, say: Callable[[str], None]
) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for n in settings.sizes:
        say(f"runtime: first request, {n:,} events")
        fixture: Fixture = asyncio.run(build_fixture(url_of(n), f"first-{n}-{time.time_ns()}", n))
        result = measure(fixture, repeats=settings.repeats)
        result["events"] = float(fixture.events)
        result["carries"] = float(fixture.carries)
        out[n] = result
    return out


def _first_rows(r: RuntimeResults) -> list[str]:
    lines = [
        "| store | events | first request | open | plan | seed (claim included) | build "
        "| history items | from a carry |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for store, points in r.first.items():
        for p in points.values():
            cells = [
                store,
                f"{int(p['events']):,}",
                *(f"{p[k]:.1f}" for k in ("first_ms", "open_ms", "plan_ms", "seed_ms", "build_ms")),
                f"{int(p['history_items']):,}",
                "yes" if p["summary"] else "no",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    for store in r.first:
        slope = r.slope(store)
        if slope is not None:
            verdict = "met" if slope <= FLAT_SLOPE else "**missed**"
            lines.append(
                f"\nLog-log slope of the first request over session length, {store}: {slope:.3f} "
                f"(flat: ≤ {FLAT_SLOPE}, SPEC section 11 growth row: {verdict})"
            )
    return lines


def _worker_rows(r: RuntimeResults) -> list[str]:
    rows = [*r.workers, *([r.sqlite_writer] if r.sqlite_writer else [])]
    if not rows:
        return []
    lines = [
        "",
        "### Many workers (2 sessions x N turns each, a tool round trip every third turn)",
        "",
        "| store | workers | steps | steps/s | first request p50 / p99 (ms) | turn p50 early / late (ms) "
        "| worker CPU per turn early / late (ms) | CPU ms/step (server) | lost | duplicated |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in rows:
        cells = [
            w.store,
            str(w.workers),
            f"{w.steps:,}",
            f"{w.steps_per_s:,.0f}",
            f"{w.first_p50_ms:.1f} / {w.first_p99_ms:.1f}",
            f"{w.turn_p50_early_ms:.1f} / {w.turn_p50_late_ms:.1f}",
            f"{w.turn_cpu_early_ms:.2f} / {w.turn_cpu_late_ms:.2f}",
            f"{w.cpu_ms_per_step:.2f} ({w.server_cpu_ms_per_step:.2f})",
            str(w.lost),
            str(w.duplicated),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    one = next((w for w in r.workers if w.workers == 1), None)
    if one is not None:
        phases = ", ".join(f"{k} {v:.2f}" for k, v in one.phases_ms.items())
        lines += ["", f"Wall ms per step by phase (1 worker, PostgreSQL): {phases}."]
    return lines


def runtime_markdown(r: RuntimeResults) -> list[str]:
    """The runtime section of the bench report (Markdown lines)."""
    load = ", ".join(f"{x:.1f}" for x in r.load)
    took = f"Load average at the end: {load} (2 shared CPUs). {r.elapsed_s:,.0f} s."
    lines = ["## Runtime (issue 13)", "", took, ""]
    lines += ["### First request of a new run, fresh process (median ms)", "", *_first_rows(r)]
    if r.long_session:
        s = r.long_session
        turns = int(s["turns"])
        lines += [
            "",
            f"### A {turns}-turn session (SQLite, one worker)",
            "",
            "Turn times are medians of the 21 turns around each; compactions per turn count from "
            "the first compaction on.",
            "",
            f"| turn 50 (ms) | turn {turns} (ms) | ratio | first compaction (turn) | compactions per turn |",
            "|---:|---:|---:|---:|---:|",
            f"| {s['turn_50_ms']:.2f} | {s[f'turn_{turns}_ms']:.2f} | {s['ratio']:.2f} "
            f"| {int(s['first_compaction_turn'])} | {s['compactions_per_turn_after_fill']:.3f} |",
        ]
    if r.equal_windows:
        e = r.equal_windows
        first, last = int(e["early_turn"]), int(e["late_turn"])
        lines += [
            "",
            "### Equal windows (SQLite, one worker in process, side by side)",
            "",
            "Worker CPU per turn (median; the store's thread included) of sessions at the same "
            "window size whose logs are about twice apart.",
            "",
            "| turns | log (events, median) | window (items) | worker CPU per turn (ms) |",
            "|---|---:|---:|---:|",
        ]
        for side, turn in (("early", first), ("late", last)):
            lines.append(
                f"| {turn}-{turn + WINDOW - 1} | {e[f'{side}_events']:,.0f} "
                f"| {int(e[f'{side}_items_min'])}-{int(e[f'{side}_items_max'])} | {e[f'{side}_cpu_ms']:.2f} |"
            )
        lines.append(f"\nRatio (later turns over earlier ones): {e['ratio']:.2f}")
    if r.decode:
        rust, ref = r.decode.get("rust", 0.0), r.decode.get("python", 0.0)
        lines += ["", "### Stored-item decode (items/s)", "", "| rust | reference |", "|---:|---:|"]
        lines.append(f"| {rust:,.0f} | {ref:,.0f} |")
    return [*lines, *_worker_rows(r)]


__all__ = [
    "RuntimeResults",
    "RuntimeSettings",
    "decode_rate",
    "equal_windows",
    "long_session",
    "run_runtime",
    "runtime_markdown",
]
