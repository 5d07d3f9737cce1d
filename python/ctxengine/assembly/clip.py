"""Oversize items, shown clipped (ADR 0021; plans of builder version 2).

An item whose render counts more than the plan's per-item cap
(``item_cap``) stays whole in the log and is shown as the head and tail of
its content inside its own envelope, marked truncated with its event and
its byte length (``plan.envelope.clipped_envelope``). Clipping is pure
Python over the item's text, so both backends send the same bytes, and it is
decided without rendering or counting a huge item whole:

- content of at most ``cap`` UTF-8 bytes is never clipped (a token is at
  least a byte);
- content of at most ``COUNTED_BYTES_PER_TOKEN * cap`` bytes is clipped
  when its whole render counts more than ``cap`` (raw estimate);
- larger content is always clipped, uncounted.

The head and tail take ``B`` bytes between them (half each, cut at
character boundaries); ``B`` starts from the item's bytes per token and
shrinks in proportion until the clipped render counts at most ``cap`` raw
tokens. Raw counts, not corrected ones: the same item and cap give the
same bytes on every worker whatever its calibration. The outcome is kept in
the render cache by (item digest, region class, cap, counting key).
"""

from __future__ import annotations

import math
from typing import Any

from ..core.budget import ITEM_CAP_FLOOR, BudgetPolicy, ContextBudget
from ..model import AssistantMessage, ConversationItem, SystemMessage, ToolResult, UserMessage, content_text
from .envelope import clipped_envelope
from .render import digest_of
from .render_cache import RenderCache
from .request import RenderedItem

#: Content up to this many bytes per token of the cap is counted before it is clipped;
#: larger content is clipped uncounted.
COUNTED_BYTES_PER_TOKEN = 16
#: The first guess of the head and tail's bytes per token of the cap (uncounted content).
FIRST_BYTES_PER_TOKEN = 3
#: Shrinking steps before the head and tail are dropped altogether (only the marks stay).
MAX_SHRINKS = 12
_NOT_CLIPPED = False


def item_cap(budget: ContextBudget, policy: BudgetPolicy) -> int:
    """The per-item cap in tokens: ``item.max_ratio`` of the usable body, at least ``ITEM_CAP_FLOOR``."""
    return max(ITEM_CAP_FLOOR, math.floor(budget.usable_body_tokens * policy.item_max_ratio))


def _source_and_role(item: ConversationItem) -> tuple[str, str] | None:
    """The envelope source and role of a text item (as ``render_conversation`` spells them)."""
    if isinstance(item, ToolResult):
        return f"tool:{item.call_id}", "tool"
    if isinstance(item, UserMessage):
        return "user", "user"
    if isinstance(item, AssistantMessage):
        return "assistant", "assistant"
    if isinstance(item, SystemMessage):
        return "system", "system"
    return None  # tool calls (structured arguments) and reasoning are never clipped


def utf8_length(text: str) -> int:
    """The UTF-8 byte length of ``text`` (without encoding an ASCII text)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def head_and_tail(text: str, budget: int) -> tuple[str, str]:
    """The first ``budget // 2`` and last ``budget - budget // 2`` UTF-8 bytes of ``text``,
    each cut back to a whole character (reads only the ends of ``text``)."""
    first = budget // 2
    last = budget - first
    head = text[:first].encode("utf-8")[:first].decode("utf-8", "ignore")
    tail = text[-last:].encode("utf-8")[-last:].decode("utf-8", "ignore") if last else ""
    return head, tail


def render_clipped(item: ConversationItem, region_class: str, budget: int) -> RenderedItem:
    """``item`` rendered as the head and tail of its content, ``budget`` bytes between them."""
    source_role = _source_and_role(item)
    if source_role is None:
        raise TypeError(f"cannot clip a {type(item).__name__}")
    source, role = source_role
    text = content_text(item.content)  # type: ignore[union-attr]
    head, tail = head_and_tail(text, budget)
    clipped = clipped_envelope(
        head,
        tail,
        trust=item.trust,  # type: ignore[union-attr]
        source=source,
        digest=digest_of(item),
        byte_length=utf8_length(text),
        event=item.seq,
    )
    if isinstance(item, ToolResult):
        return RenderedItem(
            region_class, "tool", text=clipped, call_id=item.call_id, is_error=item.is_error, seq=item.seq
        )
    return RenderedItem(region_class, role, text=clipped, seq=item.seq)


def _clip(
    item: ConversationItem,
    region_class: str,
    cap: int,
    cache: RenderCache,
    estimator: Any,
    model_id: str,
) -> RenderedItem | bool:
    """The clipped render of ``item``, or ``False`` when it is shown whole (see the module)."""
    if _source_and_role(item) is None:
        return _NOT_CLIPPED
    text = content_text(item.content)  # type: ignore[union-attr]
    length = utf8_length(text)
    if length <= cap:
        return _NOT_CLIPPED
    budget = FIRST_BYTES_PER_TOKEN * cap
    if length <= COUNTED_BYTES_PER_TOKEN * cap:
        whole: int = estimator.raw_estimates([cache.item(item, region_class)], model_id)[0]
        if whole <= cap:
            return _NOT_CLIPPED
        budget = min(budget, length * cap // whole)
    budget = min(budget, length - 1)
    for _ in range(MAX_SHRINKS):
        clipped = render_clipped(item, region_class, budget)
        raw: int = estimator.raw_estimates([clipped], model_id)[0]
        if raw <= cap or budget == 0:
            return clipped
        budget = min(budget - 1, budget * cap // raw)
    return render_clipped(item, region_class, 0)


def shown(
    item: ConversationItem,
    region_class: str,
    cap: int,
    cache: RenderCache,
    estimator: Any,
    model_id: str,
) -> tuple[RenderedItem, bool]:
    """``item`` as a request shows it in ``region_class`` under the cap: its render, or its
    clipped render (``True``). Kept in ``cache`` by its inputs."""
    # A token is at least a byte, and a character at most four: most items stop here.
    if not isinstance(item, (ToolResult, UserMessage, AssistantMessage, SystemMessage)) or (
        isinstance(item.content, str) and len(item.content) * 4 <= cap
    ):
        return cache.item(item, region_class), False
    key = ("clip", region_class, digest_of(item), cap, model_id)
    clipped = cache.block(key, lambda: _clip(item, region_class, cap, cache, estimator, model_id))
    if clipped is _NOT_CLIPPED:
        return cache.item(item, region_class), False
    return clipped, True


__all__ = [
    "COUNTED_BYTES_PER_TOKEN",
    "FIRST_BYTES_PER_TOKEN",
    "head_and_tail",
    "item_cap",
    "render_clipped",
    "shown",
    "utf8_length",
]
