"""Tooling around the engine: the ``ctxengine`` command (``main``), the fifty-turn demo and
its scripted model, session inspection, the synthetic sessions and the benchmark harness.

The engine never imports this package; it imports the engine.
"""

from __future__ import annotations

from .main import EXIT_INVARIANT, EXIT_OK, EXIT_USAGE, build_parser, main

__all__ = ["EXIT_INVARIANT", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]
