"""Issue 13, acceptance 5: the many-workers harness (a small run on SQLite, and the load a
finished worker keeps up until every worker has finished)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ctxengine.cli import bench_workers
from ctxengine.cli.bench_workers import EARLY, REPORTS, STOP, WINDOW, run_workers, schedule


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
    url = f"sqlite:///{tmp_path / 'workers.db'}"
    result = run_workers(url, 2, sessions=1, turns=4, tag="t")
    assert (result.workers, result.turns, result.lost, result.duplicated) == (2, 4, 0, 0)
    assert result.steps >= 2 * 4 and result.steps_per_s > 0
    assert result.first_p50_ms > 0 and result.turn_p50_late_ms > 0


def _in_order(order: list[tuple[str, int, str | None]], sessions: list[str], turns: int) -> None:
    for session in sessions:  # every turn once, in order, per session
        assert [t for s, t, _ in order if s == session] == list(range(1, turns + 1))
    assert len(order) == len(sessions) * turns


def test_the_schedule_runs_an_old_sessions_last_turns_beside_a_young_ones_early_turns() -> None:
    for sessions in (["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d"]):
        order = schedule(sessions, 200)
        _in_order(order, sessions, 200)
        late = [(s, t) for s, t, w in order if w == "late"]
        early = [(s, t) for s, t, w in order if w == "early"]
        pairs = len(sessions) // 2
        assert sorted(late) == [(s, t) for s in sessions[0::2][:pairs] for t in range(181, 201)]
        assert sorted(early) == [(s, t) for s in sessions[1::2] for t in range(EARLY, EARLY + WINDOW)]
        # Side by side: from the first compared turn to the last, nothing else but the odd one out.
        at = [i for i, (_, _, w) in enumerate(order) if w]
        between = order[at[0] : at[-1] + 1]
        assert all(w or (s == sessions[-1] and len(sessions) % 2) for s, _, w in between)
        assert len(between) >= 2 * WINDOW * pairs
        marks = [w for _, _, w in order if w]
        assert marks[:2] == ["late", "early"] and marks[2 * pairs : 2 * pairs + 2] == ["early", "late"]


def test_without_a_pair_or_enough_turns_sessions_keep_step() -> None:
    for sessions, turns in ((["a"], 200), (["a", "b"], 4), (["a", "b"], 50)):
        order = schedule(sessions, turns)
        _in_order(order, sessions, turns)
        assert [(s, t) for s, t, _ in order] == [(s, t) for t in range(1, turns + 1) for s in sessions]
        assert {t for _, t, w in order if w == "early"} == set(
            range(EARLY, min(turns, EARLY + WINDOW - 1) + 1)
        )
        assert {t for _, t, w in order if w == "late"} == set(range(max(1, turns - WINDOW + 1), turns + 1))
