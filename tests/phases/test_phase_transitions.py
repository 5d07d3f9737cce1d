"""The stage machine against a model of it (issue 16, acceptance 2).

Random sequences of protocol calls, each current, stale or missing the name
it must carry, run against the controller and against a small independent
model of the transition table. Every call the model calls illegal must raise
``ProtocolStateError`` or ``StaleConfirmation`` and append nothing (unless it
repeats the last transition exactly: a retry, which returns the state and
appends nothing either); after every step a fresh controller rebuilds the
state from the log, and it must match the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxengine.errors import ProtocolStateError, StaleConfirmation
from ctxengine.phases import ACTIVE_STAGES, STAGE_OPERATIONS, ProtocolController, ProtocolState
from ctxengine.stores import MemoryStore

STALE_SHA = "5" * 64
INSTANCE = "inst"

# call -> {stage it is legal in: the stage it leads to}; ``None`` is "not submitted".
TABLE: dict[str, dict[str | None, str]] = {
    "submit": {None: "prompt_drafting"},
    "record_prompt": {"prompt_drafting": "prompt_review", "prompt_revising": "prompt_review"},
    "revise_prompt": {"prompt_review": "prompt_revising"},
    "confirm_prompt": {"prompt_review": "plan_drafting"},
    "record_plan": {"plan_drafting": "plan_review", "plan_revising": "plan_review"},
    "revise_plan": {"plan_review": "plan_revising"},
    "confirm_plan": {"plan_review": "executing"},
    "change_request": {"plan_review": "prompt_revising"},
    "review": {"plan_review": "review_interpreting"},
    "interpret_task": {"review_interpreting": "prompt_revising"},
    "interpret_approach": {"review_interpreting": "plan_revising"},
    "request_input": {"executing": "waiting_input"},
    "provide_input": {"waiting_input": "executing"},
    "complete": {"executing": "complete"},
    "stop": {s: "stopped" for s in ACTIVE_STAGES},
    "fail": {s: "error" for s in ACTIVE_STAGES},
}
#: Which calls can name something stale, and which can omit a required name.
STALE = {
    "record_prompt",
    "record_plan",
    "revise_prompt",
    "revise_plan",
    "confirm_prompt",
    "confirm_plan",
    "change_request",
    "review",
    "interpret_task",
    "interpret_approach",
    "request_input",
    "provide_input",
    "complete",
}
MISSING = STALE - {"revise_prompt", "revise_plan", "confirm_prompt", "confirm_plan"}


@dataclass
class Model:
    """What the controller should hold, tracked without any of its code."""

    stage: str | None = None
    prompts: int = 0
    plans: int = 0
    prompt_status: str | None = None
    plan_status: str | None = None
    asked: int = 0
    answered: int = 0
    ended_from: str | None = None
    events: int = 0
    last: tuple[str, tuple[Any, ...]] | None = None
    log: list[str] = field(default_factory=list)

    def legal(self, name: str) -> bool:
        return self.stage in TABLE[name]

    def apply(self, name: str) -> None:
        before, self.stage = self.stage, TABLE[name][self.stage]
        kind = name.rsplit("_", 1)[-1]
        if name.startswith("record_"):
            if kind == "prompt":
                self.prompts, self.prompt_status = self.prompts + 1, "displayed"
            else:
                self.plans, self.plan_status = self.plans + 1, "displayed"
        elif name.startswith("revise_") or name.startswith("confirm_"):
            status = "rejected" if name.startswith("revise_") else "confirmed"
            setattr(self, f"{kind}_status", status)
        elif name in ("change_request", "interpret_task", "interpret_approach"):
            self.plan_status = "rejected"
        elif name == "request_input":
            self.asked += 1
        elif name == "provide_input":
            self.answered += 1
        elif name in ("stop", "fail"):
            self.ended_from = before
        self.events += 1

    def observed(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "prompts": self.prompts,
            "plans": self.plans,
            "prompt_status": self.prompt_status,
            "plan_status": self.plan_status,
            "asked": self.asked,
            "answered": self.answered,
            "ended_from": self.ended_from,
        }


def observe(state: ProtocolState | None) -> dict[str, Any]:
    if state is None:
        return Model().observed()
    prompt, plan = state.latest("prompt"), state.latest("plan")
    return {
        "stage": state.stage,
        "prompts": state.count("prompt"),
        "plans": state.count("plan"),
        "prompt_status": None if prompt is None else prompt.status,
        "plan_status": None if plan is None else plan.status,
        "asked": len(state.inputs),
        "answered": sum(1 for i in state.inputs if i.answer is not None),
        "ended_from": None if state.termination is None else state.termination.stage,
    }


def arguments(
    ctl: ProtocolController, state: ProtocolState | None, name: str, variant: str, n: int
) -> tuple[Any, ...]:
    """The call's arguments from what a caller would see: current, stale, or missing the name."""
    shown = None if state is None else state.displayed
    version = 1 if shown is None else shown.version
    digest = "0" * 64 if shown is None else shown.digest
    operation = None if state is None else STAGE_OPERATIONS.get(state.stage)
    current = (
        STALE_SHA[:-1] + "6" if operation is None or state is None else ctl.project(state, operation).sha256
    )
    sha = {"ok": current, "stale": STALE_SHA, "missing": None}[variant]
    if name == "submit":
        return ("Summarize the report.",)
    if name.startswith("record_"):
        return (name[len("record_") :], f"body {n}", sha)
    if name.startswith("revise_"):
        return (name[len("revise_") :], f"feedback {n}", version + (variant == "stale"))
    if name.startswith("confirm_"):
        return (name[len("confirm_") :], version, STALE_SHA if variant == "stale" else digest)
    if name in ("change_request", "review"):
        if variant == "missing":
            return (f"feedback {n}", None, None)
        return (f"feedback {n}", version, STALE_SHA if variant == "stale" else digest)
    if name.startswith("interpret_"):
        return (name[len("interpret_") :] + "_change", sha)
    if name in ("request_input", "complete"):
        return (f"text {n}", sha)
    if name == "provide_input":
        pending = None if state is None else state.pending_input
        number = 1 if pending is None else pending.number
        return (f"answer {n}", {"ok": number, "stale": number + 1, "missing": None}[variant])
    return (f"reason {n}",) if name == "fail" else ()


def invoke(ctl: ProtocolController, name: str, args: tuple[Any, ...]) -> Awaitable[ProtocolState]:
    calls: dict[str, Callable[..., Awaitable[ProtocolState]]] = {
        "submit": lambda r: ctl.submit(INSTANCE, r),
        "record": lambda k, b, h: ctl.record_artifact(INSTANCE, k, b, projection_sha256=h),
        "revise": lambda k, f, v: ctl.revise(INSTANCE, k, f, displayed_version=v),
        "confirm": lambda k, v, d: ctl.confirm(INSTANCE, k, version=v, digest=d),
        "change_request": lambda f, v, d: ctl.change_request(INSTANCE, f, displayed_version=v, digest=d),
        "review": lambda f, v, d: ctl.review(INSTANCE, f, displayed_version=v, digest=d),
        "interpret": lambda verdict, h: ctl.interpret_review(INSTANCE, verdict, projection_sha256=h),
        "request_input": lambda q, h: ctl.request_input(INSTANCE, q, projection_sha256=h),
        "provide_input": lambda a, num: ctl.provide_input(INSTANCE, a, request_number=num),
        "complete": lambda r, h: ctl.complete(INSTANCE, r, projection_sha256=h),
        "stop": lambda: ctl.stop(INSTANCE),
        "fail": lambda reason: ctl.fail(INSTANCE, reason),
    }
    key = name if name in calls else name.split("_", 1)[0]
    return calls[key](*args)


async def rebuilt(store: MemoryStore) -> ProtocolState | None:
    try:
        return await ProtocolController(store).state(INSTANCE)
    except ProtocolStateError:
        return None


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), version=st.sampled_from([2, 2, 1]))
def test_random_call_sequences_follow_the_transition_table(data: st.DataObject, version: int) -> None:
    """Both protocol versions: version 1 (stored instances) obeys the same table."""

    async def scenario() -> None:
        store = MemoryStore()
        ctl = ProtocolController(store, protocol_version=version)
        model = Model()
        closed = 0
        for n in range(data.draw(st.integers(1, 60), label="steps")):
            if model.stage in ("complete", "stopped", "error"):
                closed += 1
                if closed > 4:  # a closed instance refuses everything; a few tries show it
                    break
            state = await rebuilt(store)
            legal = [name for name in TABLE if model.legal(name) and name not in ("stop", "fail")]
            checked = [name for name in legal if name in STALE]
            mode = data.draw(st.integers(0, 19), label="mode")
            if legal and mode <= 9:  # mostly move on, so that walks reach the late stages
                name, variant = data.draw(st.sampled_from(legal), label="call"), "ok"
            elif checked and mode <= 13:  # a call the stage allows, naming something stale or nothing
                name = data.draw(st.sampled_from(checked), label="call")
                variant = data.draw(st.sampled_from(["stale", "missing"] if name in MISSING else ["stale"]))
            elif model.last is not None and mode <= 15:
                (name, args), variant = model.last, "repeat"
            else:  # anything: mostly calls the stage does not allow; now and then the end
                names = ["stop", "fail"] if mode == 19 else sorted(TABLE)
                name = data.draw(st.sampled_from(names), label="call")
                variants = [
                    "ok",
                    *(["stale"] if name in STALE else []),
                    *(["missing"] if name in MISSING else []),
                ]
                variant = data.draw(st.sampled_from(variants), label="variant")
            if variant != "repeat":
                args = arguments(ctl, state, name, variant, n)
            model.log.append(f"{name}{args!r} [{variant}] in {model.stage}")
            where = "\n".join(model.log)
            if variant == "missing":
                expected: type[Exception] | None = ProtocolStateError
            elif not model.legal(name):
                expected = None if (name, args) == model.last else ProtocolStateError
            elif variant == "stale":
                expected = StaleConfirmation
            else:
                expected = None
            if expected is not None:
                with pytest.raises(expected):
                    await invoke(ctl, name, args)
            else:
                result = await invoke(ctl, name, args)
                if model.legal(name):
                    model.apply(name)
                    model.last = (name, args)
                assert observe(result) == model.observed(), where
            assert len(await store.events.read(INSTANCE)) == model.events, where
            assert observe(await rebuilt(store)) == model.observed(), where

    asyncio.run(scenario())


def test_the_model_reaches_every_stage() -> None:
    """A guard on the model itself: every stage is the target of some transition."""
    targets = {to for moves in TABLE.values() for to in moves.values()}
    from ctxengine.phases import STAGES

    assert targets == set(STAGES)
