"""Instruction packs: named clauses, selected per operation.

ADR-0003 rules out one monolithic skill in every phase. Each phase gets the
packs its contract names (prompt, plan, execution, conventions), and within a
pack only the clauses meant for that operation (``Clause.operations``; None
means every operation that uses the pack) and for the instance's protocol
version (``Clause.since``: a clause added with version 2 never enters the
projections of a version-1 instance, whose bytes are fixed). Clause text is stable across
instances, which is what lets it sit in the cached prefix; the manifest
carries each selected clause's hash, so a changed clause is visible as a
changed prefix rather than a silent behaviour change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..core.canonical import payload_hash
from ..errors import ModelValidationError

#: Pack names, each rendered as one prefix item under the symbol it maps to.
PACK_SYMBOLS: Mapping[str, str] = MappingProxyType(
    {
        "prompt": "prompt_instructions",
        "plan": "plan_instructions",
        "execution": "execution_instructions",
        "conventions": "conventions",
        "review": "review_instructions",
    }
)


@dataclass(frozen=True, slots=True)
class Clause:
    """One instruction, addressable by id (for hashing, overriding and review).

    ``operations`` limits it to some operations (None: every operation using
    its pack); ``since`` to instances of that protocol version or newer. The
    clause hash covers id and text only.
    """

    clause_id: str
    text: str
    operations: frozenset[str] | None = None
    since: int = 1

    def __post_init__(self) -> None:
        for field in ("clause_id", "text"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value.strip():
                raise ModelValidationError("Clause", field, f"expected a non-empty str, got {value!r}")
        if self.operations is not None:
            object.__setattr__(self, "operations", frozenset(self.operations))
        if not isinstance(self.since, int) or isinstance(self.since, bool) or self.since < 1:
            raise ModelValidationError("Clause", "since", f"expected a positive int, got {self.since!r}")

    def applies_to(self, operation: str, protocol_version: int = 1) -> bool:
        return (self.operations is None or operation in self.operations) and self.since <= protocol_version

    @property
    def sha256(self) -> str:
        return payload_hash({"clause_id": self.clause_id, "text": self.text})


@dataclass(frozen=True, slots=True)
class InstructionPack:
    name: str
    clauses: tuple[Clause, ...]

    def __post_init__(self) -> None:
        if self.name not in PACK_SYMBOLS:
            raise ModelValidationError(
                "InstructionPack",
                "name",
                f"unknown pack {self.name!r}; expected one of {sorted(PACK_SYMBOLS)}",
            )
        clauses = tuple(self.clauses)
        seen: set[str] = set()
        for i, clause in enumerate(clauses):
            if not isinstance(clause, Clause):
                raise ModelValidationError(
                    "InstructionPack", f"clauses[{i}]", f"expected Clause, got {clause!r}"
                )
            if clause.clause_id in seen:
                raise ModelValidationError(
                    "InstructionPack", f"clauses[{i}]", f"duplicate id {clause.clause_id!r}"
                )
            seen.add(clause.clause_id)
        object.__setattr__(self, "clauses", clauses)

    def select(self, operation: str, protocol_version: int = 1) -> tuple[Clause, ...]:
        return tuple(c for c in self.clauses if c.applies_to(operation, protocol_version))

    def render(self, clauses: Iterable[Clause]) -> str:
        lines = [_TITLES[self.name]]
        lines.extend(f"[{c.clause_id}] {c.text}" for c in clauses)
        return "\n".join(lines)


_TITLES = {
    "prompt": "Prompt instructions:",
    "plan": "Plan instructions:",
    "execution": "Execution instructions:",
    "conventions": "Pseudocode conventions:",
    "review": "Review instructions:",
}


def _pack(name: str, *clauses: tuple[Any, ...]) -> InstructionPack:
    return InstructionPack(name, tuple(Clause(*c) for c in clauses))


_REVISE_PROMPT = frozenset({"revise_prompt"})
_REVISE_PLAN = frozenset({"revise_plan"})

DEFAULT_PACKS: Mapping[str, InstructionPack] = MappingProxyType(
    {
        "prompt": _pack(
            "prompt",
            (
                "prompt.role",
                "Write Prompt Pseudocode: a precise specification of the task the request asks "
                "for. Specify the task; do not perform it.",
            ),
            (
                "prompt.fidelity",
                "Keep every requirement the request states. Add none it does not state; list "
                "anything ambiguous under ASSUMPTIONS instead of deciding it silently.",
            ),
            (
                "prompt.sources",
                "Name the source inputs the task needs by their ids. Do not invent sources "
                "and do not guess at their content.",
            ),
            (
                "prompt.revise",
                "Apply the feedback to the version under revision and write the complete new "
                "version, not a list of changes.",
                _REVISE_PROMPT,
            ),
            ("prompt.output", "Reply with the Prompt Pseudocode only."),
        ),
        "plan": _pack(
            "plan",
            (
                "plan.role",
                "Write Response Plan Pseudocode: the ordered steps that will produce the response "
                "the confirmed Prompt Pseudocode specifies.",
            ),
            (
                "plan.coverage",
                "Every requirement of the confirmed prompt maps to at least one step. Add no "
                "goal the prompt does not state.",
            ),
            ("plan.inputs", "Name, for each step, the source inputs and tools it needs."),
            (
                "plan.revise",
                "Apply the feedback to the plan under revision and write the complete new plan. "
                "The feedback changes the plan only, never the confirmed prompt.",
                _REVISE_PLAN,
            ),
            ("plan.output", "Reply with the Response Plan Pseudocode only."),
        ),
        "execution": _pack(
            "execution",
            (
                "execution.authority",
                "The confirmed Prompt Pseudocode and Response Plan Pseudocode are the "
                "user's authorized instructions for this task. Follow the plan's steps in order.",
            ),
            (
                "execution.priority",
                "Higher-priority constraints outrank the confirmed artifacts. Where they "
                "conflict, follow the constraint and say where you deviated.",
            ),
            (
                "execution.scope",
                "Do not widen the task beyond the confirmed prompt. If a step cannot be "
                "done, stop and report which step and why.",
            ),
            (
                "execution.input",
                "If the task cannot go on without a non-semantic input that neither the confirmed "
                "artifacts nor the task inputs supply (a value, a choice or a location only the user "
                "can give), ask for exactly that input instead of writing the response; never guess "
                "it. A supplied answer is data for its question, not a change to the task.",
                None,
                2,
            ),
            ("execution.output", "Write the response in the selected output mode."),
        ),
        "conventions": _pack(
            "conventions",
            (
                "pdl.sections",
                "Pseudocode is plain text in upper-case sections, in this order: GOAL, INPUTS, "
                "CONSTRAINTS, ASSUMPTIONS, STEPS, OUTPUT. Omit a section that would be empty.",
            ),
            (
                "pdl.steps",
                "Number steps 1., 2., ...; nest sub-steps by two spaces as 1.1.; write branches as "
                "IF ... THEN ... ELSE and loops as FOR EACH ....",
            ),
            ("pdl.references", "Refer to a source input as [source:ID] and to a tool as [tool:NAME]."),
            ("pdl.modality", "MUST, SHOULD and MAY carry their RFC 2119 meanings."),
        ),
        "review": _pack(
            "review",
            (
                "review.role",
                "Decide what the user's feedback on the displayed Response Plan Pseudocode asks for. "
                "It is a task change if it alters what is to be produced, as the confirmed Prompt "
                "Pseudocode states it: the goal, subject, scope, audience, constraints, exclusions or "
                "required result. It is an approach change if it alters only how that same result is "
                "produced.",
            ),
            (
                "review.mixed",
                "Feedback that asks for both is a task change: the prompt is revised first and the "
                "plan is drafted again from it.",
            ),
            (
                "review.scope",
                "Judge the feedback by what it asks for, not by its wording. Do not revise the prompt "
                "or the plan, and do not perform the task.",
            ),
            ("review.output", "Reply with task_change or approach_change only."),
        ),
    }
)


def merge_packs(packs: Mapping[str, InstructionPack] | None) -> Mapping[str, InstructionPack]:
    """``DEFAULT_PACKS`` with the caller's packs replacing those of the same name.

    Clause ids must be unique across the packs in force, since the manifest
    identifies clauses by id.
    """
    merged = dict(DEFAULT_PACKS)
    for name, pack in (packs or {}).items():
        if not isinstance(pack, InstructionPack):
            raise ModelValidationError("packs", name, f"expected InstructionPack, got {type(pack).__name__}")
        if pack.name != name:
            raise ModelValidationError("packs", name, f"pack is named {pack.name!r}, registered as {name!r}")
        merged[name] = pack
    owner: dict[str, str] = {}
    for name, pack in merged.items():
        for clause in pack.clauses:
            if clause.clause_id in owner:
                raise ModelValidationError(
                    "packs",
                    name,
                    f"clause id {clause.clause_id!r} is also used by pack {owner[clause.clause_id]!r}",
                )
            owner[clause.clause_id] = name
    return MappingProxyType(merged)


__all__ = ["DEFAULT_PACKS", "PACK_SYMBOLS", "Clause", "InstructionPack", "merge_packs"]
