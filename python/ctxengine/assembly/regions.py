"""The one region-assignment table, in the fixed, total assembly order.

Region A is the plan's frozen prefix; Region B is the per-request body. If a
value can differ between two requests in one session, its class is in B.
A class missing here fails assembly (``UndeclaredRegionClass``).
"""

from __future__ import annotations

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
    # Region B: the body, in this order.
    "compacted_summary": "B",
    "history": "B",
    "skill_bodies": "B",
    "working_state": "B",
    "knowledge": "B",
    "recall": "B",
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
    "phase.task_inputs": "B",
    "phase.output_mode": "B",
}

ORDER: dict[str, int] = {name: i for i, name in enumerate(REGION_TABLE)}


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


__all__ = ["ORDER", "REGION_TABLE", "UndeclaredRegionClass", "order_of", "region_of"]
