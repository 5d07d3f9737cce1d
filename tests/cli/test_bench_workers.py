"""Issue 13, acceptance 5: the many-workers harness (a small run on SQLite, and the load a
finished worker keeps up until every worker has finished)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ctxengine.cli import bench_workers
from ctxengine.cli.bench_workers import REPORTS, STOP, run_workers


class _Turns:
    """A worker whose turns are counted; at turn ``report_at`` the last peer reports."""

    def __init__(self, folder: Path, report_at: int | None) -> None:
        self.folder, self.report_at, self.taken = folder, report_at, 0

    async def turn(self, session: str, turn: int) -> Any:
        self.taken += 1
        assert session == "s-load" and turn == self.taken
        if turn == self.report_at:
            (self.folder / "worker-1.json").write_text("{}")
        return None


def _keep(folder: Path, worker: _Turns, peers: int, most: int = 50) -> None:
    asyncio.run(bench_workers._keep_load(worker, folder, "s-load", peers, most))  # type: ignore[arg-type]


def test_a_finished_worker_keeps_the_load_until_every_worker_has_reported(tmp_path: Path) -> None:
    (tmp_path / "worker-0.json").write_text("{}")
    (tmp_path / "worker-1.part").write_text("{")  # a report being written is not one yet
    worker = _Turns(tmp_path, report_at=7)
    _keep(tmp_path, worker, peers=2)
    assert worker.taken == 7 and len(list(tmp_path.glob(REPORTS))) == 2

    alone = _Turns(tmp_path, report_at=None)
    _keep(tmp_path, alone, peers=2)  # everyone has reported: no turn at all
    assert alone.taken == 0


def test_the_load_stops_when_told_or_at_its_bound(tmp_path: Path) -> None:
    (tmp_path / "worker-0.json").write_text("{}")
    bounded = _Turns(tmp_path, report_at=None)
    _keep(tmp_path, bounded, peers=3, most=5)
    assert bounded.taken == 5

    (tmp_path / STOP).write_text("stop")
    stopped = _Turns(tmp_path, report_at=None)
    _keep(tmp_path, stopped, peers=3)
    assert stopped.taken == 0


def test_two_workers_on_sqlite_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'workers.db'}"
    result = run_workers(url, 2, sessions=1, turns=4, tag="t")
    assert (result.workers, result.turns, result.lost, result.duplicated) == (2, 4, 0, 0)
    assert result.steps >= 2 * 4 and result.steps_per_s > 0
    assert result.first_p50_ms > 0 and result.turn_p50_late_ms > 0
