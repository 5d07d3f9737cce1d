"""Replay recorded sessions under other configurations and compare (issue 42, ADR 0025).

``replay_store(url, session_ids, options)`` and ``replay_transcripts(paths, options)``
rebuild every model request of each session as it was recorded (the same user messages,
tool results and model responses; a request before each model response) under each named
``ReplayConfig`` of ``ReplayOptions`` and the baselines, and return the report rows
(``docs/replay.md`` has their schema); ``replay_store_to`` streams them to a JSON-lines
file with worker processes; ``report.markdown`` and ``report.plots`` make the table and
the plots. ``verify_session`` rebuilds every recorded request of a session to its recorded
hashes and names the first region that differs (ADR 0024).
"""

from __future__ import annotations

from .api import METHODS, Outcome, Replayer, ReplayOptions
from .config import COUNTING, Compaction, ReplayConfig, config_from_dict, configs_from_dict, load_configs
from .report import REGIONS, markdown, plots
from .run import Streamed, replay_sessions, replay_store, replay_store_to, replay_transcripts
from .sources import FORMATS, Issue, ReplaySession, load_transcript, read_sessions
from .verify import RequestCheck, RequestInputs, SessionCheck, rebuild, verify_session

__all__ = [
    "COUNTING",
    "FORMATS",
    "METHODS",
    "REGIONS",
    "Compaction",
    "Issue",
    "Outcome",
    "ReplayConfig",
    "ReplayOptions",
    "ReplaySession",
    "Replayer",
    "RequestCheck",
    "RequestInputs",
    "SessionCheck",
    "Streamed",
    "config_from_dict",
    "configs_from_dict",
    "load_configs",
    "load_transcript",
    "markdown",
    "plots",
    "read_sessions",
    "rebuild",
    "replay_sessions",
    "replay_store",
    "replay_store_to",
    "replay_transcripts",
    "verify_session",
]
