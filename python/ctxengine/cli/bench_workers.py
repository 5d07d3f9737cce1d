"""Many workers on one store (issue 13, acceptance 5).

N worker processes share one PostgreSQL server (or, for SQLite, one writer
process shares a file). Each runs its sessions' turns with the scripted model
and no sleep, every turn a new run (``turns.ScriptedWorker``), and writes what
it saw: per turn the first-request and turn times, its steps, and every event
the store acknowledged. The harness starts them together, then checks the
log: every acknowledged event is there exactly once, at the sequence that was
acknowledged, sequences are gapless, each turn's user message and answer are
stored once. Throughput is steps per wall second; CPU per step counts the
workers and the database server.

The load stays the same to the end: a worker that has finished its turns
keeps taking turns of a session of its own (not measured, not counted) until
every worker has finished, so the last turns of the slowest worker run among
as many workers as the first turns did (otherwise they would run on an
emptying machine, and turns 181-200 would look faster than turns 11-30).

Run a worker directly: ``python -m ctxengine.cli.bench_workers URL OUT GO
SESSION...`` (the harness does).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..stores import open_store
from .bench_first import _env
from .turns import ScriptedWorker


@dataclass(slots=True)
class WorkersResult:
    store: str
    workers: int
    sessions_per_worker: int
    turns: int
    steps: int
    wall_s: float
    steps_per_s: float
    first_p50_ms: float
    first_p99_ms: float
    turn_p50_early_ms: float
    turn_p50_late_ms: float
    #: Median CPU of a worker's turn (its own process), in the windows ``schedule`` compares.
    turn_cpu_early_ms: float
    turn_cpu_late_ms: float
    cpu_ms_per_step: float
    server_cpu_ms_per_step: float
    lost: int
    duplicated: int
    load: tuple[float, float, float]
    phases_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


async def _worker(
    url: str, out: str, go: str, sessions: list[str], turns: int, owner: str, peers: int
) -> None:
    store = await open_store(url)
    try:
        worker = ScriptedWorker(store, owner=owner)
        while not os.path.exists(go):
            await asyncio.sleep(0.002)
        started = time.time()
        cpu0 = _cpu_self()
        records = []
        for session, turn, window in schedule(sessions, turns):
            t = await worker.turn(session, turn)
            records.append(
                {
                    "session": session,
                    "turn": turn,
                    "window": window,
                    "first_ms": t.first_request_s * 1e3,
                    "turn_ms": t.turn_s * 1e3,
                    "cpu_ms": t.cpu_s * 1e3,
                    "steps": t.steps,
                    "compactions": t.compactions,
                    "acked": t.acked,
                    "phases": dict(t.phases),
                }
            )
        ended = time.time()
        result = {"start": started, "end": ended, "cpu_s": _cpu_self() - cpu0, "turns": records}
        written = Path(out).with_suffix(".part")
        written.write_text(json.dumps(result))
        os.replace(written, out)  # whole, then visible to the other workers
        await _keep_load(worker, Path(out).parent, f"{sessions[0]}-load", peers, turns * len(sessions))
    finally:
        await store.close()


#: The turns compared (acceptance 5: "no decline from turn 20 to turn 200"): turns 11-30 of a
#: young session against the last 20 of an old one.
WINDOW, EARLY = 20, 11


def schedule(
    sessions: list[str], turns: int, *, early: int = EARLY, window: int = WINDOW
) -> list[tuple[str, int, str | None]]:
    """Every turn of every session, in the order a worker takes them, each with the window
    it is compared in (``"early"``, ``"late"`` or ``None``).

    Sessions pair up, old and young: the old one runs to turn ``turns - window`` and the
    young one to turn ``early - 1``; then the old one's last ``window`` turns alternate with
    the young one's turns ``early`` on, so the turns compared run side by side, under the
    same load and the same moment of a shared machine (run one after the other, a slow
    spell of the host reads as a slower turn 200); then the young one runs to the end.
    Without a pair (one session, or too few turns) sessions take turns in lockstep, turns
    ``early`` to ``early + window - 1`` early and the last ``window`` late."""
    old, young = sessions[0::2], sessions[1::2]
    if not young or turns < early + 2 * window:
        return [
            (s, t, "early" if early <= t < early + window else "late" if t > turns - window else None)
            for t in range(1, turns + 1)
            for s in sessions
        ]
    single = old[len(young) :]  # an odd one out keeps step with the old ones, uncompared
    order: list[tuple[str, int, str | None]] = []
    order += [(s, t, None) for t in range(1, turns - window + 1) for s in old]
    order += [(s, t, None) for t in range(1, early) for s in young]
    for k in range(window):
        pairs = [
            ((o, turns - window + 1 + k, "late"), (y, early + k, "early"))
            for o, y in zip(old, young, strict=False)
        ]
        for first, second in pairs:
            order += [first, second] if k % 2 == 0 else [second, first]
        order += [(s, turns - window + 1 + k, None) for s in single]
    order += [(s, t, None) for t in range(early + window, turns + 1) for s in young]
    return order


async def _keep_load(worker: ScriptedWorker, reports: Path, session: str, peers: int, most: int) -> None:
    """Turns of ``session`` until ``peers`` reports are written (or the harness says stop):
    the load a finished worker keeps up while the others finish. At most ``most`` turns."""
    for turn in range(1, most + 1):
        if (reports / STOP).exists() or _reported(reports, peers):
            return
        await worker.turn(session, turn)


#: The harness's files in a run's directory: the reports, and the word to stop.
REPORTS, STOP = "worker-*.json", "stop"


def _reported(folder: Path, workers: int) -> bool:
    """Whether ``workers`` reports are written whole in ``folder`` (one being written is a
    ``.part`` file until it is complete)."""
    return len(list(folder.glob(REPORTS))) >= workers


def _wait_all(
    procs: list[subprocess.Popen[bytes]], folder: Path, reported: Callable[[], None], timeout: float = 3600.0
) -> list[int]:
    """Every worker's exit code. ``reported`` is called once, when every report is written
    (before the load the workers keep up stops); when a worker fails, the others are told to
    stop keeping the load."""
    stop = folder / STOP
    deadline = time.monotonic() + timeout
    waiting = True
    while any(p.poll() is None for p in procs):
        if waiting and _reported(folder, len(procs)):
            waiting = False
            reported()
        late = time.monotonic() > deadline
        if (late or any(p.returncode for p in procs)) and not stop.exists():
            stop.write_text("stop")
        if late:
            for p in procs:
                p.kill()
        time.sleep(0.01)
    return [p.wait() for p in procs]


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _server_cpu(data_dir: Path | None) -> float:
    """CPU seconds of a PostgreSQL server so far: the postmaster, its exited backends
    (accounted to it when reaped) and its live children."""
    if data_dir is None:
        return 0.0
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid, utime, stime, cutime, cstime = int(fields[1]), *(int(x) for x in fields[11:15])
        if int(entry.name) == pid:
            total += (utime + stime + cutime + cstime) / tick
        elif ppid == pid:
            total += (utime + stime) / tick
    return total


def run_workers(
    url: str,
    workers: int,
    *,
    sessions: int = 2,
    turns: int = 200,
    tag: str = "w",
    data_dir: Path | None = None,
) -> WorkersResult:
    """Run ``workers`` processes of ``sessions`` x ``turns`` turns each on ``url``; check the log."""
    with tempfile.TemporaryDirectory(prefix="ctxengine-workers-") as tmp:
        go = Path(tmp) / "go"
        names = [[f"{tag}-{w}-s{s}" for s in range(sessions)] for w in range(workers)]
        outs = [Path(tmp) / f"worker-{w}.json" for w in range(workers)]
        env = {**_env(), "CTXENGINE_BENCH_TURNS": str(turns), "CTXENGINE_BENCH_WORKERS": str(workers)}
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "ctxengine.cli.bench_workers", url, str(outs[w]), str(go), *names[w]],
                env=env,
            )
            for w in range(workers)
        ]
        time.sleep(1.0 + 0.2 * workers)  # imports and connections, before the clock starts
        server0 = _server_cpu(data_dir)
        server1: list[float] = []
        go.write_text("go")
        # The server's CPU when the last report is written (its backends are all alive then).
        codes = _wait_all(procs, Path(tmp), lambda: server1.append(_server_cpu(data_dir)))
        if any(codes):
            raise RuntimeError(f"a worker failed: exit codes {codes}")
        server_cpu = (server1[0] if server1 else _server_cpu(data_dir)) - server0
        reports = [json.loads(out.read_text()) for out in outs]
    lost, duplicated = asyncio.run(_check(url, reports))
    turns_all = [t for r in reports for t in r["turns"]]
    steps = sum(t["steps"] for t in turns_all)
    wall = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    firsts = sorted(t["first_ms"] for t in turns_all)
    phases: dict[str, float] = {}
    for t in turns_all:
        for name, seconds in t["phases"].items():
            phases[name] = phases.get(name, 0.0) + seconds * 1e3 / max(steps, 1)
    early = [t["turn_ms"] for t in turns_all if t["window"] == "early"]
    late = [t["turn_ms"] for t in turns_all if t["window"] == "late"]
    cpu_early = [t["cpu_ms"] for t in turns_all if t["window"] == "early"]
    cpu_late = [t["cpu_ms"] for t in turns_all if t["window"] == "late"]
    cpu = sum(r["cpu_s"] for r in reports)
    return WorkersResult(
        store=url.split(":", 1)[0],
        workers=workers,
        sessions_per_worker=sessions,
        turns=turns,
        steps=steps,
        wall_s=wall,
        steps_per_s=steps / wall if wall else 0.0,
        first_p50_ms=statistics.median(firsts),
        first_p99_ms=firsts[min(len(firsts) - 1, int(0.99 * len(firsts)))],
        turn_p50_early_ms=statistics.median(early) if early else 0.0,
        turn_p50_late_ms=statistics.median(late) if late else 0.0,
        turn_cpu_early_ms=statistics.median(cpu_early) if cpu_early else 0.0,
        turn_cpu_late_ms=statistics.median(cpu_late) if cpu_late else 0.0,
        cpu_ms_per_step=(cpu + server_cpu) * 1e3 / max(steps, 1),
        server_cpu_ms_per_step=server_cpu * 1e3 / max(steps, 1),
        lost=lost,
        duplicated=duplicated,
        load=os.getloadavg(),
        phases_ms={k: round(v, 3) for k, v in phases.items()},
    )


async def _check(url: str, reports: list[dict[str, Any]]) -> tuple[int, int]:
    """(acknowledged events missing or moved, events stored more than once) over every session."""
    acked: dict[str, list[tuple[int, str]]] = {}
    turns: dict[str, set[int]] = {}
    for report in reports:
        for t in report["turns"]:
            acked.setdefault(t["session"], []).extend((int(s), str(k)) for s, k in t["acked"])
            turns.setdefault(t["session"], set()).add(int(t["turn"]))
    store = await open_store(url)
    lost = duplicated = 0
    try:
        for session, pairs in acked.items():
            events = await store.events.read(session)
            by_seq = {e.sequence: e.derivation_key for e in events}
            keys = [e.derivation_key for e in events]
            if [e.sequence for e in events] != list(range(1, len(events) + 1)):
                lost += 1  # a gap: something acknowledged may have gone
            duplicated += len(keys) - len(set(keys))
            lost += sum(1 for seq, key in pairs if by_seq.get(seq) != key)
            users = [k for k in keys if k.startswith(f"user:{session}:")]
            duplicated += len(users) - len(set(users))
            lost += len(turns[session]) - len(set(users))
    finally:
        await store.close()
    return lost, duplicated


def main(argv: list[str]) -> int:
    url, out, go, *sessions = argv
    turns = int(os.environ.get("CTXENGINE_BENCH_TURNS", "200"))
    peers = int(os.environ.get("CTXENGINE_BENCH_WORKERS", "1"))
    asyncio.run(_worker(url, out, go, sessions, turns, f"worker-{os.getpid()}", peers))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["WorkersResult", "run_workers"]
