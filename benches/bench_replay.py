"""Replay speed (issue 42, acceptance 4): sessions of 100 turns (a tool round trip every
third turn), each compacting, replayed from a SQLite store under three ctxengine
configurations (``replay_workload.configs``; baselines excluded), the JSON-lines report
written: requests per second of wall time, reading the store and writing the report
included.

As a smoke test (``make test``, ``--benchmark-disable``) it replays 20 sessions. The
acceptance run, a thousand sessions (the store is written once, into ``tmp/cache/``)::

    CTXENGINE_REPLAY_SESSIONS=1000 python3 -m pytest benches/bench_replay.py \\
        --benchmark-enable --benchmark-only -s
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ctxengine.replay import ReplayOptions, replay_store_to
from replay_workload import configs, workload

SESSIONS = int(os.environ.get("CTXENGINE_REPLAY_SESSIONS", "20"))
WORKERS = int(os.environ.get("CTXENGINE_REPLAY_WORKERS", "1"))


def bench_replay_sessions_under_three_configurations(benchmark: Any, tmp_path: Path) -> None:
    url, ids = workload(SESSIONS, 100)
    options = ReplayOptions(configs(), baselines=False)
    out = tmp_path / "replay.jsonl"
    seconds: list[float] = []

    def run() -> Any:
        started = time.perf_counter()
        streamed = replay_store_to(out, url, ids, options, workers=WORKERS)
        seconds.append(time.perf_counter() - started)
        return streamed

    streamed = benchmark.pedantic(run, rounds=1, iterations=1)
    requests = sum(s["requests"] for s in streamed.summaries)
    assert requests == SESSIONS * 133 * 3
    for s in streamed.summaries:
        assert s["compactions"] >= SESSIONS, s["config"]
        assert s["fits"] == s["requests"], s["config"]
    rate = requests / seconds[-1]
    benchmark.extra_info["sessions"] = SESSIONS
    benchmark.extra_info["requests"] = requests
    benchmark.extra_info["requests_per_second"] = round(rate)
    took = f"{seconds[-1]:.1f} s with {WORKERS} worker(s)"
    print(f"\nreplay: {requests:,} requests in {took}: {rate:,.0f} requests/s")
