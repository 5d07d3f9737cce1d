"""The one region-assignment table, in the fixed, total assembly order.

Region A is the plan's frozen prefix; Region B is the per-request body. If a
value can differ between two requests in one session, its class is in B.
A class missing here fails assembly (``UndeclaredRegionClass``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UndeclaredRegionClass

REGION_TABLE: dict[str, str] = {
    # Region A: pinned in the plan, cached by the provider.
    "platform_policy": "A",
    "agent_instructions": "A",
    "tool_definitions": "A",
    "skill_catalog": "A",
    "memory_snapshot": "A",
    # Phase projections (ctxengine.phases): stable framing and instruction
    # packs, identical for every instance of an operation.
    "phase.framing": "A",
    "phase.operation": "A",
    "phase.prompt_instructions": "A",
    "phase.plan_instructions": "A",
    "phase.execution_instructions": "A",
    "phase.conventions": "A",
    "phase.review_instructions": "A",
    # Region B: the body, in this order.
    "compacted_summary": "B",
    "history": "B",
    "skill_bodies": "B",
    "working_state": "B",
    "knowledge": "B",
    "recall": "B",
    "notes": "B",
    "memory_corrections": "B",
    "runtime_metadata": "B",
    "current_user": "B",
    "current_turn": "B",
    # Phase projections: per-instance data, in projection order.
    "phase.constraints": "B",
    "phase.source_references": "B",
    "phase.request": "B",
    "phase.confirmed_prompt": "B",
    "phase.prompt_draft": "B",
    "phase.prompt_feedback": "B",
    "phase.confirmed_plan": "B",
    "phase.plan_draft": "B",
    "phase.plan_feedback": "B",
    "phase.review_feedback": "B",
    "phase.task_inputs": "B",
    "phase.execution_input": "B",
    "phase.output_mode": "B",
}

ORDER: dict[str, int] = {name: i for i, name in enumerate(REGION_TABLE)}


@dataclass(frozen=True, slots=True)
class BodyClass:
    """How one class of the turn body enters the fit: its block kind
    (``ctxengine.model.body.BLOCK_KINDS``) and where its caps come from
    (``"policy.<field>"`` of the planner's ``BudgetPolicy``, or
    ``"budget.<field>"`` of the plan's ``ContextBudget``)."""

    kind: str
    max_items: str | None = None
    max_tokens: str | None = None


# The builder's Region B, in body order: every class is rendered (``blocks``)
# into one block of this kind, which both backends fit as the kind says.
BODY_CLASSES: dict[str, BodyClass] = {
    "compacted_summary": BodyClass("summary"),
    "history": BodyClass("history"),
    "skill_bodies": BodyClass("skills", "policy.skill_bodies_items", "budget.skill_body_tokens"),
    "working_state": BodyClass("working_state", None, "budget.working_state_tokens"),
    "knowledge": BodyClass("passages", "policy.knowledge_items", "budget.knowledge_tokens"),
    "recall": BodyClass("lines", None, "budget.retrieved_context_tokens"),
    "notes": BodyClass("lines", None, "policy.notes_tokens"),
    "memory_corrections": BodyClass("fixed"),
    "runtime_metadata": BodyClass("fixed"),
    "current_user": BodyClass("turn"),
    "current_turn": BodyClass("turn"),
}


#: The classes that change from one step of a run to the next (model-authored notes, the
#: working state, the runtime metadata). A plan of builder version 3 renders them last,
#: after the current turn, so that one update does not change the request's bytes in front
#: of the run's growing tool history (ADR 0027); older plans keep the table's order.
TAIL_CLASSES: tuple[str, ...] = ("notes", "working_state", "runtime_metadata")


def body_order(tail_last: bool) -> tuple[str, ...]:
    """The body's classes in the order a plan renders them: the table's, or with
    ``TAIL_CLASSES`` moved after the current turn (``tail_last``, builder version 3)."""
    if not tail_last:
        return tuple(BODY_CLASSES)
    return (*(c for c in BODY_CLASSES if c not in TAIL_CLASSES), *TAIL_CLASSES)


def region_of(region_class: str) -> str:
    try:
        return REGION_TABLE[region_class]
    except KeyError:
        raise UndeclaredRegionClass(
            f"item class {region_class!r} has no declared region; add it to REGION_TABLE"
        ) from None


def order_of(region_class: str) -> int:
    region_of(region_class)
    return ORDER[region_class]


assert [order_of(c) for c in BODY_CLASSES] == sorted(order_of(c) for c in BODY_CLASSES)

__all__ = [
    "BODY_CLASSES",
    "ORDER",
    "TAIL_CLASSES",
    "REGION_TABLE",
    "BodyClass",
    "UndeclaredRegionClass",
    "body_order",
    "order_of",
    "region_of",
]
