"""The demo's arguments: what a run needs (``DemoConfig``) and what it can run with
(``check_config``), checked before anything runs so that ``ctxengine demo`` answers a
window too small for its budget policy with a usage error, not with broken invariants.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.budget import BudgetPolicy, allocate
from ..errors import ContextOverflow, ModelValidationError
from ..model import ResolvedModel
from ..stores.events import MAX_ID_BYTES, check_identifier

DEFAULT_TURNS = 50
#: Small enough that the history outgrows it again and again within fifty turns.
DEFAULT_WINDOW = 32_000


def demo_model(context_window: int = DEFAULT_WINDOW) -> ResolvedModel:
    return ResolvedModel("scripted", f"fake-{context_window // 1000}k", context_window, 4_096, 4_096)


@dataclass(frozen=True, slots=True)
class DemoConfig:
    turns: int = DEFAULT_TURNS
    #: ``None``: a fresh SQLite file in a temporary directory (kept, so it can be inspected).
    store_url: str | None = None
    backend: str | None = None
    session_id: str | None = None
    context_window: int = DEFAULT_WINDOW
    #: ``extractive`` (the default compactor) or ``scripted`` (a ``ModelCompactor`` on the
    #: scripted summarizer, ``fakemodel.ScriptedSummarizer``; ADR 0026).
    summarizer: str = "extractive"


#: What ``--summarizer`` takes.
SUMMARIZERS = ("extractive", "scripted")


def minimum_window(policy: BudgetPolicy | None = None) -> int:
    """The smallest context window the demo runs in: after the output reserve and a prefix at
    the policy's ceiling (whatever the prefix measures), the history budget must reach its
    floor. Found with the budget arithmetic itself (``allocate``), so it cannot drift."""
    policy = policy or BudgetPolicy()

    def fits(window: int) -> bool:
        try:
            allocate(demo_model(window), policy.prefix_ceiling_tokens, policy)
        except ContextOverflow:
            return False
        return True

    low, high = 1, 1 << 40  # the history budget only grows with the window
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle) else (middle + 1, high)
    return low


def demo_run_id(session_id: str, turn: int) -> str:
    return f"{session_id}-run-{turn:03d}"


def check_config(config: DemoConfig) -> None:
    """``ModelValidationError`` naming the ``DemoConfig`` field that cannot run, before anything
    runs: at least one turn, a window of at least ``minimum_window()``, a session id whose run
    ids are storable identifiers."""
    turns = config.turns
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise ModelValidationError("DemoConfig", "turns", f"must be an integer of at least 1, got {turns!r}")
    window = config.context_window
    minimum = minimum_window()
    if isinstance(window, bool) or not isinstance(window, int) or window < minimum:
        raise ModelValidationError(
            "DemoConfig",
            "context_window",
            f"{window!r} tokens is below the minimum of {minimum} for the demo's budget policy "
            "(output reserve + prefix ceiling + history floor)",
        )
    if config.summarizer not in SUMMARIZERS:
        raise ModelValidationError(
            "DemoConfig", "summarizer", f"expected one of {', '.join(SUMMARIZERS)}, got {config.summarizer!r}"
        )
    if config.session_id is not None:
        check_identifier("DemoConfig", "session_id", config.session_id)
        longest = len(demo_run_id(config.session_id, turns).encode("utf-8"))
        if longest > MAX_ID_BYTES:
            raise ModelValidationError(
                "DemoConfig",
                "session_id",
                f"is too long: its run ids ({demo_run_id('…', turns)}) would be {longest} bytes; "
                f"the limit is {MAX_ID_BYTES}",
            )


__all__ = [
    "DEFAULT_TURNS",
    "DEFAULT_WINDOW",
    "SUMMARIZERS",
    "DemoConfig",
    "check_config",
    "demo_model",
    "demo_run_id",
    "minimum_window",
]
