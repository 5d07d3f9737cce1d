"""One turn of a session: a run, from the user's message to the model's last answer (issue 41).

A turn goes: ``request()`` (the budgeted request, compacting under pressure), the caller
sends it, ``record(response)`` (the model's items, its usage reconciled), then, while the
model called tools, ``tool_result(call, output)`` for each call and ``request()`` again.
Each record is one step of the run (one commit): steps number themselves, and the lease,
the seed and the checkpoint versions stay inside. Calls out of that order raise
``TurnStateError``; a request or a new turn while a call is unanswered, or a result no
call waits for, ``OrphanedToolPair``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..assembly.request import ModelRequest
from ..errors import ModelValidationError, OrphanedToolPair, TurnStateError
from ..model import AssistantMessage, Checkpoint, Principal, RunContext, ToolCall, ToolResult, TrustLevel
from ..providers import to_anthropic_messages, to_openai_chat, to_openai_responses
from ..stores.events import Lease
from .messages import read_reply, text_of

if TYPE_CHECKING:
    from .engine import Engine

#: The wire formats ``Turn.request`` renders, by name.
WIRES: Mapping[str, Callable[..., dict[str, Any]]] = {
    "openai_chat": to_openai_chat,
    "openai_responses": to_openai_responses,
    "anthropic_messages": to_anthropic_messages,
}
#: The wire a provider's models take when ``request()`` is not told one.
DEFAULT_WIRE = {"openai": "openai_chat", "anthropic": "anthropic_messages"}


class Turn:
    """One run of a session, driven a call at a time (not safe to share between tasks)."""

    def __init__(
        self,
        engine: Engine,
        run: RunContext,
        lease: Lease,
        checkpoint: Checkpoint,
        principal: Principal,
        *,
        pending: tuple[ToolCall, ...] = (),
        done: bool = False,
        planned: bool = False,
    ) -> None:
        self.engine = engine
        #: The run at the step the next record takes (the advanced layer's ``RunContext``).
        self.run = run
        self.lease = lease
        #: The run's checkpoint in force.
        self.checkpoint = checkpoint
        self.principal = principal
        self._pending: dict[str, ToolCall] = {c.call_id: c for c in pending}
        self._request: ModelRequest | None = None
        #: The last request built (its ``metadata`` holds the token figures), kept after its
        #: response is recorded; ``None`` before the first.
        self.last_request: ModelRequest | None = None
        self._planned = planned
        self.done = done

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def session_id(self) -> str:
        return self.run.session_id

    @property
    def pending(self) -> tuple[ToolCall, ...]:
        """The model's tool calls that wait for their results, in the order it made them."""
        return tuple(self._pending.values())

    @property
    def text(self) -> str | None:
        """The model's last text in this turn (``None`` before it wrote any)."""
        for item in reversed(self.checkpoint.conversation):
            if item.seq is not None and item.seq <= self.run.seed_sequence:
                return None
            if isinstance(item, AssistantMessage):
                return text_of(item)
        return None

    def _refuse(self, call: str) -> None:
        if self.done:
            raise TurnStateError(
                self.run_id, call, "finished", "the model answered without tool calls; start the next turn"
            )

    async def build(self) -> ModelRequest:
        """The next request as the engine's ``ModelRequest`` (its body budgeted, pair-safe and
        compacted when it did not fit; ``request`` renders it for a provider)."""
        self._refuse("request()")
        if self._pending:
            call = next(iter(self._pending.values()))
            raise OrphanedToolPair(
                call.call_id,
                len(self.checkpoint.conversation),
                f"{len(self._pending)} tool call(s) of run {self.run_id!r} have no result: "
                "record each with tool_result() before the next request",
            )
        engine = self.engine
        if not self._planned:
            await engine.plan(self.session_id, self.principal)
            self._planned = True
        request, self.checkpoint = await engine.loop.build_with_pressure(
            self.run, self.checkpoint, engine.agent, self.principal, lease=self.lease
        )
        self._request = self.last_request = request
        return request

    async def request(self, wire: str | None = None, *, model: str | None = None) -> dict[str, Any]:
        """The next request as ``wire``'s body (``openai_chat``, ``openai_responses``,
        ``anthropic_messages``; by default the model's provider's), ready for its client:
        ``client.chat.completions.create(**body)``, ``client.responses.create(**body)``,
        ``client.messages.create(**body)``."""
        name = wire if wire is not None else DEFAULT_WIRE.get(self.engine.model.provider, "openai_chat")
        render = WIRES.get(name)
        if render is None:
            raise ValueError(f"unknown wire format {name!r}; expected one of {sorted(WIRES)}")
        request = await self.build()
        return render(request, model=model if model is not None else self.engine.model.model)

    async def record(self, response: Any) -> tuple[ToolCall, ...]:
        """Record the model's response to the last request, as the provider's client returned
        it; returns the tool calls to run (none: the turn is finished). Its usage reconciles
        the estimator and is recorded with the prompt cache's counts (ADR 0020)."""
        self._refuse("record()")
        request = self._request
        if request is None:
            state = "awaiting tool results" if self._pending else "awaiting a request"
            raise TurnStateError(
                self.run_id, "record()", state, "record a response to a request built by request()"
            )
        reply = read_reply(response)
        asked = self.run
        await self._step(reply.items, "model_response" if reply.calls else "final_completion")
        # The calls as the log holds them (with their sequences), as a resumed turn finds them.
        logged = self.checkpoint.conversation[len(self.checkpoint.conversation) - len(reply.items) :]
        calls = tuple(i for i in logged if isinstance(i, ToolCall))
        self._request = None
        self._pending = {c.call_id: c for c in calls}
        self.done = not calls
        usage = reply.usage
        if usage is not None:
            await self.engine.loop.report_usage(
                asked,
                request,
                usage.input,
                principal=self.principal,
                cached_read=usage.cached_read,
                cache_write=usage.cache_write,
            )
        return calls

    async def tool_result(
        self,
        call: ToolCall | str,
        output: Any,
        *,
        is_error: bool = False,
        trust: TrustLevel | str = TrustLevel.INTERNAL_TOOL,
    ) -> None:
        """Record a tool call's result (``output``: text, or any JSON value, written as JSON).
        ``trust`` says who produced it: a tool of this runtime by default, ``external_untrusted``
        for text from outside (a web page, a mail), which the request then fences."""
        self._refuse("tool_result()")
        call_id = call.call_id if isinstance(call, ToolCall) else call
        if call_id not in self._pending:
            waiting = ", ".join(self._pending) or "none"
            raise OrphanedToolPair(
                str(call_id),
                len(self.checkpoint.conversation),
                f"no call of run {self.run_id!r} waits for this result (waiting: {waiting})",
            )
        try:
            level = TrustLevel(trust)
        except ValueError:
            raise ModelValidationError("tool_result", "trust", f"unknown trust level {trust!r}") from None
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, sort_keys=True)
        await self._step([ToolResult(call_id, text, is_error=is_error, trust=level)], "tool_completed")
        del self._pending[call_id]

    async def _step(self, items: list[Any] | tuple[Any, ...], trigger: str) -> None:
        self.checkpoint = await self.engine.loop.record_step(
            self.run, self.checkpoint, items, lease=self.lease, trigger=trigger
        )
        self.run = replace(self.run, step=self.run.step + 1)

    def __repr__(self) -> str:
        state = "done" if self.done else f"{len(self._pending)} pending" if self._pending else "open"
        return f"Turn(run_id={self.run_id!r}, session_id={self.session_id!r}, step={self.run.step}, {state})"


__all__ = ["DEFAULT_WIRE", "WIRES", "Turn"]
