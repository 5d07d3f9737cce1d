"""Working state (issue 5, acceptance 5): the control tool's schema is its validation,
caps fail with structured errors, constraints never evict, model entries are untrusted."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxengine as ce
from ctxengine.errors import ModelValidationError, WorkingStateLimitExceeded
from ctxengine.model import StateEntry, Task, TrustLevel, WorkingState
from ctxengine.runtime.working_state import (
    MAX_TEXT,
    UPDATE_WORKING_STATE_SCHEMA,
    UPDATE_WORKING_STATE_TOOL,
    WorkingStateLimits,
    WorkingStateManager,
    carried,
    entry_id,
    parse_update,
)

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VALIDATOR = jsonschema.Draft202012Validator(UPDATE_WORKING_STATE_SCHEMA)


def manager(**limits: int) -> WorkingStateManager:
    return WorkingStateManager(estimator=ce.TokenEstimator(), limits=WorkingStateLimits(**limits))


def schema_accepts(update: Any) -> bool:
    return bool(VALIDATOR.is_valid(update))


def transition_accepts(update: Any) -> bool:
    try:
        manager().transition(WorkingState(), update)
    except ModelValidationError:
        return False
    except WorkingStateLimitExceeded:
        return True  # valid input, over a state-dependent cap (block tokens)
    return True


# -- the schema is the validation ------------------------------------------------------

texts = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", " ", "\t\n", "ok", "x" * MAX_TEXT, "x" * (MAX_TEXT + 1), "é" * 5]),
)
ids = st.one_of(
    st.sampled_from(["t1", "a.b:c-d_e", "", "bad id", "x" * 64, "x" * 65, "ünï"]), st.text(max_size=8)
)
junk = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2), st.floats(allow_nan=False), st.just([]), st.just({})
)
tasks = st.one_of(
    st.fixed_dictionaries(
        {"task_id": ids, "text": texts},
        optional={"status": st.sampled_from(["open", "in_progress", "completed", "done", None])},
    ),
    st.dictionaries(
        st.sampled_from(["task_id", "text", "status", "owner"]), st.one_of(texts, junk), max_size=4
    ),
    junk,
)
updates = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "objective": st.one_of(texts, st.none(), junk),
            "add_constraints": st.one_of(st.lists(st.one_of(texts, junk), max_size=22), junk),
            "upsert_tasks": st.one_of(st.lists(tasks, max_size=3), junk),
            "add_facts": st.one_of(
                st.lists(texts, max_size=3), st.lists(texts, min_size=41, max_size=42), junk
            ),
            "resolve_questions": st.one_of(st.lists(st.one_of(ids, junk), max_size=3), junk),
            "next_action": st.one_of(texts, st.none(), junk),
        },
    ),
    st.dictionaries(st.text(max_size=12), junk, max_size=2),
    junk,
)


@SETTINGS
@given(update=updates)
def test_transition_accepts_exactly_what_the_tool_schema_accepts(update: Any) -> None:
    assert transition_accepts(update) == schema_accepts(update), update


EXAMPLES: list[tuple[Any, bool]] = [
    ({}, True),
    ({"objective": "ship it", "next_action": None}, True),
    ({"objective": None}, True),
    ({"add_constraints": ["no weekend deploys"], "add_facts": ["db is postgres 16"]}, True),
    ({"upsert_tasks": [{"task_id": "t-1", "text": "write tests", "status": "in_progress"}]}, True),
    ({"upsert_tasks": [{"task_id": "t-1", "text": "write tests"}]}, True),
    ({"resolve_questions": ["q-0123456789"]}, True),
    ({"objective": ""}, False),
    ({"objective": "   "}, False),
    ({"objective": 3}, False),
    ({"add_constraints": "one"}, False),
    ({"add_constraints": [""]}, False),
    ({"add_constraints": ["x"] * 21}, False),
    ({"upsert_tasks": [{"task_id": "t 1", "text": "x"}]}, False),
    ({"upsert_tasks": [{"task_id": "t1"}]}, False),
    ({"upsert_tasks": [{"task_id": "t1", "text": "x", "status": "done"}]}, False),
    ({"upsert_tasks": [{"task_id": "t1", "text": "x", "owner": "me"}]}, False),
    ({"resolve_questions": [1]}, False),
    ({"next_action": True}, False),
    ({"delete_constraints": ["c-1"]}, False),
    ([], False),
    (None, False),
]


@pytest.mark.parametrize(("update", "valid"), EXAMPLES)
def test_examples(update: Any, valid: bool) -> None:
    assert schema_accepts(update) is valid
    assert transition_accepts(update) is valid


def test_tool_spec_is_exported_with_the_schema() -> None:
    assert ce.UPDATE_WORKING_STATE_TOOL is UPDATE_WORKING_STATE_TOOL
    assert UPDATE_WORKING_STATE_TOOL.name == "context.update_working_state"
    assert UPDATE_WORKING_STATE_TOOL.input_schema == UPDATE_WORKING_STATE_SCHEMA
    jsonschema.Draft202012Validator.check_schema(UPDATE_WORKING_STATE_SCHEMA)
    assert set(UPDATE_WORKING_STATE_SCHEMA["properties"]) == {
        "objective",
        "add_constraints",
        "upsert_tasks",
        "add_facts",
        "resolve_questions",
        "next_action",
    }


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"nope": 1}, "nope"),
        (
            {"upsert_tasks": [{"task_id": "t1", "text": "x"}, {"task_id": "t2", "text": "x", "status": "?"}]},
            "upsert_tasks[1].status",
        ),
        ({"add_facts": ["ok", 7]}, "add_facts[1]"),
        ({"resolve_questions": ["a b"]}, "resolve_questions[0]"),
        ({"objective": ""}, "objective"),
    ],
)
def test_bad_input_names_the_field(update: Any, field: str) -> None:
    with pytest.raises(ModelValidationError) as info:
        manager().transition(WorkingState(), update)
    assert info.value.field == field
    assert field in str(info.value)


# -- transitions ---------------------------------------------------------------------------


def test_model_authored_entries_are_external_untrusted() -> None:
    state = manager().transition(
        WorkingState(),
        {
            "objective": "ship",
            "add_constraints": ["no force pushes"],
            "upsert_tasks": [{"task_id": "t1", "text": "write the parser"}],
            "add_facts": ["the api is v2"],
            "next_action": "open the file",
        },
    )
    assert [e.trust for e in (*state.constraints, *state.tasks, *state.established_facts)] == [
        TrustLevel.EXTERNAL_UNTRUSTED
    ] * 3
    assert state.constraints[0].entry_id == entry_id("c", "no force pushes")
    assert (state.objective, state.next_action, state.tasks[0].status) == ("ship", "open the file", "open")
    user = manager().transition(WorkingState(), {"add_constraints": ["x"]}, source_trust=TrustLevel.USER)
    assert user.constraints[0].trust is TrustLevel.USER


def test_transition_is_pure_and_only_sent_keys_change() -> None:
    m = manager()
    start = m.transition(WorkingState(), {"objective": "a", "next_action": "b", "add_facts": ["f"]})
    same = m.transition(start, {})
    assert same == start
    cleared = m.transition(start, {"next_action": None})
    assert (cleared.objective, cleared.next_action, cleared.established_facts) == (
        "a",
        None,
        start.established_facts,
    )
    assert m.transition(start, {"add_facts": ["f"]}) == start  # the same text is the same entry


def test_upsert_keeps_trust_on_status_change_and_takes_it_on_rewording() -> None:
    m = manager()
    state = m.transition(
        WorkingState(), {"upsert_tasks": [{"task_id": "t1", "text": "do"}]}, source_trust="user"
    )
    done = m.transition(state, {"upsert_tasks": [{"task_id": "t1", "text": "do", "status": "completed"}]})
    assert done.tasks == (Task("t1", "do", "completed", TrustLevel.USER),)
    reworded = m.transition(state, {"upsert_tasks": [{"task_id": "t1", "text": "do more"}]})
    assert reworded.tasks == (Task("t1", "do more", "open", TrustLevel.EXTERNAL_UNTRUSTED),)


# Every entry renders in its own trust envelope (~50 tokens with nonce and
# source), so under the default 1000-token block the block cap binds before
# the count caps; the count-cap tests lift the block cap to isolate them.
ROOMY = 100_000


def test_constraints_never_evict_at_the_cap() -> None:
    m = manager(block_tokens=ROOMY)
    state = m.transition(WorkingState(), {"add_constraints": [f"rule {i}" for i in range(20)]})
    with pytest.raises(WorkingStateLimitExceeded) as info:
        m.transition(state, {"add_constraints": ["rule 20"]})
    assert (info.value.field, info.value.limit, info.value.attempted) == ("constraints", 20, 21)
    assert "never evicted" in str(info.value)
    for i in range(60):  # fact churn never costs a constraint
        state = m.transition(state, {"add_facts": [f"fact {i}"]})
    assert [c.text for c in state.constraints] == [f"rule {i}" for i in range(20)]
    assert len(state.established_facts) == 40


def test_constraints_never_evict_under_block_pressure() -> None:
    m = manager()
    state = m.transition(WorkingState(), {"add_facts": [f"fact {i}" for i in range(5)]})
    added = 0
    with pytest.raises(WorkingStateLimitExceeded) as info:
        while True:
            state = m.transition(state, {"add_constraints": [f"rule {added} " + "x" * 150]})
            added += 1
    assert info.value.field == "block_tokens" and info.value.limit == 1000
    assert [c.text for c in state.constraints] == [f"rule {i} " + "x" * 150 for i in range(added)]
    assert added < 20  # the block cap bound before the count cap
    assert state.established_facts == ()  # facts made room first; no constraint did
    assert m.block_tokens(state) <= 1000


def test_facts_evict_oldest_beyond_their_cap() -> None:
    m = manager(block_tokens=ROOMY)
    state = WorkingState()
    for i in range(45):
        state = m.transition(state, {"add_facts": [f"f{i}"]})
    assert [f.text for f in state.established_facts] == [f"f{i}" for i in range(5, 45)]


def test_open_task_cap_counts_open_tasks_only() -> None:
    m = manager(block_tokens=ROOMY)
    state = m.transition(
        WorkingState(), {"upsert_tasks": [{"task_id": f"t{i}", "text": "x"} for i in range(30)]}
    )
    with pytest.raises(WorkingStateLimitExceeded) as info:
        m.transition(state, {"upsert_tasks": [{"task_id": "t30", "text": "x"}]})
    assert (info.value.field, info.value.limit, info.value.attempted) == ("open_tasks", 30, 31)
    state = m.transition(state, {"upsert_tasks": [{"task_id": "t0", "text": "x", "status": "completed"}]})
    state = m.transition(state, {"upsert_tasks": [{"task_id": "t30", "text": "x"}]})
    assert len(state.tasks) == 31


def test_questions_lifecycle_and_cap() -> None:
    m = manager(block_tokens=ROOMY)
    state = m.add_question(WorkingState(), "which region?", question_id="q-region")
    assert state.open_questions == (StateEntry("q-region", "which region?", TrustLevel.EXTERNAL_UNTRUSTED),)
    assert m.add_question(state, "which region?", question_id="q-region") == state
    auto = m.add_question(state, "deadline?", trust=TrustLevel.PLATFORM)
    assert auto.open_questions[1] == StateEntry(entry_id("q", "deadline?"), "deadline?", TrustLevel.PLATFORM)
    assert m.resolve_question(auto, "q-region").open_questions == auto.open_questions[1:]
    with pytest.raises(ModelValidationError, match="no open question 'q-missing'"):
        m.resolve_question(auto, "q-missing")
    # The model resolving an unknown or already resolved question is a no-op.
    assert (
        m.transition(auto, {"resolve_questions": ["q-region", "q-missing"]}).open_questions
        == auto.open_questions[1:]
    )
    for i in range(18):
        auto = m.add_question(auto, f"question {i}")
    with pytest.raises(WorkingStateLimitExceeded) as info:
        m.add_question(auto, "one more")
    assert (info.value.field, info.value.limit) == ("open_questions", 20)


def test_block_token_cap_evicts_completed_tasks_then_facts_then_fails() -> None:
    m = manager(block_tokens=300)
    state = m.transition(
        WorkingState(),
        {
            "upsert_tasks": [{"task_id": "old", "text": "x" * 150, "status": "completed"}],
            "add_facts": ["fact one " + "y" * 100, "fact two"],
        },
    )
    assert m.block_tokens(state) <= 300
    grown = m.transition(state, {"add_constraints": ["c" * 300]})
    assert m.block_tokens(grown) <= 300
    assert [t.task_id for t in grown.tasks] == []  # the completed task went first
    assert grown.constraints[0].text == "c" * 300
    with pytest.raises(WorkingStateLimitExceeded) as info:
        m.transition(grown, {"add_constraints": ["d" * 600]})
    assert info.value.field == "block_tokens" and info.value.limit == 300


def test_default_block_cap_is_one_thousand_tokens() -> None:
    m = manager()
    assert m.limits == WorkingStateLimits(20, 30, 40, 20, 1000)
    with pytest.raises(WorkingStateLimitExceeded, match="block_tokens"):
        m.transition(WorkingState(), {"add_constraints": [c * 1000 for c in "wxyz"]})


def test_carried_drops_completed_tasks_and_resets_next_action() -> None:
    state = WorkingState(
        objective="o",
        constraints=(StateEntry("c1", "keep"),),
        tasks=(Task("a", "x", "completed"), Task("b", "y", "in_progress")),
        next_action="go",
    )
    assert carried(state) == WorkingState(
        objective="o", constraints=state.constraints, tasks=(state.tasks[1],)
    )


def test_parse_update_rejects_a_non_object() -> None:
    with pytest.raises(ModelValidationError, match="expected an object"):
        parse_update("objective")
