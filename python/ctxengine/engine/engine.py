"""The session API (issue 41): one object for an agent's configuration and its store, a
handle per session, and the turn as the unit of work.

``Engine.open(url, model=...)`` builds the advanced layer once (estimator, planner,
builder, compactor, ``ContextLoop``) from the store URL and the agent's configuration:
the model (a name in ``MODELS`` or a ``ResolvedModel``), instructions, tools (``ToolSpec``
or OpenAI / Anthropic tool dicts) and policy (a ``BudgetPolicy`` or its dict form), with
defaults for everything but the model. ``engine.session(id).turn(message)`` starts a run;
``engine.resume(run_id)`` picks one up in any process. ``summarizer=`` (a router, e.g.
``providers.openai_router(client, model=...)``) makes compaction model-backed (ADR 0026).
The parts stay public as the engine's attributes (``store``, ``planner``, ``builder``,
``loop``, ``estimator``).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from collections.abc import Generator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from ..assembly.builder import ContextBuilder
from ..assembly.router import Router
from ..core.budget import BudgetPolicy
from ..core.canonical import payload_hash
from ..core.estimator import Estimator, TokenEstimator
from ..errors import ModelValidationError, OrphanedToolPair
from ..model import AgentSpec, Principal, ResolvedModel, ToolSpec
from ..model.clock import Clock
from ..plan import ContextPlan, ContextPlanner
from ..runtime.compaction import StructuredCompactor
from ..runtime.loop import ContextLoop
from ..runtime.model_compactor import ModelCompactor
from ..runtime.usage import USAGE_REPORTED, stored_usage
from ..stores import open_store
from ..stores.events import Store
from .messages import user_message
from .models import ModelEntry, lookup_model
from .resume import find_run, open_calls
from .turn import Turn

if TYPE_CHECKING:
    from .blocking import BlockingEngine

DEFAULT_INSTRUCTIONS = "You are a helpful assistant."
#: Who a session's turns act for when the caller names no one.
DEFAULT_PRINCIPAL = Principal("user", "default")


def tool_spec(tool: Any, index: int = 0) -> ToolSpec:
    """A ``ToolSpec`` from itself or an OpenAI Chat, OpenAI Responses or Anthropic tool dict."""
    if isinstance(tool, ToolSpec):
        return tool
    where = f"tools[{index}]"
    if not isinstance(tool, Mapping):
        raise ModelValidationError("Engine", where, f"expected a ToolSpec or a tool dict, got {type(tool)}")
    spec = tool.get("function") if tool.get("type") == "function" and "function" in tool else tool
    if not isinstance(spec, Mapping):
        raise ModelValidationError("Engine", f"{where}.function", "expected a dict")
    schema = spec.get("parameters", spec.get("input_schema", {"type": "object", "properties": {}}))
    name, description = spec.get("name"), spec.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str) or not isinstance(schema, Mapping):
        raise ModelValidationError(
            "Engine", where, "a tool dict needs a str name, a str description and a dict of parameters"
        )
    return ToolSpec(name, description, dict(schema))


def budget_policy(policy: BudgetPolicy | Mapping[str, Any] | None) -> BudgetPolicy:
    """The policy itself, its dict form (``BudgetPolicy.from_dict``), or the defaults."""
    if policy is None:
        return BudgetPolicy()
    if isinstance(policy, BudgetPolicy):
        return policy
    return BudgetPolicy.from_dict(policy)


def policy_version(policy: BudgetPolicy) -> str:
    """A version that changes with the policy, so that a new policy starts a new plan epoch."""
    return f"engine/{payload_hash(dataclasses.asdict(policy))[:16]}"


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Engine:
    """An agent's context engine on one store: ``await Engine.open(url, model=...)`` or
    ``async with Engine.open(url, model=...) as engine``."""

    def __init__(
        self,
        store: Store,
        *,
        model: str | ResolvedModel,
        instructions: str = DEFAULT_INSTRUCTIONS,
        tools: Sequence[Any] = (),
        policy: BudgetPolicy | Mapping[str, Any] | None = None,
        principal: Principal = DEFAULT_PRINCIPAL,
        agent_id: str = "agent",
        owner: str | None = None,
        clock: Clock | None = None,
        estimator: Estimator | None = None,
        summarizer: Router | None = None,
        owns_store: bool = False,
    ) -> None:
        entry: ModelEntry = lookup_model(model)
        self.model: ResolvedModel = entry.model
        self.store = store
        self.tools: tuple[ToolSpec, ...] = tuple(tool_spec(t, i) for i, t in enumerate(tools))
        self.policy = budget_policy(policy)
        self.policy_version = policy_version(self.policy)
        self.agent = AgentSpec(agent_id, "1", instructions)
        self.principal = principal
        #: The lease owner this engine's runs are claimed for.
        self.owner = owner if owner is not None else _owner()
        if estimator is None:
            encodings = {self.model.model_id: entry.encoding} if entry.encoding else None
            # (the metaclass takes the keywords; mypy reads the class body only)
            estimator = cast(Estimator, cast(Any, TokenEstimator)(encodings=encodings))
        self.estimator = estimator
        self.planner = ContextPlanner(store, estimator=estimator, policy=self.policy, clock=clock)
        self.builder = ContextBuilder(self.planner, estimator=estimator, clock=clock)
        self.loop = ContextLoop(
            store,
            planner=self.planner,
            builder=self.builder,
            # A summarizer (a router) makes compaction model-backed (ADR 0026).
            compactor=StructuredCompactor(estimator)
            if summarizer is None
            else ModelCompactor(estimator, summarizer),
            estimator=estimator,
        )
        self._owns_store = owns_store
        #: Sessions whose provider usage this engine's estimator holds (``calibrate``).
        self._calibrated: set[str] = set()

    @classmethod
    def open(cls, store: str | Store, *, model: str | ResolvedModel, **config: Any) -> Opening:
        """Open ``store`` (a URL: ``sqlite:///agent.db``, ``postgresql://...``, ``memory://``; or
        an open ``Store``, which the engine then leaves open) for an agent of ``model``. The
        rest is ``Engine``'s keyword arguments. Await it, or use it with ``async with``."""
        return Opening(cls, store, model, config)

    @classmethod
    def open_sync(cls, store: str | Store, *, model: str | ResolvedModel, **config: Any) -> BlockingEngine:
        """``open``'s blocking twin, for synchronous runtimes: the engine runs on an event loop
        in a thread of its own, and every call of the ``BlockingEngine`` waits for its result."""
        from .blocking import BlockingEngine

        return BlockingEngine.open(store, model=model, **config)

    def session(self, session_id: str | None = None, *, principal: Principal | None = None) -> Session:
        """A handle on session ``session_id`` (a new id when ``None``), acting for ``principal``."""
        return Session(self, session_id or uuid.uuid4().hex, principal or self.principal)

    async def resume(
        self, run_id: str, *, principal: Principal | None = None, session_id: str | None = None
    ) -> Turn:
        """Pick up run ``run_id`` where it stands, in this process: claim it (a new lease epoch,
        which fences the previous owner) and load its latest checkpoint; ``RunNotFound`` when
        the store has no such run. ``session_id`` is needed only for runs whose checkpoints
        were written with ``CTXENGINE_WRITE_FORMAT`` pinned below 3."""
        found = await find_run(self.store, run_id, self.owner, session_id=session_id)
        await self.calibrate(found.run.session_id)
        done = found.trigger == "final_completion"
        pending = () if done else open_calls(found.checkpoint, found.run.seed_sequence)
        who = principal or self.principal
        return Turn(self, found.run, found.lease, found.checkpoint, who, pending=pending, done=done)

    async def calibrate(self, session_id: str) -> None:
        """Reconcile the estimator with the usage the session's log records (``report_usage``'s
        events), once per session and engine, unless this engine served the session already.

        A request's budget is counted through the estimator's corrections (ADR 0012), which a
        worker learns from the usage it reports. A run resumed in a fresh process learns the
        session's so far from the log, so that it builds the requests the worker it replaces
        would have built, had that worker served only this session."""
        if session_id in self._calibrated:
            return
        self._calibrated.add(session_id)
        for event in await self.store.events.read(session_id, types=(USAGE_REPORTED,)):
            usage = stored_usage(event)
            if usage.estimated > 0:
                self.estimator.reconcile(f"{usage.model_id}#{usage.counting}", usage.estimated, usage.actual)

    async def plan(self, session_id: str, principal: Principal) -> ContextPlan:
        """The session's plan for this agent (written once per epoch; the same identity reads it)."""
        return await self.planner.plan(
            session_id, self.agent, principal, self.model, self.tools, policy_version=self.policy_version
        )

    async def close(self) -> None:
        """Close the store, when the engine opened it."""
        if self._owns_store:
            await self.store.close()

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class Opening:
    """``Engine.open``'s result: await it for the engine, or enter it (``async with``) to close
    the engine on the way out."""

    def __init__(
        self, cls: type[Engine], store: str | Store, model: str | ResolvedModel, config: Any
    ) -> None:
        self._args = (cls, store, model, dict(config))
        self._engine: Engine | None = None

    async def _open(self) -> Engine:
        cls, store, model, config = self._args
        if isinstance(store, str):
            opened = await open_store(store, clock=config.get("clock"))
            try:
                return cls(opened, model=model, owns_store=True, **config)
            except BaseException:
                await opened.close()
                raise
        return cls(store, model=model, **config)

    def __await__(self) -> Generator[Any, None, Engine]:
        return self._open().__await__()

    async def __aenter__(self) -> Engine:
        self._engine = await self._open()
        return self._engine

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._engine is not None:
            await self._engine.close()


class Session:
    """A handle on one session: its turns, one after another."""

    def __init__(self, engine: Engine, session_id: str, principal: Principal) -> None:
        self.engine = engine
        self.session_id = session_id
        self.principal = principal
        #: The turn this handle started last.
        self.current: Turn | None = None

    async def turn(self, message: Any, *, run_id: str | None = None) -> Turn:
        """Start a turn from the user's ``message`` (text, a dict or SDK message in OpenAI or
        Anthropic shape, a LangChain ``HumanMessage`` or a ``UserMessage``): append it, claim
        the run and write its first checkpoint, in one commit. ``run_id`` (a new one when
        ``None``) names the run for ``Engine.resume``; starting the same ``run_id`` again appends
        the message once."""
        current = self.current
        if current is not None and current.pending:
            call = current.pending[0]
            raise OrphanedToolPair(
                call.call_id,
                len(current.checkpoint.conversation),
                f"run {current.run_id!r} has {len(current.pending)} tool call(s) without a result: "
                "record each with tool_result() (and the model's answer) before the next turn",
            )
        engine = self.engine
        engine._calibrated.add(self.session_id)  # it learns this session's usage as it goes
        message = user_message(message, self.principal.principal_id)
        run_id = run_id or uuid.uuid4().hex
        await engine.plan(self.session_id, self.principal)
        run, lease, checkpoint = await engine.loop.start_run(
            self.session_id,
            run_id,
            message,
            self.principal,
            owner=engine.owner,
            derivation_key=f"user:{run_id}",
        )
        self.current = Turn(engine, run, lease, checkpoint, self.principal, planned=True)
        return self.current

    def __repr__(self) -> str:
        return f"Session({self.session_id!r})"


__all__ = ["DEFAULT_INSTRUCTIONS", "DEFAULT_PRINCIPAL", "Engine", "Opening", "Session"]
