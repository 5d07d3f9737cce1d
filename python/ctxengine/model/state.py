"""Working state: the run's objective, constraints, tasks, facts and open questions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ModelValidationError
from .checks import JSON, _get, _get_list, _require, _tuple_of
from .trust import TrustLevel, _trust

TASK_STATUSES = ("open", "in_progress", "completed")


@dataclass(frozen=True, slots=True)
class StateEntry:
    """One constraint, fact or open question, with who wrote it."""

    entry_id: str
    text: str
    trust: TrustLevel = TrustLevel.EXTERNAL_UNTRUSTED

    def __post_init__(self) -> None:
        _require("StateEntry", "entry_id", self.entry_id, str)
        _require("StateEntry", "text", self.text, str)
        object.__setattr__(self, "trust", _trust("StateEntry", self.trust))

    def to_dict(self) -> dict[str, JSON]:
        return {"entry_id": self.entry_id, "text": self.text, "trust": self.trust.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StateEntry:
        n = "StateEntry"
        return cls(_get(d, n, "entry_id"), _get(d, n, "text"), _get(d, n, "trust", "external_untrusted"))


@dataclass(frozen=True, slots=True)
class Task:
    task_id: str
    text: str
    status: str = "open"
    trust: TrustLevel = TrustLevel.EXTERNAL_UNTRUSTED

    def __post_init__(self) -> None:
        _require("Task", "task_id", self.task_id, str)
        _require("Task", "text", self.text, str)
        if self.status not in TASK_STATUSES:
            raise ModelValidationError(
                "Task", "status", f"expected one of {TASK_STATUSES}, got {self.status!r}"
            )
        object.__setattr__(self, "trust", _trust("Task", self.trust))

    def to_dict(self) -> dict[str, JSON]:
        return {"task_id": self.task_id, "text": self.text, "status": self.status, "trust": self.trust.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        n = "Task"
        return cls(
            _get(d, n, "task_id"),
            _get(d, n, "text"),
            _get(d, n, "status", "open"),
            _get(d, n, "trust", "external_untrusted"),
        )


@dataclass(frozen=True, slots=True)
class WorkingState:
    """The run's structured state: rendered in Region B, never compacted away."""

    objective: str | None = None
    constraints: tuple[StateEntry, ...] = ()
    tasks: tuple[Task, ...] = ()
    established_facts: tuple[StateEntry, ...] = ()
    open_questions: tuple[StateEntry, ...] = ()
    next_action: str | None = None

    def __post_init__(self) -> None:
        n = "WorkingState"
        if self.objective is not None:
            _require(n, "objective", self.objective, str)
        if self.next_action is not None:
            _require(n, "next_action", self.next_action, str)
        object.__setattr__(self, "constraints", _tuple_of(n, "constraints", self.constraints, StateEntry))
        object.__setattr__(self, "tasks", _tuple_of(n, "tasks", self.tasks, Task))
        object.__setattr__(
            self, "established_facts", _tuple_of(n, "established_facts", self.established_facts, StateEntry)
        )
        object.__setattr__(
            self, "open_questions", _tuple_of(n, "open_questions", self.open_questions, StateEntry)
        )

    def is_empty(self) -> bool:
        return self == WorkingState()

    def to_dict(self) -> dict[str, JSON]:
        return {
            "objective": self.objective,
            "constraints": [e.to_dict() for e in self.constraints],
            "tasks": [t.to_dict() for t in self.tasks],
            "established_facts": [e.to_dict() for e in self.established_facts],
            "open_questions": [e.to_dict() for e in self.open_questions],
            "next_action": self.next_action,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkingState:
        n = "WorkingState"
        return cls(
            objective=_get(d, n, "objective", None),
            constraints=tuple(StateEntry.from_dict(e) for e in _get_list(d, n, "constraints")),
            tasks=tuple(Task.from_dict(t) for t in _get_list(d, n, "tasks")),
            established_facts=tuple(StateEntry.from_dict(e) for e in _get_list(d, n, "established_facts")),
            open_questions=tuple(StateEntry.from_dict(e) for e in _get_list(d, n, "open_questions")),
            next_action=_get(d, n, "next_action", None),
        )
