"""``ctxengine bench``, issue 15 rows: foreign histories.

- ``trim_messages`` on 1,000 / 10,000 / 100,000 LangChain messages with
  ``count_tokens_approximately`` (``strategy="last"``, ``start_on="human"``,
  a budget of half the history): ctxengine's drop-in against
  ``langchain_core``'s, warm (the same list trimmed again after one append, as
  an agent loop does) and cold (message objects never seen);
- 10,000 OpenAI Chat dict messages -> the cut index, cold, conversion included.

Tooling (it belongs with the CLI), so it imports the engine by absolute
paths only. The sessions are ``synthetic_session`` (user, tool call, tool result,
assistant; 200-500 bytes an item) in each format. Shared with
``benches/bench_interop.py``.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Callable
from typing import Any

from ctxengine.interop import _backend as backends

TRIM_SIZES = (1_000, 10_000, 100_000)
CHAT_ITEMS = 10_000
#: As benches/bench_core.py: a budget that keeps about half of a 10,000-item session.
CHAT_HISTORY_TOKENS = 600_000
CHAT_MODEL = "bench:model-200k"


def synthetic_session(n_items: int, tag: str) -> list[Any]:
    """The benchmarks' synthetic session (``synthetic.synthetic_session``, wherever the
    tooling keeps it: ``ctxengine.cli.synthetic`` in the layered package)."""
    for path in ("ctxengine.cli.synthetic", "ctxengine.synthetic"):
        try:
            found = importlib.import_module(path)
        except ImportError:
            continue
        items: list[Any] = found.synthetic_session(n_items, tag=tag)
        return items
    raise ImportError("ctxengine's synthetic sessions are not importable")


def langchain_session(n_items: int, tag: str) -> list[Any]:
    """A synthetic session as LangChain messages (tool calls as ``AIMessage.tool_calls``)."""
    from ctxengine.interop import langchain

    items = synthetic_session(n_items, tag=tag)
    # The synthetic session's tool results are the runtime's own (``internal_tool``).
    messages: list[Any] = langchain.from_items(items, tool_trust="internal_tool")
    return messages


def chat_session(n_items: int, tag: str) -> list[dict[str, Any]]:
    """A synthetic session as OpenAI Chat dict messages."""
    from ctxengine.interop import openai_chat

    return openai_chat.from_items(synthetic_session(n_items, tag=tag), tool_trust="internal_tool")


def trim_options(messages: list[Any]) -> dict[str, Any]:
    from langchain_core.messages.utils import count_tokens_approximately

    return {
        "max_tokens": count_tokens_approximately(messages) // 2,
        "token_counter": count_tokens_approximately,
        "strategy": "last",
        "start_on": "human",
    }


def ours() -> Callable[..., list[Any]]:
    from ctxengine.integrations.langchain import trim_messages

    return trim_messages


def theirs() -> Callable[..., list[Any]]:
    from langchain_core.messages import trim_messages

    return trim_messages


def one_more(messages: list[Any], k: int) -> None:
    """What an agent loop does between two trims: append the next message."""
    from langchain_core.messages import HumanMessage

    messages.append(HumanMessage(f"and one more thing ({k})"))


def chat_cut(messages: list[dict[str, Any]], estimator: Any) -> int:
    from ctxengine.interop import openai_chat

    return openai_chat.select_history(messages, 0, CHAT_HISTORY_TOKENS, estimator, CHAT_MODEL)


def _trim_timings(
    trim: Callable[..., list[Any]],
    base: list[Any],
    n: int,
    time_call: Callable[..., Any],
    repeats: int,
    max_seconds: float,
) -> tuple[Any, Any]:
    """``(warm, cold)`` timings of one ``trim_messages`` on an ``n``-message session."""
    opts = trim_options(base)
    messages = list(base)
    trim(messages, **opts)
    appended = iter(range(10**9))

    def warm() -> None:
        one_more(messages, next(appended))
        trim(messages, **opts)

    fresh = iter(range(10**9))

    def new_session() -> tuple[list[Any]]:
        return (langchain_session(n, tag=f"trim-cold-{n}-{next(fresh)}"),)

    return (
        time_call(warm, repeats=repeats * 2, max_seconds=max_seconds),
        time_call(lambda m: trim(m, **opts), repeats=repeats, max_seconds=max_seconds, setup=new_session),
    )


def _chat_timing(name: str, time_call: Callable[..., Any], repeats: int, max_seconds: float) -> Any:
    fresh = iter(range(10**9))

    def new_dicts() -> tuple[list[dict[str, Any]], Any]:
        return chat_session(CHAT_ITEMS, tag=f"chat-{name}-{next(fresh)}"), backends.module(
            name
        ).TokenEstimator()

    return time_call(chat_cut, repeats=repeats, max_seconds=max_seconds, setup=new_dicts)


def run_interop(
    repeats: Callable[[int], int],
    time_call: Callable[..., Any],
    max_seconds: float,
    sizes: tuple[int, ...] = TRIM_SIZES,
    progress: Callable[[str], None] = lambda _label: None,
) -> dict[str, dict[str, Any]]:
    """``{measure: {impl: Timing}}``: ``trim_warm_<n>``, ``trim_cold_<n>``, ``chat_cut_cold``."""
    out: dict[str, dict[str, Any]] = {}
    previous = backends.active_name()
    try:
        backends.use("rust")
        for n in sizes:
            progress(f"trim_messages {n:,}")
            base = langchain_session(n, tag=f"trim-{n}")
            for impl, trim in (("ctxengine", ours()), ("langchain", theirs())):
                warm, cold = _trim_timings(trim, base, n, time_call, repeats(n), max_seconds)
                out.setdefault(f"trim_warm_{n}", {})[impl] = warm
                out.setdefault(f"trim_cold_{n}", {})[impl] = cold
        # The trim rows' sessions (up to 100,000 LangChain messages, objects the collector
        # tracks) are not this row's: let them go before it is timed.
        base = []
        gc.collect()
        progress("openai chat cut")
        for name in backends.BACKENDS:
            backends.use(name)
            reps = repeats(CHAT_ITEMS) if name == "rust" else 3
            out.setdefault("chat_cut_cold", {})[name] = _chat_timing(name, time_call, reps, max_seconds)
    finally:
        backends.use(previous)
    return out


def interop_markdown(spec: dict[str, dict[str, Any]], sizes: tuple[int, ...] = TRIM_SIZES) -> list[str]:
    """The README's "Foreign histories" table."""
    if not any(k.startswith(("trim_", "chat_")) for k in spec):
        return []

    def ms(t: Any) -> str:
        if t is None:
            return "-"
        return f"{t.median_ms:,.3f} ms" if t.median_ms < 10 else f"{t.median_ms:,.1f} ms"

    def ratio(a: Any, b: Any) -> tuple[str, float | None]:
        if a is None or b is None or a.median_ms <= 0:
            return "-", None
        x = b.median_ms / a.median_ms
        return f"{x:,.1f}x", x

    lines = [
        "## Foreign histories (issue 15)",
        "",
        '`trim_messages` with `count_tokens_approximately` (`strategy="last"`, `start_on="human"`, '
        "half the history's tokens); warm: the same list trimmed again after one append.",
        "",
        "| what | ctxengine | langchain-core | ratio | target | |",
        "|---|---:|---:|---:|---|---|",
    ]
    for n in sizes:
        for mode, target in (("warm", 20.0), ("cold", 5.0)):
            row = spec.get(f"trim_{mode}_{n}", {})
            a, b = row.get("ctxengine"), row.get("langchain")
            text, x = ratio(a, b)
            goal = f"≥ {target:.0f}x" if n == 10_000 else "-"
            verdict = "-" if n != 10_000 or x is None else ("met" if x >= target else "**missed**")
            what = f"`trim_messages`, {n:,} messages, {mode}"
            lines.append(f"| {what} | {ms(a)} | {ms(b)} | {text} | {goal} | {verdict} |")
    row = spec.get("chat_cut_cold", {})
    rust, ref = row.get("rust"), row.get("python")
    text, _ = ratio(rust, ref)
    verdict = "-" if rust is None else ("met" if rust.median_ms <= 10 else "**missed**")
    lines.append(
        f"| 10,000 OpenAI dicts -> cut index, cold (rust; reference in the second column) "
        f"| {ms(rust)} | {ms(ref)} | {text} | ≤ 10 ms | {verdict} |"
    )
    return lines


__all__ = [
    "TRIM_SIZES",
    "chat_session",
    "interop_markdown",
    "langchain_session",
    "run_interop",
    "trim_options",
]
