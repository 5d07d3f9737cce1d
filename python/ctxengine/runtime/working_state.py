"""Structured working state: transitions, caps, the control tool and carry (SPEC section 7,
seed ADR-0043 decision 8).

The only writers are the control tool ``context.update_working_state``
(``WorkingStateManager.transition``) and the runtime question lifecycle
(``add_question`` / ``resolve_question``). All three are pure; the
``ContextLoop`` appends one ``context.working_state.updated`` event per
transition and writes the checkpoint in the same transaction.

Rules, and why:

* Validation is exactly ``UPDATE_WORKING_STATE_SCHEMA`` (the tool's input
  schema), so the model is told precisely what is accepted; a bad key or
  value is a ``ModelValidationError`` naming its path.
* Entries are written with the author's trust; model-authored ones are
  ``external_untrusted`` (the default), so they render inside envelopes.
* Entry ids are content hashes (``c-``, ``f-``, ``q-`` + 10 hex digits):
  deterministic, stable across carry, and a repeated text is the same entry.
* Caps (``WorkingStateLimits``): constraints, open tasks and open questions
  never evict, a transition past their cap fails with
  ``WorkingStateLimitExceeded``; facts past their cap evict the oldest fact;
  when the rendered block is over its token cap, completed tasks and then the
  oldest facts are evicted, and if that is not enough the transition fails.
* Carry is event-derived: a new run reads the latest principal-visible state
  event strictly below its seed sequence, drops completed tasks and resets
  ``next_action``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from ..assembly.blocks import render_working_state
from ..core.estimator import Estimator, TokenEstimator
from ..errors import ModelValidationError, StoreCorruption, WorkingStateLimitExceeded
from ..model import TASK_STATUSES, Principal, StateEntry, Task, ToolSpec, TrustLevel, WorkingState
from ..stores.events import Event, Store

WORKING_STATE_UPDATED = "context.working_state.updated"
TOOL_NAME = "context.update_working_state"
UPDATE_KEYS = (
    "objective",
    "add_constraints",
    "upsert_tasks",
    "add_facts",
    "resolve_questions",
    "next_action",
)

MAX_TEXT = 1000
MAX_ID = 64
# Ids are rendered outside any envelope, so they are restricted to inert characters.
ID_PATTERN = r"^[A-Za-z0-9_.:-]+$"
# A text must hold at least one non-space character.
TEXT_PATTERN = r"\S"
_ID_RE = re.compile(ID_PATTERN)
_TEXT_RE = re.compile(TEXT_PATTERN)
_TYPE = "context.update_working_state"


@dataclass(frozen=True, slots=True)
class WorkingStateLimits:
    constraints: int = 20
    open_tasks: int = 30
    facts: int = 40
    open_questions: int = 20
    block_tokens: int = 1000


DEFAULT_LIMITS = WorkingStateLimits()


def _text_schema() -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": MAX_TEXT, "pattern": TEXT_PATTERN}


def _id_schema() -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": MAX_ID, "pattern": ID_PATTERN}


def update_schema(limits: WorkingStateLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """The JSON Schema of one update; ``WorkingStateManager.transition`` validates exactly this."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "objective": {
                "type": ["string", "null"],
                "minLength": 1,
                "maxLength": MAX_TEXT,
                "pattern": TEXT_PATTERN,
            },
            "add_constraints": {"type": "array", "maxItems": limits.constraints, "items": _text_schema()},
            "upsert_tasks": {
                "type": "array",
                "maxItems": limits.open_tasks,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["task_id", "text"],
                    "properties": {
                        "task_id": _id_schema(),
                        "text": _text_schema(),
                        "status": {"enum": list(TASK_STATUSES)},
                    },
                },
            },
            "add_facts": {"type": "array", "maxItems": limits.facts, "items": _text_schema()},
            "resolve_questions": {"type": "array", "maxItems": limits.open_questions, "items": _id_schema()},
            "next_action": {
                "type": ["string", "null"],
                "minLength": 1,
                "maxLength": MAX_TEXT,
                "pattern": TEXT_PATTERN,
            },
        },
    }


UPDATE_WORKING_STATE_SCHEMA = update_schema()

UPDATE_WORKING_STATE_TOOL = ToolSpec(
    TOOL_NAME,
    "Update your structured working state: set the objective or next action (null clears), add "
    "constraints the user gave (they are never dropped), add or update tasks by task_id, record "
    "established facts, and resolve open questions by id. Only the keys you send change.",
    UPDATE_WORKING_STATE_SCHEMA,
)


# --------------------------------------------------------------------------
# validation


def _bad(path: str, reason: str) -> ModelValidationError:
    return ModelValidationError(_TYPE, path, reason)


def _check_text(path: str, value: object, *, nullable: bool = False) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        kind = "str or null" if nullable else "str"
        raise _bad(path, f"expected {kind}, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_TEXT:
        raise _bad(path, f"length {len(value)} is outside 1..{MAX_TEXT}")
    if not _TEXT_RE.search(value):
        raise _bad(path, "must contain a non-space character")
    return value


def _check_id(path: str, value: object) -> str:
    if not isinstance(value, str):
        raise _bad(path, f"expected str, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_ID:
        raise _bad(path, f"length {len(value)} is outside 1..{MAX_ID}")
    if not _ID_RE.search(value):
        raise _bad(path, f"{value!r} does not match {ID_PATTERN}")
    return value


def _check_list(path: str, value: object, max_items: int) -> list[Any]:
    if not isinstance(value, list):
        raise _bad(path, f"expected a list, got {type(value).__name__}")
    if len(value) > max_items:
        raise _bad(path, f"{len(value)} items, at most {max_items} allowed")
    return value


@dataclass(frozen=True, slots=True)
class _Update:
    objective: tuple[bool, str | None]
    add_constraints: tuple[str, ...]
    upsert_tasks: tuple[tuple[str, str, str | None], ...]
    add_facts: tuple[str, ...]
    resolve_questions: tuple[str, ...]
    next_action: tuple[bool, str | None]


def parse_update(update: object, limits: WorkingStateLimits = DEFAULT_LIMITS) -> _Update:
    """Validate ``update`` against the tool schema; ``ModelValidationError`` names the bad path."""
    if not isinstance(update, dict):
        raise _bad("<input>", f"expected an object, got {type(update).__name__}")
    for key in update:
        if key not in UPDATE_KEYS:
            raise _bad(str(key), f"unknown key; expected some of {', '.join(UPDATE_KEYS)}")
    tasks: list[tuple[str, str, str | None]] = []
    for i, raw in enumerate(_check_list("upsert_tasks", update.get("upsert_tasks", []), limits.open_tasks)):
        path = f"upsert_tasks[{i}]"
        if not isinstance(raw, dict):
            raise _bad(path, f"expected an object, got {type(raw).__name__}")
        for key in raw:
            if key not in ("task_id", "text", "status"):
                raise _bad(f"{path}.{key}", "unknown key; expected task_id, text, status")
        for key in ("task_id", "text"):
            if key not in raw:
                raise _bad(f"{path}.{key}", "missing")
        status = raw.get("status")
        if "status" in raw and status not in TASK_STATUSES:
            raise _bad(f"{path}.status", f"expected one of {', '.join(TASK_STATUSES)}, got {status!r}")
        text = _check_text(f"{path}.text", raw["text"])
        assert text is not None
        tasks.append((_check_id(f"{path}.task_id", raw["task_id"]), text, status))
    constraints = _check_list("add_constraints", update.get("add_constraints", []), limits.constraints)
    facts = _check_list("add_facts", update.get("add_facts", []), limits.facts)
    questions = _check_list("resolve_questions", update.get("resolve_questions", []), limits.open_questions)
    return _Update(
        objective=(
            ("objective" in update),
            _check_text("objective", update.get("objective"), nullable=True),
        ),
        add_constraints=tuple(
            str(_check_text(f"add_constraints[{i}]", v)) for i, v in enumerate(constraints)
        ),
        upsert_tasks=tuple(tasks),
        add_facts=tuple(str(_check_text(f"add_facts[{i}]", v)) for i, v in enumerate(facts)),
        resolve_questions=tuple(_check_id(f"resolve_questions[{i}]", v) for i, v in enumerate(questions)),
        next_action=(
            ("next_action" in update),
            _check_text("next_action", update.get("next_action"), nullable=True),
        ),
    )


def entry_id(prefix: str, text: str) -> str:
    """A content-derived entry id: the same text is the same entry, in every run."""
    return f"{prefix}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:10]}"


# --------------------------------------------------------------------------
# transitions


class WorkingStateManager:
    """Pure working-state transitions under ``limits`` (see the module docstring).

    ``model_id`` picks the estimator profile for the block-size cap; pass the
    plan's model so the cap agrees with the builder's measurement.
    """

    def __init__(
        self,
        *,
        estimator: Estimator | None = None,
        limits: WorkingStateLimits = DEFAULT_LIMITS,
        model_id: str = "",
    ) -> None:
        if not isinstance(limits, WorkingStateLimits):
            raise ModelValidationError(
                "WorkingStateManager", "limits", f"expected WorkingStateLimits, got {limits!r}"
            )
        self.estimator: Estimator = estimator if estimator is not None else cast(Estimator, TokenEstimator())
        self.limits = limits
        self.model_id = model_id
        self.schema = update_schema(limits)
        self.tool = ToolSpec(TOOL_NAME, UPDATE_WORKING_STATE_TOOL.description, self.schema)

    def transition(
        self,
        state: WorkingState,
        update: Mapping[str, Any],
        *,
        source_trust: TrustLevel = TrustLevel.EXTERNAL_UNTRUSTED,
        model_id: str | None = None,
    ) -> WorkingState:
        """Apply one control-tool input; every entry it writes carries ``source_trust``."""
        trust = _trust(source_trust)
        parsed = parse_update(dict(update) if isinstance(update, Mapping) else update, self.limits)
        objective = parsed.objective[1] if parsed.objective[0] else state.objective
        next_action = parsed.next_action[1] if parsed.next_action[0] else state.next_action

        constraints = list(state.constraints)
        known = {e.entry_id for e in constraints}
        for text in parsed.add_constraints:
            new = StateEntry(entry_id("c", text), text, trust)
            if new.entry_id not in known:
                known.add(new.entry_id)
                constraints.append(new)
        if len(constraints) > self.limits.constraints:
            raise WorkingStateLimitExceeded(
                "constraints", self.limits.constraints, len(constraints), "constraints are never evicted"
            )

        tasks = list(state.tasks)
        index = {t.task_id: i for i, t in enumerate(tasks)}
        for task_id, text, status in parsed.upsert_tasks:
            if task_id in index:
                old = tasks[index[task_id]]
                # Rewording a task makes it the new author's; a status change alone does not.
                task_trust = old.trust if text == old.text else trust
                tasks[index[task_id]] = Task(task_id, text, status or old.status, task_trust)
            else:
                index[task_id] = len(tasks)
                tasks.append(Task(task_id, text, status or "open", trust))
        open_tasks = sum(1 for t in tasks if t.status != "completed")
        if open_tasks > self.limits.open_tasks:
            raise WorkingStateLimitExceeded("open_tasks", self.limits.open_tasks, open_tasks)

        facts = list(state.established_facts)
        known = {e.entry_id for e in facts}
        for text in parsed.add_facts:
            new = StateEntry(entry_id("f", text), text, trust)
            if new.entry_id not in known:
                known.add(new.entry_id)
                facts.append(new)
        del facts[: max(0, len(facts) - self.limits.facts)]  # the oldest facts go first

        resolved = set(parsed.resolve_questions)
        # Resolving an unknown or already resolved question is a no-op: the
        # model may resolve a question the runtime resolved a moment ago.
        questions = [q for q in state.open_questions if q.entry_id not in resolved]

        new_state = WorkingState(
            objective=objective,
            constraints=tuple(constraints),
            tasks=tuple(tasks),
            established_facts=tuple(facts),
            open_questions=tuple(questions),
            next_action=next_action,
        )
        return self._fit_block(new_state, model_id)

    def add_question(
        self,
        state: WorkingState,
        text: str,
        *,
        question_id: str | None = None,
        trust: TrustLevel = TrustLevel.EXTERNAL_UNTRUSTED,
        model_id: str | None = None,
    ) -> WorkingState:
        """Open a question (the runtime's lifecycle); an open question with the same id is kept as is."""
        checked = _check_text("question", text)
        assert checked is not None
        qid = _check_id("question_id", question_id) if question_id is not None else entry_id("q", checked)
        if any(q.entry_id == qid for q in state.open_questions):
            return state
        questions = (*state.open_questions, StateEntry(qid, checked, _trust(trust)))
        if len(questions) > self.limits.open_questions:
            raise WorkingStateLimitExceeded("open_questions", self.limits.open_questions, len(questions))
        return self._fit_block(replace(state, open_questions=questions), model_id)

    def resolve_question(self, state: WorkingState, question_id: str) -> WorkingState:
        """Close an open question; an id that is not open is a ``ModelValidationError``."""
        qid = _check_id("question_id", question_id)
        remaining = tuple(q for q in state.open_questions if q.entry_id != qid)
        if len(remaining) == len(state.open_questions):
            open_ids = [q.entry_id for q in state.open_questions]
            raise ModelValidationError(
                "WorkingState", "open_questions", f"no open question {qid!r}; open: {open_ids}"
            )
        return replace(state, open_questions=remaining)

    def block_tokens(self, state: WorkingState, model_id: str | None = None) -> int:
        """Tokens of the rendered working-state block, as the builder measures it."""
        return self.estimator.estimate([render_working_state(state)], model_id or self.model_id)

    def _fit_block(self, state: WorkingState, model_id: str | None) -> WorkingState:
        cap = self.limits.block_tokens
        tokens = self.block_tokens(state, model_id)
        while tokens > cap:
            completed = [i for i, t in enumerate(state.tasks) if t.status == "completed"]
            if completed:
                drop = completed[0]
                state = replace(state, tasks=state.tasks[:drop] + state.tasks[drop + 1 :])
            elif state.established_facts:
                state = replace(state, established_facts=state.established_facts[1:])
            else:
                raise WorkingStateLimitExceeded(
                    "block_tokens", cap, tokens, "after evicting completed tasks and facts"
                )
            tokens = self.block_tokens(state, model_id)
        return state


def _trust(value: TrustLevel | str) -> TrustLevel:
    try:
        return TrustLevel(value)
    except ValueError:
        raise ModelValidationError(_TYPE, "source_trust", f"unknown trust level {value!r}") from None


# --------------------------------------------------------------------------
# carry


def carried(state: WorkingState) -> WorkingState:
    """What a new run inherits: completed tasks dropped, ``next_action`` reset."""
    return replace(state, tasks=tuple(t for t in state.tasks if t.status != "completed"), next_action=None)


async def carry_working_state(
    store: Store, session_id: str, seed_sequence: int, principal: Principal | None
) -> WorkingState:
    """The state a run seeded at ``seed_sequence`` starts from: the latest
    ``context.working_state.updated`` event strictly below it that ``principal``
    may see, carried; an empty state when there is none."""
    event = await store.events.latest_before(session_id, seed_sequence, WORKING_STATE_UPDATED, principal)
    if event is None:
        return WorkingState()
    return carried(stored_state(event))


def stored_state(event: Event) -> WorkingState:
    """The whole state a ``context.working_state.updated`` event records; ``StoreCorruption``
    naming the session and sequence when it does not decode."""
    data = event.payload.get("state")
    if not isinstance(data, dict):
        raise StoreCorruption(event.session_id, event.sequence, "working-state event has no 'state' object")
    try:
        return WorkingState.from_dict(data)
    except ModelValidationError as exc:
        raise StoreCorruption(
            event.session_id, event.sequence, f"working state does not decode: {exc}"
        ) from None


__all__ = [
    "DEFAULT_LIMITS",
    "TOOL_NAME",
    "UPDATE_KEYS",
    "UPDATE_WORKING_STATE_SCHEMA",
    "UPDATE_WORKING_STATE_TOOL",
    "WORKING_STATE_UPDATED",
    "WorkingStateLimits",
    "WorkingStateManager",
    "carried",
    "carry_working_state",
    "stored_state",
    "entry_id",
    "parse_update",
    "update_schema",
]
