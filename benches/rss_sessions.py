"""A worker's resident memory over many sessions, and the trim drop-in's over dropped ones (issue 37).

``python benches/rss_sessions.py`` runs both parts and prints RSS (MB) every 500 sessions:

- ``worker``: one ``ScriptedWorker`` on a SQLite file takes ``--turns`` turns (a tool round trip
  on every second) of each of ``--sessions`` new sessions, one session after the other, as a
  worker serving many users does. Its caches fill and then must hold: the curve flattens.
- ``trim``: ``--trim-sessions`` sessions of 20 messages of 16 KB each go through
  ``ctxengine.integrations.langchain.trim_messages`` (``count_tokens_approximately``) and are
  dropped. Its memo must not keep them alive. ``--langchain`` runs LangChain's own
  ``trim_messages`` instead, for comparison.

``--part worker`` or ``--part trim`` runs one part. Each part runs in a fresh process (the
other part's memory does not count). Not a pytest bench: it measures memory, not time.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EVERY = 500


def rss_mb() -> float:
    """This process's resident set, in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover - not Linux


def report(label: str, done: int, started: float) -> None:
    print(
        f"{label} {done:>6} sessions  rss {rss_mb():7.1f} MB  {time.perf_counter() - started:6.1f} s",
        flush=True,
    )


async def worker_part(sessions: int, turns: int) -> None:
    from ctxengine.cli.turns import ScriptedWorker
    from ctxengine.stores import open_store

    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(f"sqlite:///{Path(folder) / 'rss.db'}")
        try:
            worker = ScriptedWorker(store, tool_every=2)
            started = time.perf_counter()
            report("worker", 0, started)
            for i in range(1, sessions + 1):
                for turn in range(1, turns + 1):
                    await worker.turn(f"session-{i}", turn)
                if i % EVERY == 0:
                    report("worker", i, started)
        finally:
            await store.close()


def trim_part(sessions: int, langchain: bool) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_core.messages import trim_messages as lc_trim
    from langchain_core.messages.utils import count_tokens_approximately

    from ctxengine.integrations.langchain import trim_messages

    trim = lc_trim if langchain else trim_messages
    label = "trim-langchain" if langchain else "trim"
    started = time.perf_counter()
    report(label, 0, started)
    for i in range(1, sessions + 1):
        messages = [SystemMessage(f"session {i} " + "s" * 16_000)]
        for k in range(19):
            cls = HumanMessage if k % 2 == 0 else AIMessage
            messages.append(cls(f"{i}:{k} " + "x" * 16_000))
        kept = trim(
            messages, max_tokens=40_000, token_counter=count_tokens_approximately, include_system=True
        )
        assert kept
        del messages, kept  # the session is over: nothing of it is used again
        if i % EVERY == 0:
            gc.collect()
            report(label, i, started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part", choices=["worker", "trim", "all"], default="all")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--trim-sessions", type=int, default=4_000)
    parser.add_argument("--langchain", action="store_true", help="LangChain's own trim_messages")
    parser.add_argument("--backend", choices=["rust", "python"], default=None)
    args = parser.parse_args(argv)
    if args.part == "all":  # each part in a process of its own
        given = argv if argv is not None else sys.argv[1:]
        for part in ("trim", "worker"):
            subprocess.run([sys.executable, __file__, *given, "--part", part], check=True)
        return
    if args.backend is not None:
        import ctxengine

        ctxengine.use_backend(args.backend)
    if args.part == "worker":
        asyncio.run(worker_part(args.sessions, args.turns))
    else:
        trim_part(args.trim_sessions, args.langchain)


if __name__ == "__main__":
    main()
