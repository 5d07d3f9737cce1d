"""What the phase-projection tests expect, written out independently of the code, and a log probe."""

from __future__ import annotations

from ctxengine.phases import CONTRACTS, OPERATIONS
from ctxengine.stores import MemoryStore

STAGE_OF = {op: CONTRACTS[op].stage for op in OPERATIONS}
ANY_SHA = "a" * 64
BASE = {"framing", "operation", "constraints"}
# The contract table of SPEC section 8, written out independently of CONTRACTS.
EXPECTED_SYMBOLS = {
    "draft_prompt": BASE | {"request", "source_references", "prompt_instructions", "conventions"},
    "revise_prompt": BASE
    | {
        "request",
        "source_references",
        "prompt_instructions",
        "conventions",
        "prompt_draft",
        "prompt_feedback",
    },
    "draft_plan": BASE | {"confirmed_prompt", "plan_instructions", "conventions"},
    "revise_plan": BASE
    | {"confirmed_prompt", "plan_draft", "plan_feedback", "plan_instructions", "conventions"},
    "execute": BASE
    | {"confirmed_prompt", "confirmed_plan", "task_inputs", "output_mode", "tools", "execution_instructions"},
    # The feedback, the confirmed prompt and the displayed plan; nothing else (issue 16).
    "interpret_review": BASE | {"confirmed_prompt", "plan_draft", "review_feedback", "review_instructions"},
}


async def event_count(store: MemoryStore, instance_id: str = "task-1") -> int:
    return len(await store.events.read(instance_id))
