"""The session API's blocking twin, for synchronous runtimes (issue 41).

``Engine.open_sync(url, model=...)`` runs an ``Engine`` on an event loop of its own, in a
thread it starts, and each call waits for its result: the same engine, sessions and turns,
with the same results, without ``await``. ``close()`` (or leaving the ``with`` block)
closes the engine and stops the thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

from ..assembly.request import ModelRequest
from ..model import Principal, ResolvedModel, ToolCall, TrustLevel
from ..stores.events import Store
from .engine import Engine, Session
from .turn import Turn

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="ctxengine-engine", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError(
                "a blocking engine call from its own event loop would wait forever; await Engine"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class BlockingTurn:
    """``Turn``, each call waited for."""

    def __init__(self, runner: _LoopThread, turn: Turn) -> None:
        self._runner = runner
        #: The turn itself (its calls are coroutines of the engine's loop).
        self.turn = turn

    @property
    def run_id(self) -> str:
        return self.turn.run_id

    @property
    def session_id(self) -> str:
        return self.turn.session_id

    @property
    def pending(self) -> tuple[ToolCall, ...]:
        return self.turn.pending

    @property
    def done(self) -> bool:
        return self.turn.done

    @property
    def text(self) -> str | None:
        return self.turn.text

    def build(self) -> ModelRequest:
        return self._runner.run(self.turn.build())

    def request(self, wire: str | None = None, *, model: str | None = None) -> dict[str, Any]:
        return self._runner.run(self.turn.request(wire, model=model))

    def record(self, response: Any) -> tuple[ToolCall, ...]:
        return self._runner.run(self.turn.record(response))

    def tool_result(
        self,
        call: ToolCall | str,
        output: Any,
        *,
        is_error: bool = False,
        trust: TrustLevel | str = TrustLevel.INTERNAL_TOOL,
    ) -> None:
        self._runner.run(self.turn.tool_result(call, output, is_error=is_error, trust=trust))

    def __repr__(self) -> str:
        return f"Blocking{self.turn!r}"


class BlockingSession:
    """``Session``, each call waited for."""

    def __init__(self, runner: _LoopThread, session: Session) -> None:
        self._runner = runner
        self.session = session
        self.session_id = session.session_id

    def turn(self, message: Any, *, run_id: str | None = None) -> BlockingTurn:
        return BlockingTurn(self._runner, self._runner.run(self.session.turn(message, run_id=run_id)))


class BlockingEngine:
    """``Engine``, each call waited for; the engine runs on its own thread's event loop."""

    def __init__(self, runner: _LoopThread, engine: Engine) -> None:
        self._runner = runner
        #: The engine itself, with the advanced layer (``store``, ``planner``, ``loop``, ...).
        self.engine = engine

    @classmethod
    def open(cls, store: str | Store, *, model: str | ResolvedModel, **config: Any) -> BlockingEngine:
        runner = _LoopThread()
        try:

            async def opened() -> Engine:
                return await Engine.open(store, model=model, **config)

            return cls(runner, runner.run(opened()))
        except BaseException:
            runner.stop()
            raise

    def session(
        self, session_id: str | None = None, *, principal: Principal | None = None
    ) -> BlockingSession:
        return BlockingSession(self._runner, self.engine.session(session_id, principal=principal))

    def resume(
        self, run_id: str, *, principal: Principal | None = None, session_id: str | None = None
    ) -> BlockingTurn:
        turn = self._runner.run(self.engine.resume(run_id, principal=principal, session_id=session_id))
        return BlockingTurn(self._runner, turn)

    def close(self) -> None:
        """Close the engine and stop its thread (a second call does nothing)."""
        if not self._runner.loop.is_closed():
            try:
                self._runner.run(self.engine.close())
            finally:
                self._runner.stop()

    def __enter__(self) -> BlockingEngine:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


__all__ = ["BlockingEngine", "BlockingSession", "BlockingTurn"]
