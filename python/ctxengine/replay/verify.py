"""The determinism check (issue 42, ADR 0024): every recorded request of a session rebuilt
from the log and compared with its record.

For each ``context.request.recorded`` event the request is rebuilt as it was built: the
plan of the recorded epoch (from the log), the checkpoint the record holds as a
reference snapshot (materialized from the log, as a stored checkpoint version is), the
recorded clock reading, principal and scopes, the recorded budget policy and estimator
calibration, the builder's surface and depth limit. Its prefix and body hashes are
compared with the record's; on a mismatch the first region whose digest differs is
named (``prefix``, then the body's region classes in order: ``history``,
``working_state``, ``runtime_metadata``, ``current_user``, ...).

A session written before format 6 (or by a deployment pinned below it) has no records:
its requests are found from the model responses the log holds and reported as not
reproducible, with the reason, never raised. The same holds for a record whose inputs
the log no longer answers. ``rebuild`` is the one rebuild path: the golden fixtures'
recorded requests go through it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from ..assembly.builder import Assembly, ContextBuilder
from ..core.budget import BudgetPolicy
from ..core.estimator import Estimator, TokenEstimator, load_tables
from ..errors import ContextError
from ..model import AgentSpec, Checkpoint, FixedClock, Principal, RunContext
from ..plan import ContextPlan, ContextPlanner
from ..plan.context_plan import stored_plan
from ..plan.planner import PLAN_EVENT_TYPES
from ..runtime.checkpoints import checkpoint_from_rows
from ..runtime.request_records import CALIBRATION_KEYS, REQUEST_RECORDED, region_digests, settings_digest
from ..runtime.session import ITEM_APPENDED
from ..stores.events import Event, RawCheckpoint, Store

#: The item types that open a model response (a step that answers a request).
RESPONSE_TYPES = frozenset({"assistant_message", "tool_call", "reasoning"})
_ITEM_KEY = re.compile(r"^conversation\.item:(?P<run>.+):(?P<step>\d+):(?P<pos>\d+)$")
NO_RECORD = (
    "no request record: written before format 6 (or by a deployment pinned below it), so "
    "the clock reading, principal scopes, estimator calibration and the checkpoint the "
    "request was built from are not in the log"
)


@dataclass(frozen=True, slots=True)
class RequestCheck:
    """One request of a session: reproduced or not, and why."""

    #: Its position among the session's requests, from 0.
    index: int
    #: The log sequence of its record, or of its response's first item when it has none.
    sequence: int
    run_id: str
    step: int
    ok: bool
    #: The first region whose digest differs (``None``: none, or nothing was rebuilt).
    first_differing_region: str | None = None
    #: Why it was not reproduced (``None`` when it was).
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "sequence": self.sequence,
            "run_id": self.run_id,
            "step": self.step,
            "ok": self.ok,
            "first_differing_region": self.first_differing_region,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class SessionCheck:
    """Every request of one session, checked."""

    session_id: str
    requests: tuple[RequestCheck, ...]

    @property
    def ok(self) -> bool:
        """Every request reproduced (a session without requests is trivially so)."""
        return all(r.ok for r in self.requests)

    @property
    def reproduced(self) -> int:
        return sum(r.ok for r in self.requests)

    @property
    def unreproducible(self) -> tuple[RequestCheck, ...]:
        """The requests that could not be rebuilt at all (no record, or inputs the log lacks)."""
        return tuple(r for r in self.requests if not r.ok and r.first_differing_region is None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "ok": self.ok,
            "requests": [r.to_dict() for r in self.requests],
        }


@dataclass(frozen=True, slots=True)
class RequestInputs:
    """Everything a build of one request reads besides the log."""

    run: RunContext
    checkpoint: Checkpoint
    principal: Principal
    plan: ContextPlan
    clock: datetime
    estimator: Estimator
    policy: BudgetPolicy
    surface: str = "api"
    max_compaction_depth: int = 2


def rebuild(store: Store, inputs: RequestInputs) -> Assembly:
    """The request ``inputs`` describe, built as the loop builds it (the one rebuild path)."""
    estimator = inputs.estimator
    planner = ContextPlanner(store, estimator=estimator, policy=inputs.policy)
    builder = ContextBuilder(
        planner,
        estimator=estimator,
        clock=FixedClock(inputs.clock),
        surface=inputs.surface,
        max_compaction_depth=inputs.max_compaction_depth,
    )
    plan = inputs.plan
    agent = AgentSpec(plan.agent_id, plan.agent_version, plan.agent_instructions)
    return builder.assemble(inputs.run, inputs.checkpoint, agent, inputs.principal, plan=plan)


def first_difference(recorded: list[Any], rebuilt: list[list[Any]]) -> str | None:
    """The first region whose ``[region, items, sha256]`` differs (``None``: all agree)."""
    for mine, theirs in zip(recorded, rebuilt, strict=False):
        if list(mine) != theirs:
            return str(mine[0])
    if len(recorded) != len(rebuilt):
        longer = recorded if len(recorded) > len(rebuilt) else rebuilt
        return str(longer[min(len(recorded), len(rebuilt))][0])
    return None


async def verify_session(
    store: Store,
    session_id: str,
    *,
    policy: BudgetPolicy | None = None,
    estimator: Estimator | None = None,
) -> SessionCheck:
    """Rebuild every request of ``session_id`` under its recorded configuration and compare.

    ``policy``: rebuild under this budget policy instead of the recorded one (a harness
    asking what a change moves: the first differing region says where). ``estimator``:
    the settings to count with (its calibration is replaced by the recorded one; by
    default a ``TokenEstimator()``'s, what the engine uses unless told otherwise)."""
    events = await store.events.read(session_id)
    plans = {p.epoch: p for p in (stored_plan(e) for e in events if e.type in PLAN_EVENT_TYPES)}
    base = (estimator if estimator is not None else cast(Estimator, TokenEstimator())).snapshot()
    found: list[tuple[int, str, int, Event | None]] = []
    recorded: set[tuple[str, int]] = set()
    for event in events:
        if event.type == REQUEST_RECORDED:
            run = event.payload.get("run")
            run_id = run.get("run_id") if isinstance(run, dict) else None
            step = run.get("step") if isinstance(run, dict) else None
            if isinstance(run_id, str) and isinstance(step, int):
                recorded.add((run_id, step))
            found.append((event.sequence, str(run_id), step if isinstance(step, int) else -1, event))
    for sequence, run_id, step in responses(events):
        if (run_id, step) not in recorded:
            found.append((sequence, run_id, step, None))
    found.sort(key=lambda f: f[0])
    checks = []
    for index, (sequence, run_id, step, record) in enumerate(found):
        if record is None:
            checks.append(RequestCheck(index, sequence, run_id, step, False, None, NO_RECORD))
            continue
        try:
            checks.append(await _check(store, index, record, plans, policy, base))
        except (ContextError, KeyError, TypeError, ValueError) as exc:
            why = f"its inputs do not rebuild: {type(exc).__name__}: {exc}"
            checks.append(RequestCheck(index, sequence, run_id, step, False, None, why))
    return SessionCheck(session_id, tuple(checks))


def responses(events: list[Event]) -> list[tuple[int, str, int]]:
    """``(sequence, run, step)`` of each model response in the log: a run's items of the
    response types that follow its seed or a tool result. The step is the one the item's
    key names (``conversation.item:{run}:{step}:{i}``, what the loop writes), else the
    response's position in its run (logs whose keys name no step)."""
    out: list[tuple[int, str, int]] = []
    last: dict[str, bool] = {}  # run -> whether its last item was part of a response
    count: dict[str, int] = {}
    for event in events:
        item = event.payload.get("item") if event.type == ITEM_APPENDED else None
        if event.run_id is None or not isinstance(item, dict):
            continue
        response = item.get("type") in RESPONSE_TYPES
        if response and not last.get(event.run_id, False):
            match = _ITEM_KEY.match(event.derivation_key)
            n = count.get(event.run_id, 0)
            out.append((event.sequence, event.run_id, int(match["step"]) if match else n))
            count[event.run_id] = n + 1
        last[event.run_id] = response
    return out


async def _check(
    store: Store,
    index: int,
    record: Event,
    plans: Mapping[int, ContextPlan],
    policy: BudgetPolicy | None,
    base: dict[str, Any],
) -> RequestCheck:
    data = record.payload
    run = RunContext.from_dict(data["run"])
    plan = plans.get(data["plan"]["epoch"])
    if plan is None or plan.prefix_sha256 != data["plan"]["prefix_sha256"]:
        why = f"the log holds no plan of epoch {data['plan']['epoch']} with the recorded prefix"
        return RequestCheck(index, record.sequence, run.run_id, run.step, False, None, why)
    snapshot = data["checkpoint"]
    version = snapshot["checkpoint"]["version"]
    row = RawCheckpoint(version=version, kind="full", trigger="seeded", payload=snapshot, created_at=_EPOCH)
    checkpoint = await checkpoint_from_rows(store, run.run_id, [row])
    assert checkpoint is not None  # one full row always materializes
    calibration = data["estimator"]
    estimator = TokenEstimator.restore(
        {
            **{k: v for k, v in base.items() if k not in CALIBRATION_KEYS},
            "version": 2,
            "encodings": base.get("encodings", {}),
            **{key: calibration[key] for key in CALIBRATION_KEYS},
        }
    )
    await load_tables(estimator, plan.model_id)
    inputs = RequestInputs(
        run=run,
        checkpoint=checkpoint,
        principal=Principal.from_dict(data["principal"]),
        plan=plan,
        clock=datetime.fromisoformat(data["clock"]),
        estimator=estimator,
        policy=policy if policy is not None else BudgetPolicy.from_dict(data["policy"]),
        surface=data["surface"],
        max_compaction_depth=data["max_compaction_depth"],
    )
    request = rebuild(store, inputs).request
    hashes = data["hashes"]
    meta = request.metadata
    if (meta["prefix_sha256"], meta["body_sha256"]) == (hashes["prefix"], hashes["body"]):
        return RequestCheck(index, record.sequence, run.run_id, run.step, True)
    region = first_difference(hashes["regions"], region_digests(request))
    why = "prefix and body hashes differ from the record's"
    if settings_digest(base) != calibration["settings_sha256"]:
        why += " (the estimator's settings are not the recorded ones)"
    return RequestCheck(index, record.sequence, run.run_id, run.step, False, region or "body", why)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


__all__ = [
    "NO_RECORD",
    "RequestCheck",
    "RequestInputs",
    "SessionCheck",
    "first_difference",
    "rebuild",
    "responses",
    "verify_session",
]
