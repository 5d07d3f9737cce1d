"""The pure-Python twin of the Rust interop functions (``rust/core/src/interop``); the
message-index cut is in ``message_cut``.

- ``LangChainCounter`` and ``trim``: ``langchain_core``'s ``trim_messages``
  for an additive per-message counter (``count_tokens_approximately`` or
  ``len``), over counts measured once per message and memoized, and the
  pair-safe window inside its result.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .arguments import check_token_limit

# -- the LangChain trim over counts ----------------------------------------------------------

KIND_OTHER, KIND_SYSTEM, KIND_AI, KIND_TOOL = 0, 1, 2, 3


def lc_window(
    counts: Sequence[int],
    max_tokens: int,
    strategy: str,
    *,
    first_is_system: bool,
    include_system: bool,
    end_on: Callable[[int], bool] | None,
    start_on: Callable[[int], bool] | None,
) -> tuple[bool, int, int]:
    """``(system_kept, a, b)``: ``trim_messages`` keeps ``[messages[0]] * system_kept +
    messages[a:b]``, computed as ``langchain_core`` does (the same loops and binary search)
    over prefix sums of additive per-message counts."""
    n = len(counts)
    prefix = [0] * (n + 1)
    for i, c in enumerate(counts):
        prefix[i + 1] = prefix[i] + c
    if strategy == "first":
        if n == 0:
            return False, 0, 0
        if prefix[n] <= max_tokens:
            idx = n
        else:
            left, right = 0, n
            for _ in range(n.bit_length()):
                if left >= right:
                    break
                mid = (left + right + 1) // 2
                if prefix[mid] <= max_tokens:
                    left = mid
                else:
                    right = mid - 1
            idx = left
        if end_on is not None:
            while idx > 0 and not end_on(idx - 1):
                idx -= 1
        return False, 0, idx
    b = n
    if end_on is not None:
        while b > 0 and not end_on(b - 1):
            b -= 1
    if b == 0:
        return False, 0, 0
    system = include_system and first_is_system
    lo = 1 if system else 0
    remaining = max(0, max_tokens - counts[0]) if system else max_tokens
    m = b - lo
    if m == 0:
        return system, b, b
    if prefix[b] - prefix[lo] <= remaining:
        idx = m
    else:
        left, right = 0, m
        for _ in range(m.bit_length()):
            if left >= right:
                break
            mid = (left + right + 1) // 2
            if prefix[b] - prefix[b - mid] <= remaining:
                left = mid
            else:
                right = mid - 1
        idx = left
    a = b - idx
    if start_on is not None:
        while a < b and not start_on(a):
            a += 1
    return system, a, b


def message_reach(
    calls: Sequence[Sequence[str | None] | None], results: Sequence[str | None], start: int
) -> tuple[list[int], list[int], list[bool]]:
    """``(lo, hi, orphan)`` of messages ``start..n`` of a foreign history, paired by position
    (ADR 0019): a result answers the nearest earlier open call with its id. ``lo[i]`` and
    ``hi[i]`` are the first and last message that message ``i`` pairs with (itself
    included); ``orphan[i]`` marks a message no window may hold: a result without an open
    call, a call superseded by a later call with its id while open, a call without an id,
    or a call never answered, except in the last message holding calls when only tool
    results follow it (the open pair, kept). ``calls[i]`` are message ``i``'s call ids,
    ``results[i]`` the call it answers; messages before ``start`` are not looked at."""
    n = len(results)
    lo, hi, orphan = list(range(n)), list(range(n)), [False] * n
    open_calls: dict[str, int] = {}
    never: list[int] = []
    last_calls = -1
    for i in range(start, n):
        ids = calls[i]
        if ids:
            last_calls = i
            for call_id in ids:
                if call_id is None:
                    never.append(i)
                    continue
                earlier = open_calls.get(call_id)
                if earlier is not None:
                    orphan[earlier] = True
                open_calls[call_id] = i
        answered = results[i]
        if answered is not None:
            call = open_calls.pop(answered, None)
            if call is None:
                orphan[i] = True
            else:
                lo[i] = min(lo[i], call)
                hi[call] = max(hi[call], i)
    tail_ok = all(results[j] is not None for j in range(last_calls + 1, n))
    for i in [*open_calls.values(), *never]:
        if not (tail_ok and i == last_calls):
            orphan[i] = True
    return lo, hi, orphan


def safe_suffix(
    reach: tuple[list[int], list[int], list[bool]],
    a: int,
    b: int,
    start_ok: Callable[[int], bool] | None,
) -> int:
    """The smallest ``s >= a`` whose ``[s, b)`` holds no orphan and splits no tool pair (and
    starts where ``start_ok`` allows, unless empty); ``b`` when there is none. ``reach`` is
    ``message_reach`` of the messages from ``a`` on."""
    lo, hi, orphan = reach
    best = b
    low = b  # the first message any of [s, b) pairs with
    for s in range(b - 1, a - 1, -1):
        if orphan[s] or hi[s] >= b:
            break
        low = min(low, lo[s])
        if low >= s and (start_ok is None or start_ok(s)):
            best = s
    return best


def safe_prefix(
    reach: tuple[list[int], list[int], list[bool]],
    e: int,
    end_ok: Callable[[int], bool] | None,
) -> int:
    """The largest ``e2 <= e`` whose ``[0, e2)`` holds no orphan and splits no tool pair (and
    ends where ``end_ok`` allows, unless empty). ``reach`` is ``message_reach`` from 0."""
    _, hi, orphan = reach
    best = 0
    high = -1  # the last message any of [0, i] pairs with
    for i in range(e):
        if orphan[i]:
            break
        high = max(high, hi[i])
        if high <= i and (end_ok is None or end_ok(i)):
            best = i + 1
    return best


# -- count_tokens_approximately, one message at a time --------------------------------------


class LangChainClasses:
    """The ``langchain_core.messages`` classes the count and the pairing look at."""

    __slots__ = ("ai", "base", "chat", "function", "human", "system", "tool")

    def __init__(self, messages_module: Any) -> None:
        self.base = messages_module.BaseMessage
        self.ai = messages_module.AIMessage
        self.human = messages_module.HumanMessage
        self.tool = messages_module.ToolMessage
        self.system = messages_module.SystemMessage
        self.function = messages_module.FunctionMessage
        self.chat = messages_module.ChatMessage

    def count(self, message: Any) -> int:
        """``approximate_count(message, self)``: what the native counter asks of
        a message outside its fast path (it imports nothing from ``ctxengine``)."""
        return approximate_count(message, self)

    def pairing(self, message: Any) -> tuple[tuple[str | None, ...] | None, str | None]:
        """``_pairing(message, self)``, each id as its ``str``: what the native counter asks of
        a message whose call ids are not all str or ``None``."""
        _, ids, answers = _pairing(message, self)
        calls = None if ids is None else tuple(None if i is None else str(i) for i in ids)
        return calls, None if answers is None else str(answers)


def _role(m: Any, c: LangChainClasses) -> str:
    if isinstance(m, c.ai):
        return "assistant"
    if isinstance(m, c.human):
        return "user"
    if isinstance(m, c.tool):
        return "tool"
    if isinstance(m, c.system):
        role = m.additional_kwargs.get("__openai_role__", "system")
        if not isinstance(role, str):
            raise TypeError(f"Expected '__openai_role__' to be a str, got {type(role).__name__}")
        return role
    if isinstance(m, c.function):
        return "function"
    if isinstance(m, c.chat):
        return str(m.role)
    raise ValueError(f"Unknown BaseMessage type {m.__class__}.")


def approximate_count(m: Any, c: LangChainClasses) -> int:
    """``count_tokens_approximately([m])`` with its default settings, computed directly."""
    content = m.content
    chars = 0
    tokens = 0
    if isinstance(content, str):
        chars += len(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                chars += len(block)
            elif isinstance(block, dict):
                kind = block.get("type", "")
                if kind in ("image", "image_url"):
                    tokens += 85
                elif kind == "text":
                    chars += len(block.get("text", ""))
                else:
                    chars += len(repr(block))
            else:
                chars += len(repr(block))
    else:
        chars += len(repr(content))
    if isinstance(m, c.ai) and not isinstance(content, list) and m.tool_calls:
        chars += len(repr(m.tool_calls))
    if isinstance(m, c.tool):
        chars += len(m.tool_call_id)
    chars += len(_role(m, c))
    if m.name:
        chars += len(m.name)
    return tokens + math.ceil(chars / 4.0) + 3


def _pairing(m: Any, c: LangChainClasses) -> tuple[int, tuple[str | None, ...] | None, str | None]:
    if isinstance(m, c.ai):
        ids = tuple(tc.get("id") for tc in m.tool_calls) + tuple(tc.get("id") for tc in m.invalid_tool_calls)
        return KIND_AI, ids or None, None
    if isinstance(m, c.tool):
        return KIND_TOOL, None, m.tool_call_id
    if isinstance(m, c.system):
        return KIND_SYSTEM, None, None
    return KIND_OTHER, None, None


#: A memo entry's estimated memory beside what its count measures (see ``entry_size``).
ENTRY_OBJECTS = 256


def entry_size(count: int, ids: tuple[str | None, ...] | None, answers: str | None) -> int:
    """The memory a memo entry is estimated to hold: ``ENTRY_OBJECTS``, its call ids, and four
    bytes a token of its count (the text the approximate count measured)."""
    held = sum(8 if i is None else len(str(i)) + 24 for i in ids) if ids else 0
    if answers is not None:
        held += len(str(answers)) + 24
    return ENTRY_OBJECTS + held + 4 * max(count, 0)


class LangChainCounter:
    """Per-message facts (count, kind, call ids), memoized by message identity.

    An entry holds a weak reference to the message (whose callback removes the entry when
    the message goes: the memo never keeps a message alive; a message type without weak
    references is held) and the attribute values it was measured from (``content``,
    ``name``, and ``tool_calls``/``tool_call_id``/``additional_kwargs``); it is reused only
    while the message holds those very objects, so reassigning a field recounts it.
    Mutating a content list in place is not seen: messages are treated as values, as
    LangGraph treats them. The entries hold at most ``max_bytes`` (``entry_size`` each; two
    generations: the older is dropped when the newer holds half).
    """

    __slots__ = ("__weakref__", "_c", "_forget", "_max_bytes", "_new", "_new_bytes", "_old", "_old_bytes")

    def __init__(self, classes: LangChainClasses, max_bytes: int = 16 << 20) -> None:
        self._c = classes
        self._max_bytes = max_bytes
        self._new: dict[int, tuple[Any, ...]] = {}
        self._old: dict[int, tuple[Any, ...]] = {}
        self._new_bytes = self._old_bytes = 0
        me = weakref.ref(self)

        def forget(ref: weakref.KeyedRef[Any, Any], me: weakref.ref[LangChainCounter] = me) -> None:
            counter = me()
            if counter is not None:
                counter._gone(ref)

        self._forget = forget

    @property
    def nbytes(self) -> int:
        """The estimated bytes the memo's entries hold."""
        return self._new_bytes + self._old_bytes

    @property
    def max_bytes(self) -> int:
        """The bound of ``nbytes``; setting it lower drops entries to keep within it."""
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self._max_bytes = value
        if self.nbytes > value:
            self._new, self._old = {}, {}
            self._new_bytes = self._old_bytes = 0

    def _gone(self, ref: weakref.KeyedRef[Any, Any]) -> None:
        """A message the memo counted is gone: its entry goes too."""
        key = ref.key
        entry = self._new.get(key)
        if entry is not None and entry[0] is ref:
            del self._new[key]
            self._new_bytes -= entry[8]
            return
        entry = self._old.get(key)
        if entry is not None and entry[0] is ref:
            del self._old[key]
            self._old_bytes -= entry[8]

    def _extra(self, m: Any) -> Any:
        c = self._c
        if isinstance(m, c.ai):
            return m.tool_calls
        if isinstance(m, c.tool):
            return m.tool_call_id
        return m.additional_kwargs

    def facts(
        self, messages: Sequence[Any], use_len: bool
    ) -> tuple[list[int], list[int], list[Any], list[Any]] | None:
        """``(counts, kinds, calls, results)`` of each message; ``None`` if one is not a message."""
        counts: list[int] = []
        kinds: list[int] = []
        calls: list[Any] = []
        results: list[Any] = []
        c = self._c
        base = c.base
        keyed = weakref.KeyedRef
        for m in messages:
            if not isinstance(m, base):
                return None
            key = id(m)
            entry = self._new.get(key)
            if entry is None:
                entry = self._old.pop(key, None)
                if entry is not None:
                    self._old_bytes -= entry[8]
                    self._remember(key, entry)
            content, name, extra = m.content, m.name, self._extra(m)
            held = None if entry is None else entry[0]
            if (
                entry is None
                or (held() if type(held) is keyed else held) is not m
                or entry[1] is not content
                or entry[2] is not name
                or entry[3] is not extra
            ):
                kind, ids, answers = _pairing(m, c)
                count = approximate_count(m, c)
                try:
                    ref: Any = keyed(m, self._forget, key)
                except TypeError:  # a message type without weak references: held
                    ref = m
                size = entry_size(count, ids, answers)
                entry = (ref, content, name, extra, count, kind, ids, answers, size)
                self._remember(key, entry)
            counts.append(1 if use_len else entry[4])
            kinds.append(entry[5])
            calls.append(entry[6])
            results.append(entry[7])
        return counts, kinds, calls, results

    def _remember(self, key: int, entry: tuple[Any, ...]) -> None:
        half = self._max_bytes // 2
        size = entry[8]
        if size > half:
            old = self._new.pop(key, None)
            if old is not None:
                self._new_bytes -= old[8]
            return  # an entry over half the bound is not kept
        if self._new_bytes + size > half:
            self._old, self._old_bytes = self._new, self._new_bytes
            self._new, self._new_bytes = {}, 0
        old = self._new.get(key)
        if old is not None:
            self._new_bytes -= old[8]
        self._new[key] = entry
        self._new_bytes += size

    def __len__(self) -> int:
        return len(self._new) + len(self._old)


def trim(
    counter: LangChainCounter,
    messages: Sequence[Any],
    max_tokens: int,
    strategy: str,
    use_len: bool,
    include_system: bool,
    end_on: Callable[[Any], bool] | None,
    start_on: Callable[[Any], bool] | None,
) -> tuple[bool, int, int] | None:
    """``(system_kept, start, end)`` of the pair-safe trim (see ``lc_window``, ``safe_suffix``);
    ``None`` when ``messages`` is not a list of messages (the caller converts it first).
    ``max_tokens`` is checked first (``check_token_limit``)."""
    max_tokens = check_token_limit("trim_messages", "max_tokens", max_tokens)
    facts = counter.facts(messages, use_len) if isinstance(messages, list) else None
    if facts is None:
        return None
    counts, kinds, calls, results = facts
    end_at = None if end_on is None else (lambda i: end_on(messages[i]))
    start_at = None if start_on is None else (lambda i: start_on(messages[i]))
    system, a, b = lc_window(
        counts,
        max_tokens,
        strategy,
        first_is_system=bool(kinds) and kinds[0] == KIND_SYSTEM,
        include_system=include_system,
        end_on=end_at,
        start_on=start_at,
    )
    # Pairs are read from the window's start to the history's end: whether a call is
    # answered after the window, or never (the open pair), decides what the window may hold.
    if strategy == "first":
        return False, 0, safe_prefix(message_reach(calls, results, 0), b, end_at)
    return system, safe_suffix(message_reach(calls, results, a), a, b, start_at), b


__all__ = [
    "KIND_AI",
    "KIND_OTHER",
    "KIND_SYSTEM",
    "KIND_TOOL",
    "LangChainClasses",
    "LangChainCounter",
    "approximate_count",
    "lc_window",
    "message_reach",
    "safe_prefix",
    "safe_suffix",
    "trim",
]
