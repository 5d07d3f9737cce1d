"""Hostile text in phase calls: one check, first, for every text a call writes (issue 37, findings 6 and 7).

A lone surrogate in a model-written field was a bare ``UnicodeEncodeError``
from ``record_artifact``, ``request_input`` and ``complete`` (the digest
encodes the text before the store would have refused it), and nothing
bounded a draft's or a piece of feedback's size. Every controller call now
checks each text it would write before it reads the log: a lone surrogate is
``CanonicalizationError`` at the field's JSON path, naming the call; a text
over ``max_text_bytes`` UTF-8 bytes is ``FieldTooLarge`` naming the call,
the field, the size and the limit. Nothing is written in either case.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

import ctxengine.errors as errors
import ctxengine.phases.controller as controller_module
from ctxengine.errors import CanonicalizationError, ContextError, ModelValidationError
from ctxengine.phases import STAGE_OPERATIONS, ProtocolController, ProtocolState, Source
from ctxengine.stores import MemoryStore

INSTANCE = "hostile"


def answered(ctl: ProtocolController, s: ProtocolState) -> str:
    return ctl.project(s, STAGE_OPERATIONS[s.stage]).sha256


async def to_stage(ctl: ProtocolController, stage: str) -> ProtocolState | None:
    """The instance ``INSTANCE`` driven to ``stage`` (``None``: not submitted)."""
    if stage == "unsubmitted":
        return None
    s = await ctl.submit(INSTANCE, "Summarize the report.")
    if stage == "prompt_drafting":
        return s
    s = await ctl.record_artifact(INSTANCE, "prompt", "GOAL: summarize", projection_sha256=answered(ctl, s))
    if stage == "prompt_review":
        return s
    assert s.prompt is not None
    s = await ctl.confirm(INSTANCE, "prompt", version=1, digest=s.prompt.digest)
    s = await ctl.record_artifact(INSTANCE, "plan", "STEPS: read", projection_sha256=answered(ctl, s))
    if stage == "plan_review":
        return s
    assert s.plan is not None
    s = await ctl.confirm(INSTANCE, "plan", version=1, digest=s.plan.digest)
    if stage == "executing":
        return s
    s = await ctl.request_input(INSTANCE, "Which quarter?", projection_sha256=answered(ctl, s))
    assert stage == "waiting_input"
    return s


Call = Callable[[ProtocolController, "ProtocolState | None", str], Awaitable[ProtocolState]]


@dataclass(frozen=True)
class Entry:
    """A controller call with one text field, the stage where it is allowed, and how to make it."""

    action: str
    field: str
    stage: str
    call: Call


def _shown(s: ProtocolState | None) -> tuple[int, str]:
    shown = None if s is None else s.displayed
    return (1, "0" * 64) if shown is None else (shown.version, shown.digest)


def _reply(ctl: ProtocolController, s: ProtocolState | None) -> str:
    return "0" * 64 if s is None or s.stage not in STAGE_OPERATIONS else answered(ctl, s)


ENTRIES = [
    Entry("submit", "request", "unsubmitted", lambda c, s, t: c.submit(INSTANCE, t)),
    Entry(
        "submit",
        "constraints[1]",
        "unsubmitted",
        lambda c, s, t: c.submit(INSTANCE, "ok", constraints=["ok", t]),
    ),
    Entry(
        "record_artifact",
        "body",
        "prompt_drafting",
        lambda c, s, t: c.record_artifact(INSTANCE, "prompt", t, projection_sha256=_reply(c, s)),
    ),
    Entry(
        "revise",
        "feedback",
        "prompt_review",
        lambda c, s, t: c.revise(INSTANCE, "prompt", t, displayed_version=_shown(s)[0]),
    ),
    Entry(
        "change_request",
        "feedback",
        "plan_review",
        lambda c, s, t: c.change_request(INSTANCE, t, displayed_version=_shown(s)[0], digest=_shown(s)[1]),
    ),
    Entry(
        "review",
        "feedback",
        "plan_review",
        lambda c, s, t: c.review(INSTANCE, t, displayed_version=_shown(s)[0], digest=_shown(s)[1]),
    ),
    Entry(
        "request_input",
        "question",
        "executing",
        lambda c, s, t: c.request_input(INSTANCE, t, projection_sha256=_reply(c, s)),
    ),
    Entry(
        "provide_input",
        "answer",
        "waiting_input",
        lambda c, s, t: c.provide_input(INSTANCE, t, request_number=1),
    ),
    Entry(
        "complete",
        "result",
        "executing",
        lambda c, s, t: c.complete(INSTANCE, t, projection_sha256=_reply(c, s)),
    ),
    Entry("stop", "reason", "prompt_drafting", lambda c, s, t: c.stop(INSTANCE, reason=t)),
    Entry("fail", "reason", "prompt_drafting", lambda c, s, t: c.fail(INSTANCE, t)),
]
IDS = [f"{e.action}.{e.field}" for e in ENTRIES]


async def events(store: MemoryStore) -> int:
    return len(await store.events.read(INSTANCE))


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
async def test_a_lone_surrogate_is_a_canonicalization_error_naming_the_call_and_field(entry: Entry) -> None:
    store = MemoryStore()
    ctl = ProtocolController(store)
    before = await to_stage(ctl, entry.stage)
    written = await events(store)
    with pytest.raises(CanonicalizationError) as caught:
        await entry.call(ctl, before, "model text \ud800 more")
    assert caught.value.path == f"$.{entry.field}"
    assert entry.action in str(caught.value) and "U+D800" in str(caught.value)
    assert await events(store) == written
    if before is not None:
        assert await ctl.state(INSTANCE) == before == await ProtocolController(store).state(INSTANCE)
    # The same text, well formed, goes through: it was the surrogate.
    await entry.call(ctl, before, "model text \u00e9 more")
    assert await events(store) == written + 1


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
async def test_texts_are_checked_before_the_stage(entry: Entry) -> None:
    store = MemoryStore()
    ctl = ProtocolController(store)
    # Where the call is not allowed: submit once submitted, everything else before.
    elsewhere = await to_stage(ctl, "prompt_drafting" if entry.action == "submit" else "unsubmitted")
    written = await events(store)
    with pytest.raises(CanonicalizationError, match=entry.action):
        await entry.call(ctl, elsewhere, "\udfff")
    assert await events(store) == written


async def test_a_lone_surrogate_in_a_source_is_named_by_its_path() -> None:
    store = MemoryStore()
    ctl = ProtocolController(store)
    for field, source in (
        ("content", Source("report", "text \udc80")),
        ("description", Source("report", "text", description="\ud83d")),
        ("uri", Source("report", None, uri="file:///\ud800")),
    ):
        with pytest.raises(CanonicalizationError) as caught:
            await ctl.submit(INSTANCE, "Summarize.", sources=[Source("ok", "fine"), source])
        assert caught.value.path == f"$.sources[1].{field}" and "submit" in str(caught.value)
    assert await events(store) == 0


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
async def test_a_text_over_the_limit_is_field_too_large_and_nothing_is_written(entry: Entry) -> None:
    store = MemoryStore()
    ctl = ProtocolController(store, max_text_bytes=64)
    before = await to_stage(ctl, entry.stage)
    written = await events(store)
    with pytest.raises(errors.FieldTooLarge) as caught:
        await entry.call(ctl, before, "\u00e9" * 33)  # 33 characters, 66 UTF-8 bytes
    error = caught.value
    assert isinstance(error, ContextError) and isinstance(error, ValueError)
    assert (error.type_name, error.field, error.size, error.limit) == (entry.action, entry.field, 66, 64)
    assert f"{entry.action}.{entry.field}: 66 bytes exceeds the limit of 64 bytes" in str(error)
    assert await events(store) == written
    # Exactly at the limit is accepted.
    await entry.call(ctl, before, "\u00e9" * 32)
    assert await events(store) == written + 1


async def test_the_limit_has_a_documented_default_and_bounds_only_new_text() -> None:
    store = MemoryStore()
    default = controller_module.DEFAULT_MAX_TEXT_BYTES
    assert default == 4 << 20
    assert ProtocolController(store).max_text_bytes == default
    s = await ProtocolController(store).submit(INSTANCE, "Summarize.")
    big = "x" * (default + 1)
    with pytest.raises(errors.FieldTooLarge, match=r"record_artifact\.body"):
        await ProtocolController(store).record_artifact(INSTANCE, "prompt", big, projection_sha256="0" * 64)
    roomy = ProtocolController(store, max_text_bytes=8 << 20)
    s = await roomy.record_artifact(INSTANCE, "prompt", big, projection_sha256=answered(roomy, s))
    # A controller with a lower limit still reads what is stored: the limit bounds calls, not the log.
    strict = ProtocolController(store, max_text_bytes=16)
    assert await strict.state(INSTANCE) == s
    for bad in (0, -1, True, 2.5, "64"):
        with pytest.raises(ModelValidationError, match="max_text_bytes"):
            ProtocolController(store, max_text_bytes=bad)  # type: ignore[arg-type]
