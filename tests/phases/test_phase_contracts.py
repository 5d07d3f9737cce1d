"""Phase projections (issue 6), acceptance 1: each operation carries its contract's symbols only."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from phase_expectations import EXPECTED_SYMBOLS, STAGE_OF

from ctxengine.errors import ProjectionContractError
from ctxengine.phases import (
    CONTRACTS,
    OPERATIONS,
    SYMBOLS,
    Clause,
    InstructionPack,
    OperationContract,
    ProjectionCompiler,
    ProtocolController,
    check_symbols,
    symbols_of,
)
from phase_fixtures import CONSTRAINTS, REQUEST, drive, text_of

# -- acceptance 1: each operation carries its contract's symbols and nothing else ------------------


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_each_operation_carries_exactly_its_contract_symbols(
    ctl: ProtocolController, operation: str
) -> None:
    state = await drive(ctl, "task-1", STAGE_OF[operation])
    projection = ctl.project(state, operation)
    symbols = symbols_of(projection.request)
    assert sorted(symbols) == sorted(EXPECTED_SYMBOLS[operation])
    assert projection.manifest["symbols"] == symbols
    contract = CONTRACTS[operation]
    assert set(symbols) <= contract.include | contract.optional
    assert not set(symbols) & contract.exclude
    assert f"Operation: {operation}" in projection.request.prefix[1].text  # type: ignore[operator]


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_optional_symbols_are_absent_without_data(ctl: ProtocolController, operation: str) -> None:
    state = await drive(ctl, "bare", STAGE_OF[operation], sources=(), constraints=(), tools=())
    symbols = set(symbols_of(ctl.project(state, operation).request))
    assert symbols == EXPECTED_SYMBOLS[operation] - {"source_references", "task_inputs", "tools"}
    # Constraints are always carried, even when there are none.
    body = ctl.project(state, operation).request.body
    assert (
        body[0].region_class == "phase.constraints" and body[0].text == "Higher-priority constraints: none."
    )


async def test_symbols_carry_what_they_name(ctl: ProtocolController) -> None:
    state = await drive(ctl, "task-1", "prompt_drafting")
    req = ctl.project(state, "draft_prompt").request
    by_symbol = {
        item.region_class.removeprefix("phase."): item.text or "" for item in (*req.prefix, *req.body)
    }
    assert REQUEST in by_symbol["request"]
    assert all(c in by_symbol["constraints"] for c in CONSTRAINTS)
    # The prompt phase gets source references, never source content.
    assert (
        "Q3 report" in by_symbol["source_references"]
        and "file:///memos/cfo.txt" in by_symbol["source_references"]
    )
    assert "MARK-SOURCE-CONTENT" not in text_of(ctl.project(state, "draft_prompt"))
    assert by_symbol["prompt_instructions"].startswith("Prompt instructions:")
    assert "[prompt.role]" in by_symbol["prompt_instructions"]
    assert "[prompt.revise]" not in by_symbol["prompt_instructions"]  # selected for revise_prompt only
    assert "[pdl.sections]" in by_symbol["conventions"]


def _moved(contract: OperationContract, symbol: str, *, to: str) -> OperationContract:
    sets = {
        "include": set(contract.include),
        "optional": set(contract.optional),
        "exclude": set(contract.exclude),
    }
    for members in sets.values():
        members.discard(symbol)
    sets[to].add(symbol)
    return dataclasses.replace(contract, **{k: frozenset(v) for k, v in sets.items()})


async def test_extra_symbol_is_a_contract_error(ctl: ProtocolController) -> None:
    state = await drive(ctl, "task-1", "prompt_drafting")
    broken = _moved(CONTRACTS["draft_prompt"], "request", to="exclude")
    compiler = ProjectionCompiler(contracts={"draft_prompt": broken})
    with pytest.raises(ProjectionContractError, match=r"extra symbol.*'request' \(excluded"):
        compiler.compile(state, "draft_prompt")


async def test_missing_symbol_is_a_contract_error(ctl: ProtocolController) -> None:
    state = await drive(ctl, "task-1", "executing")
    broken = _moved(CONTRACTS["execute"], "request", to="include")
    with pytest.raises(ProjectionContractError, match=r"missing required symbol.*'request'"):
        ProjectionCompiler(contracts={"execute": broken}).compile(state, "execute")
    # A pack that selects no clause for an operation leaves its symbol missing.
    empty_plan_pack = InstructionPack("plan", (Clause("plan.only-revise", "x", frozenset({"revise_plan"})),))
    state = await drive(ctl, "task-2", "plan_drafting")
    with pytest.raises(ProjectionContractError, match=r"missing required symbol.*'plan_instructions'"):
        ProjectionCompiler(packs={"plan": empty_plan_pack}).compile(state, "draft_plan")


def test_check_symbols_names_each_kind_of_violation() -> None:
    contract = CONTRACTS["draft_plan"]
    good = sorted(contract.include)
    check_symbols(contract, good, frozenset())
    with pytest.raises(ProjectionContractError, match="appear more than once"):
        check_symbols(contract, [*good, "constraints"], frozenset())
    with pytest.raises(ProjectionContractError, match="unknown symbol"):
        check_symbols(contract, [*good, "chat_history"], frozenset())
    with pytest.raises(ProjectionContractError, match=r"missing required symbol.*'confirmed_prompt'"):
        check_symbols(contract, [s for s in good if s != "confirmed_prompt"], frozenset())
    execute = CONTRACTS["execute"]
    with pytest.raises(ProjectionContractError, match=r"'task_inputs' \(optional, but the state has no data"):
        check_symbols(execute, [*execute.include, "task_inputs"], frozenset())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    operation=st.sampled_from(OPERATIONS),
    symbols=st.sets(st.sampled_from(sorted(SYMBOLS))),
    available=st.sets(st.sampled_from(["source_references", "task_inputs", "tools", "conventions"])),
)
def test_check_symbols_accepts_exactly_the_expected_set(
    operation: str, symbols: set[str], available: set[str]
) -> None:
    contract = CONTRACTS[operation]
    expected = contract.include | (contract.optional & available)
    if symbols == expected:
        check_symbols(contract, sorted(symbols), frozenset(available))
    else:
        with pytest.raises(ProjectionContractError):
            check_symbols(contract, sorted(symbols), frozenset(available))


def test_contracts_partition_the_symbols_and_keep_the_mandatory_ones() -> None:
    c = CONTRACTS["draft_prompt"]
    with pytest.raises(ProjectionContractError, match="neither included, optional nor excluded"):
        dataclasses.replace(c, exclude=c.exclude - {"confirmed_plan"})
    with pytest.raises(ProjectionContractError, match="more than one of"):
        dataclasses.replace(c, optional=c.optional | {"request"})
    with pytest.raises(ProjectionContractError, match=r"every operation must include \['constraints'\]"):
        _moved(c, "constraints", to="exclude")
    with pytest.raises(ProjectionContractError, match="unknown symbol"):
        dataclasses.replace(c, include=c.include | {"history"})
