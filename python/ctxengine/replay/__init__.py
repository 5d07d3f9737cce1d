"""Replay of recorded sessions (issue 42): ``verify`` checks that every recorded request
rebuilds to its recorded hashes (ADR 0024)."""

from __future__ import annotations

from .verify import RequestCheck, RequestInputs, SessionCheck, rebuild, verify_session

__all__ = ["RequestCheck", "RequestInputs", "SessionCheck", "rebuild", "verify_session"]
