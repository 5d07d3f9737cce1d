"""``trim_messages``: LangChain's history trimmer, fast and pair-safe; and
``ContextMiddleware`` (``langchain_agents``), the engine's body for LangChain v1 agents.

``from ctxengine.integrations.langchain import trim_messages`` replaces
``from langchain_core.messages import trim_messages`` with the same signature
and the same result, except that it never returns a history that splits a
tool call from its result (which providers reject).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..core.memory import MemoryLimits, memory_limits, on_memory_limits
from ..interop._backend import active_name
from ..reference import interop as reference

if TYPE_CHECKING:
    from .langchain_agents import ContextMiddleware

_STATE: dict[str, Any] = {}


def _lc() -> Any:
    from langchain_core import messages

    return messages


def _counter(name: str) -> Any:
    """The per-backend message-facts memo (one per process and backend), bounded by the
    process's ``MemoryLimits.trim_bytes``."""
    counter = _STATE.get(name)
    if counter is None:
        classes = reference.LangChainClasses(_lc())
        limit = memory_limits().trim_bytes
        if name == "rust":
            from .._core import LangChainCounter

            counter = LangChainCounter(classes, limit)
        else:
            counter = reference.LangChainCounter(classes, limit)
        _STATE[name] = counter
    return counter


def _limits_changed(limits: MemoryLimits) -> None:
    for counter in _STATE.values():
        counter.max_bytes = limits.trim_bytes


on_memory_limits(_limits_changed)


def _native_trim(name: str) -> Callable[..., tuple[bool, int, int] | None]:
    if name == "rust":
        from .._core import langchain_trim

        return langchain_trim
    return reference.trim


def _type_check(type_: Any) -> Callable[[Any], bool] | None:
    """``langchain_core``'s ``_is_message_type`` for one ``start_on``/``end_on`` value."""
    if not type_:
        return None
    types = [type_] if isinstance(type_, str | type) else list(type_)
    names = {t for t in types if isinstance(t, str)}
    classes = tuple(t for t in types if isinstance(t, type))
    return lambda m: m.type in names or isinstance(m, classes)


def _native_counter(token_counter: Any) -> str | None:
    """``"approximate"`` or ``"len"`` when the counter is one this module counts itself."""
    from langchain_core.messages.utils import count_tokens_approximately

    if token_counter is count_tokens_approximately or token_counter == "approximate":
        return "approximate"
    if token_counter is len:
        return "len"
    return None


def _pairing(messages: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    lc = _lc()
    calls: list[Any] = []
    results: list[Any] = []
    for m in messages:
        if isinstance(m, lc.AIMessage):
            ids = [tc.get("id") for tc in m.tool_calls] + [tc.get("id") for tc in m.invalid_tool_calls]
            calls.append(ids or None)
        else:
            calls.append(None)
        results.append(m.tool_call_id if isinstance(m, lc.ToolMessage) else None)
    return calls, results


def _after(messages: list[Any], body: list[Any]) -> tuple[list[Any], list[Any]]:
    """The calls and results of the messages after ``body``'s last one in ``messages`` (found
    by identity; a partial copy is followed by a message that is no tool result, so a call
    left open in it is no open pair)."""
    if not body:
        return [], []
    for k in range(len(messages) - 1, -1, -1):
        if messages[k] is body[-1]:
            return _pairing(messages[k + 1 :])
    return [None], [None]


def _pair_safe(
    messages: list[Any], result: list[Any], strategy: str, start_on: Any, end_on: Any, include_system: bool
) -> list[Any]:
    """The pair-safe part of a result ``langchain_core`` computed (custom counters, partial)."""
    lc = _lc()
    kept_system = (
        strategy == "last"
        and include_system
        and bool(messages)
        and isinstance(messages[0], lc.SystemMessage)
        and bool(result)
        and result[0] is messages[0]
    )
    head = 1 if kept_system else 0
    body = result[head:]
    calls, results = _pairing(body)
    later_calls, later_results = _after(messages, body)
    reach = reference.message_reach(calls + later_calls, results + later_results, 0)
    if strategy == "first":
        end_ok = _type_check(end_on)
        e = reference.safe_prefix(reach, len(body), None if end_ok is None else lambda i: end_ok(body[i]))
        return result[: head + e]
    start_ok = _type_check(start_on)
    s = reference.safe_suffix(reach, 0, len(body), None if start_ok is None else lambda i: start_ok(body[i]))
    return result[:head] + body[s:]


def trim_messages(
    messages: Any = None,
    *,
    max_tokens: int,
    token_counter: Any,
    strategy: str = "last",
    allow_partial: bool = False,
    end_on: Any = None,
    start_on: Any = None,
    include_system: bool = False,
    text_splitter: Any = None,
) -> Any:
    """Trim ``messages`` below ``max_tokens`` as ``langchain_core.messages.trim_messages`` does,
    keeping tool calls and their results together.

    Same signature and, wherever LangChain's result keeps every tool call with its
    result, the same result (the same message objects). Where LangChain's result would
    orphan a tool pair (a ``ToolMessage`` whose ``AIMessage`` was cut, or an
    ``AIMessage`` tool call whose result was cut, e.g. by ``end_on``), this returns
    the longest pair-safe part of it instead: with ``strategy="last"`` a shorter
    suffix (that still starts on ``start_on``), with ``"first"`` a shorter prefix
    (that still ends on ``end_on``); a system message kept by ``include_system`` is
    kept as LangChain keeps it.

    Orphans already in ``messages`` follow the rule ``openai_chat.select_history``
    follows (docs/interop.md, ADR 0019): pairs pair by position (a ``ToolMessage``
    answers the nearest earlier open call with its id, so an id may recur once its pair
    is complete); a result without an open call, a call never answered and a call
    superseded while open are orphans, and the result starts after the last one (a
    suffix that must begin after an orphan near the end is short, or empty); the calls
    of the last ``AIMessage`` with tool calls, followed only by tool results, are the
    open pair and are kept unanswered.

    ``token_counter=count_tokens_approximately`` (or ``"approximate"``) and
    ``token_counter=len`` are recognised and counted by ctxengine, once per message
    object (memoized by identity: trimming the same growing list again in an agent
    loop counts only the new messages; reassigning a message's ``content``, ``name``
    or tool fields recounts it, mutating a content list in place does not). The memo
    never keeps a message alive, and its entries hold at most
    ``MemoryLimits.trim_bytes`` (``ctxengine.set_memory_limits(trim_bytes=...)``). Any other
    counter, a model, ``allow_partial=True`` or a ``text_splitter`` is honoured exactly:
    ``langchain_core`` trims and the pair-safe part of its result is returned.

    Called without ``messages`` it returns a ``Runnable``, as LangChain's does.
    """
    kwargs = {
        "max_tokens": max_tokens,
        "token_counter": token_counter,
        "strategy": strategy,
        "allow_partial": allow_partial,
        "end_on": end_on,
        "start_on": start_on,
        "include_system": include_system,
        "text_splitter": text_splitter,
    }
    if messages is None:
        from langchain_core.runnables import RunnableLambda

        return RunnableLambda(functools.partial(trim_messages, **kwargs), name="trim_messages")
    if start_on and strategy == "first":
        raise ValueError("start_on parameter is only valid with strategy='last'")
    if include_system and strategy == "first":
        raise ValueError("include_system parameter is only valid with strategy='last'")
    if strategy not in ("first", "last"):
        raise ValueError(f"Unrecognized {strategy=}. Supported strategies are 'last' and 'first'.")
    native = None if allow_partial else _native_counter(token_counter)
    if native is None:
        from langchain_core.messages import trim_messages as lc_trim

        messages = _lc().convert_to_messages(messages)
        result = lc_trim(messages, **kwargs)
        return _pair_safe(messages, result, strategy, start_on, end_on, include_system)
    name = active_name()
    end_check, start_check = _type_check(end_on), _type_check(start_on)
    trim = _native_trim(name)
    args = (max_tokens, strategy, native == "len", include_system, end_check, start_check)
    window = trim(_counter(name), messages, *args)
    if window is None:  # not a list of messages yet: convert as LangChain does, once
        messages = _lc().convert_to_messages(messages)
        window = trim(_counter(name), messages, *args)
    if window is None:  # pragma: no cover - convert_to_messages returns a list of messages
        raise TypeError("trim_messages: messages did not convert to a list of BaseMessage")
    system, start, end = window
    kept = messages[start:end]
    return [messages[0], *kept] if system else kept


def __getattr__(name: str) -> Any:
    # The agent middleware needs ``langchain`` (v1) itself; ``trim_messages`` only
    # ``langchain_core``: the middleware is loaded when asked for.
    if name == "ContextMiddleware":
        from .langchain_agents import ContextMiddleware

        return ContextMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ContextMiddleware", "trim_messages"]
