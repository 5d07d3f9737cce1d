"""Operation contracts: the positive inclusion list of every phase projection (SPEC section 8).

A *symbol* names one thing a projection may carry. Each rendered item of a
projection has the region class ``phase.<symbol>`` (declared in
``regions.REGION_TABLE``), and ``tools`` stands for ``ModelRequest.tools``,
so the symbol set of a compiled request can be read off the request itself.

Every contract splits all symbols into include (always present), optional
(present exactly when the state holds data for it, e.g. source references
only when there are sources) and exclude. The compiler builds each projection
from its own per-operation code and then checks the result against the
contract, so the two descriptions guard each other: a block added to or
dropped from an operation's builder without the contract agreeing is a
``ProjectionContractError``, not a quietly different context.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import ProjectionContractError
from .state import ProtocolState, Stage

PREFIX_SYMBOLS: tuple[str, ...] = (
    "framing",
    "operation",
    "prompt_instructions",
    "plan_instructions",
    "execution_instructions",
    "conventions",
    "review_instructions",
)
BODY_SYMBOLS: tuple[str, ...] = (
    "constraints",
    "source_references",
    "request",
    "confirmed_prompt",
    "prompt_draft",
    "prompt_feedback",
    "confirmed_plan",
    "plan_draft",
    "plan_feedback",
    "review_feedback",
    "task_inputs",
    "execution_input",
    "output_mode",
)
TOOLS_SYMBOL = "tools"
SYMBOLS: frozenset[str] = frozenset((*PREFIX_SYMBOLS, *BODY_SYMBOLS, TOOLS_SYMBOL))

#: What every projection carries, whatever the operation (SPEC section 8).
MANDATORY: frozenset[str] = frozenset({"framing", "operation", "constraints"})

REGION_PREFIX = "phase."


def region_class(symbol: str) -> str:
    return REGION_PREFIX + symbol


def symbol_of(region_class: str) -> str:
    if not region_class.startswith(REGION_PREFIX):
        raise ProjectionContractError(
            f"item of region class {region_class!r} is not a phase projection symbol"
        )
    return region_class[len(REGION_PREFIX) :]


@dataclass(frozen=True, slots=True)
class OperationContract:
    """What one operation's projection includes, may include, and must not include."""

    operation: str
    stage: Stage
    task: str
    include: frozenset[str]
    optional: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for field in ("include", "optional", "exclude"):
            object.__setattr__(self, field, frozenset(getattr(self, field)))
        where = f"contract {self.operation!r}"
        listed = [*self.include, *self.optional, *self.exclude]
        unknown = sorted(set(listed) - SYMBOLS)
        if unknown:
            raise ProjectionContractError(f"{where}: unknown symbol(s) {unknown}")
        twice = sorted(s for s, n in Counter(listed).items() if n > 1)
        if twice:
            raise ProjectionContractError(
                f"{where}: symbol(s) {twice} are in more than one of include/optional/exclude"
            )
        unlisted = sorted(SYMBOLS - set(listed))
        if unlisted:
            raise ProjectionContractError(
                f"{where}: symbol(s) {unlisted} are neither included, optional nor excluded"
            )
        absent = sorted(MANDATORY - self.include)
        if absent:
            raise ProjectionContractError(f"{where}: every operation must include {absent}")

    def expected(self, available: frozenset[str]) -> frozenset[str]:
        """The exact symbol set for a state whose optional data is ``available``."""
        return self.include | (self.optional & available)


def _contract(
    operation: str, stage: Stage, task: str, include: Iterable[str], optional: Iterable[str] = ()
) -> OperationContract:
    inc, opt = frozenset(include) | MANDATORY, frozenset(optional)
    return OperationContract(operation, stage, task, inc, opt, SYMBOLS - inc - opt)


_PROMPT_BASE = ("request", "prompt_instructions", "conventions")

CONTRACTS: Mapping[str, OperationContract] = MappingProxyType(
    {
        "draft_prompt": _contract(
            "draft_prompt",
            "prompt_drafting",
            "Draft the Prompt Pseudocode for the current request.",
            _PROMPT_BASE,
            ("source_references",),
        ),
        "revise_prompt": _contract(
            "revise_prompt",
            "prompt_revising",
            "Revise the Prompt Pseudocode under revision so that it answers the feedback.",
            (*_PROMPT_BASE, "prompt_draft", "prompt_feedback"),
            ("source_references",),
        ),
        "draft_plan": _contract(
            "draft_plan",
            "plan_drafting",
            "Draft the Response Plan Pseudocode for the confirmed Prompt Pseudocode.",
            ("confirmed_prompt", "plan_instructions", "conventions"),
        ),
        "revise_plan": _contract(
            "revise_plan",
            "plan_revising",
            "Revise the Response Plan Pseudocode under revision so that it answers the feedback.",
            ("confirmed_prompt", "plan_draft", "plan_feedback", "plan_instructions", "conventions"),
        ),
        "execute": _contract(
            "execute",
            "executing",
            "Carry out the task: follow the confirmed plan to produce the response the confirmed prompt "
            "specifies.",
            ("confirmed_prompt", "confirmed_plan", "execution_instructions", "output_mode"),
            ("task_inputs", "tools", "conventions", "execution_input"),
        ),
        "interpret_review": _contract(
            "interpret_review",
            "review_interpreting",
            "Classify the user's feedback on the displayed Response Plan Pseudocode: does it change "
            "the task, or only the approach?",
            ("confirmed_prompt", "plan_draft", "review_feedback", "review_instructions"),
        ),
    }
)

OPERATIONS: tuple[str, ...] = tuple(CONTRACTS)
#: The one operation each projecting stage allows (review, waiting and closed stages have none).
STAGE_OPERATIONS: Mapping[str, str] = MappingProxyType({c.stage: op for op, c in CONTRACTS.items()})


def available_symbols(state: ProtocolState) -> frozenset[str]:
    """The optional symbols ``state`` has data for (independent of any builder)."""
    out: set[str] = set()
    if state.sources:
        out |= {"source_references", "task_inputs"}
    if state.tools:
        out.add(TOOLS_SYMBOL)
    if state.output_mode == "pseudocode":
        # A pseudocode response is written in the same notation as the artifacts.
        out.add("conventions")
    if any(i.answer is not None for i in state.inputs):
        out.add("execution_input")
    return frozenset(out)


def check_symbols(contract: OperationContract, symbols: Iterable[str], available: frozenset[str]) -> None:
    """``symbols`` (in projection order, one per rendered item) must be exactly the contract's."""
    listed = list(symbols)
    where = f"projection {contract.operation!r}"
    unknown = sorted(set(listed) - SYMBOLS)
    if unknown:
        raise ProjectionContractError(f"{where}: unknown symbol(s) {unknown}")
    twice = sorted(s for s, n in Counter(listed).items() if n > 1)
    if twice:
        raise ProjectionContractError(f"{where}: symbol(s) {twice} appear more than once")
    actual = frozenset(listed)
    expected = contract.expected(available)
    missing = sorted(expected - actual)
    if missing:
        raise ProjectionContractError(f"{where}: missing required symbol(s) {missing}")
    extra = actual - expected
    if extra:
        why = {True: "excluded by the contract", False: "optional, but the state has no data for it"}
        reasons = [f"{s!r} ({why[s in contract.exclude]})" for s in sorted(extra)]
        raise ProjectionContractError(f"{where}: extra symbol(s) {', '.join(reasons)}")


__all__ = [
    "BODY_SYMBOLS",
    "CONTRACTS",
    "MANDATORY",
    "OPERATIONS",
    "PREFIX_SYMBOLS",
    "STAGE_OPERATIONS",
    "SYMBOLS",
    "TOOLS_SYMBOL",
    "OperationContract",
    "available_symbols",
    "check_symbols",
    "region_class",
    "symbol_of",
]
