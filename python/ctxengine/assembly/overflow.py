"""The words of a ``ContextOverflow`` raised for a body that does not fit (issue 40):
what is larger than what, and what moves it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.budget import ContextBudget, policy_knob

if TYPE_CHECKING:
    from .builder import Pressure

_WINDOW = (
    f"{policy_knob('safety_margin_ratio', 'lower')} or {policy_knob('output_reserve_tokens', 'lower')}, "
    "or use a larger window"
)

# reason -> (what does not fit, what moves it)
_CAUSES: dict[str, tuple[str, str]] = {
    "working_state_exceeds_cap": (
        "the working state is larger than its cap",
        f"keep the working state shorter or {policy_knob('working_state_tokens', 'raise')}",
    ),
    "skill_bodies_exceed_cap": (
        "the loaded skill bodies are more or larger than their cap",
        f"load fewer skills, or {policy_knob('skill_bodies_tokens', 'raise')} "
        f"or {policy_knob('skill_bodies_items', 'raise')}",
    ),
    "fixed_body_exceeds_context_window": (
        "the body's fixed part (the current turn with its tool steps, the working state and the "
        "skill bodies) is larger than the usable body, and compaction cannot shrink it",
        f"end the turn in fewer tool steps or with shorter tool results, {_WINDOW}",
    ),
    "body_exceeds_context_window": (
        "the body (its fixed part and the history summary) is larger than the usable body",
        f"compact further, {_WINDOW}",
    ),
}


# A plan whose builder clips and clears the current turn (ADR 0021): what is left of the turn.
_TURN_LEFT = (
    "the current turn is larger than the usable body even with every completed tool result of the "
    "run but the newest cleared to a pointer, its oldest tool steps elided and every item clipped to "
    "{cap} tokens: what is left (the run's user message, its newest tool result, the results of "
    "excluded tools, its assistant messages, tool calls and reasoning), with the working state and "
    "the skill bodies, does not fit",
    "end the run in fewer steps, exclude fewer tools from clearing (BudgetPolicy clearing.exclude_tools), "
    f"{policy_knob('item_max_ratio', 'lower')}, {_WINDOW}",
)


def overflow_detail(
    p: Pressure, budget: ContextBudget | None, after: str = "", *, item_cap: int | None = None
) -> str:
    """The ``detail`` of the ``ContextOverflow`` for pressure ``p`` (``after``: what was tried;
    ``item_cap``: the per-item cap of a plan that clips and clears the current turn, ADR 0021)."""
    if p.reason == "fixed_body_exceeds_context_window" and item_cap is not None:
        cause, fix = _TURN_LEFT[0].format(cap=item_cap), _TURN_LEFT[1]
    elif p.reason == "history_requires_compaction":
        cause = (
            f"the {p.history_cut} oldest history items do not fit the history budget of "
            f"{p.history_budget_tokens} tokens"
        )
        fix = (
            "compact before building"
            if p.compactable and not after
            else f"raise the history budget ({policy_knob('tool_results_ratio', 'lower')}, "
            f"or {policy_knob('working_state_tokens', 'lower')}), or use a larger window"
        )
    else:
        cause, fix = _CAUSES.get(p.reason, (f"the body does not fit ({p.reason})", _WINDOW))
    usable = (
        f"the usable body is {budget.usable_body_tokens} tokens (the window of {budget.total_tokens} "
        f"less the output reserve of {budget.reserve_output_tokens}, the prefix of {budget.prefix_tokens} "
        f"and the safety margin of {budget.body_tokens - budget.usable_body_tokens})"
        if budget is not None
        else f"the window holds {p.capacity_tokens} tokens after the output reserve"
    )
    measured = (
        f"this request measures {p.body_tokens} body tokens, {p.total_tokens} in all of the "
        f"{p.capacity_tokens} the window holds after the output reserve"
    )
    tried = f"{after}; " if after else ""
    return f"{cause}: {usable}; {measured}; {tried}{fix}"


__all__ = ["overflow_detail"]
