"""The current turn of a long run, as a request shows it (ADR 0021; plans of builder version 2).

Every item of the turn is shown under the per-item cap (``clip``). When the
turn then counts more than its budget, completed tool pairs of the run,
oldest first (in the order they completed), are shown with their result as
a typed pointer (the call stays whole, so the pair stays whole; the pointer
names the tool, the call, the event, the trust and the byte length, never
content); when the pointers themselves grow too many, the oldest steps fold
(call and result leave the request; one note names how many, their events
and tools). Kept verbatim: the run's user message, its other items, every
call of a pair not folded, the results of excluded tools, an open pair, the
newest completed pair always and the last ``keep_pairs`` completed pairs
unless clearing every older pair is not enough.

Which pairs are cleared and folded is a pure function of the turn's items and
the plan (budget, policy, counting key), counted in raw tokens, so every
worker and every replay agrees with nothing stored (``_decide``):

- the turn's budget is what the usable body leaves after the working state's
  cap and the history's floor (the turn never crowds the history below it);
- the clearable pairs (completed, not excluded, pointer smaller than result)
  in the order they completed are grouped greedily from the oldest into
  chunks that save at least the quantum each (``at_least_tokens``, and
  ``at_least_ratio`` of the turn's budget); a trailing chunk that saves less
  waits for more pairs;
- at each prefix of the turn over its budget: folded, the fewest leading
  chunks (of call and pointer) before the kept pairs that bring the prefix
  with every clearable pair cleared (its floor, which only grows) within half
  the budget; cleared, the fewest further leading chunks before the kept
  pairs that bring the prefix within its budget, then, if every chunk is not
  enough, pairs one by one into the kept ones (never the prefix's newest);
- the turn's counts are the largest any of its prefixes asks for.

So both sets only grow as the run grows (a prefix of the turn is a prefix of
the longer turn), and by whole chunks while the kept pairs leave room: the
body changes when the turn has grown by another quantum, not on every step.
A view of a longer turn continues from the last one's counts.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.budget import BudgetPolicy
from ..core.history import shared_prefix
from ..model import ConversationItem, ReasoningItem, ToolCall, ToolResult, UserMessage, content_text
from ..plan import ContextPlan
from ..plan.planner import STABLE_BODY_VERSIONS
from .clip import item_cap, shown, utf8_length
from .envelope import json_inline
from .render_cache import RenderCache
from .request import RenderedItem

#: The builder version that introduced clipping and clearing (ADR 0021).
LONG_RUNS_VERSION = "ctxengine-builder/2"
#: The builder versions whose plans get clipping and clearing: 2 and its successor 3 (ADR 0027).
LONG_RUNS_VERSIONS = frozenset({LONG_RUNS_VERSION, "ctxengine-builder/3"})
POINTER_TEXT = "[tool result elided under context pressure] "
FOLDED_TEXT = "[tool steps of this run elided under context pressure] "
#: The tokens set aside for the note of folded steps when deciding how many to fold.
FOLD_NOTE_TOKENS = 256


@dataclass(frozen=True, slots=True)
class TurnRules:
    """What shows a plan's current turn: the per-item cap, the turn's budget (raw tokens) and
    the clearing policy."""

    item_cap: int
    turn_budget: int
    keep_pairs: int
    at_least: int
    exclude_tools: frozenset[str]
    model_id: str
    #: Builder version 3 (ADR 0027): once a prefix of the turn is over its budget, clearing
    #: goes this much further (outside the kept pairs), and a prefix that fits with the
    #: counts decided so far keeps them: the body changes in steps of at least this much.
    #: 0 before it (ADR 0021's rule).
    slack: int = 0


def turn_rules(plan: ContextPlan, policy: BudgetPolicy) -> TurnRules | None:
    """The rules of ``plan``'s turns, or ``None`` for a plan made before them (which keeps
    rendering as it did)."""
    if plan.builder_version not in LONG_RUNS_VERSIONS:
        return None
    budget = plan.budget
    turn_budget = budget.usable_body_tokens - budget.working_state_tokens - policy.history_floor_tokens
    at_least = max(
        1,
        policy.clearing_at_least_tokens,
        math.floor(max(0, turn_budget) * policy.clearing_at_least_ratio),
    )
    return TurnRules(
        item_cap=item_cap(budget, policy),
        turn_budget=max(0, turn_budget),
        keep_pairs=policy.clearing_keep_pairs,
        at_least=at_least,
        exclude_tools=frozenset(policy.clearing_exclude_tools),
        model_id=plan.counting_key,
        slack=at_least if plan.builder_version in STABLE_BODY_VERSIONS else 0,
    )


@dataclass(frozen=True, slots=True)
class TurnView:
    """The turn as a request shows it: the current user message's render (or none) and the
    rest, with how many items are clipped, tool results cleared and tool steps folded; and
    what the view of the same turn grown longer starts from (``view_turn``'s ``previous``)."""

    user: tuple[RenderedItem, ...]
    rest: tuple[RenderedItem, ...]
    clipped: int
    #: Tool results shown as pointers.
    cleared: int
    #: Tool steps folded into one note.
    folded: int = 0
    rules: TurnRules | None = None
    #: The turn's items; each one's render under the cap, its raw count and whether it is clipped.
    items: tuple[ConversationItem, ...] = ()
    shown: tuple[RenderedItem, ...] = ()
    raws: tuple[int, ...] = ()
    clips: tuple[bool, ...] = ()
    #: By result index: the pointer of each completed pair looked at, and its raw count.
    pointers: Mapping[int, tuple[RenderedItem, int]] = field(default_factory=dict)
    #: The note of the folded steps.
    note: RenderedItem | None = None
    #: (cleared, folded): the largest counts over every prefix of the turn (``_decide``).
    upto: tuple[int, int] = (0, 0)


def render_turn_pointer(item: ToolResult, tool: str) -> RenderedItem:
    """A current-turn tool result cleared to a typed pointer, naming its tool (from its call)."""
    pointer = {
        "byte_length": utf8_length(content_text(item.content)),
        "call_id": item.call_id,
        "elided": "tool_result",
        "event_id": item.seq,
        "is_error": item.is_error,
        "tool": tool,
        "trust": item.trust.value,
    }
    return RenderedItem(
        "current_turn",
        "tool",
        text=POINTER_TEXT + json_inline(pointer),
        call_id=item.call_id,
        is_error=item.is_error,
        seq=item.seq,
    )


def completed_pairs(turn: Sequence[ConversationItem]) -> list[tuple[int, int, str]]:
    """``(call index, result index, tool name)`` of each completed pair, in the order they
    completed (a result answers the latest open call of its id). Completion order, not call
    order: a pair that completes later never lands before pairs already counted."""
    open_calls: dict[str, tuple[int, str]] = {}
    pairs = []
    for i, item in enumerate(turn):
        if isinstance(item, ToolCall):
            open_calls[item.call_id] = (i, item.name)
        elif isinstance(item, ToolResult):
            call = open_calls.pop(item.call_id, None)
            if call is not None:
                pairs.append((call[0], i, call[1]))
    return pairs


def cleared_count(savings: Sequence[int], kept_from: int, excess: int, at_least: int) -> int:
    """How many leading items reach ``excess`` (see the module): ``savings`` of each in
    order, the first ``kept_from`` of them grouped in chunks of at least ``at_least``. The
    specification of ``Chunks.count``, which bisects."""
    if excess <= 0:
        return 0
    freed = 0
    chunk = 0
    boundary = 0  # the end of the last whole chunk
    for m in range(kept_from):
        freed += savings[m]
        chunk += savings[m]
        if chunk >= at_least:
            chunk = 0
            boundary = m + 1
            if freed >= excess:
                return boundary
    # Every whole chunk is not enough: pair by pair from there.
    freed = sum(savings[:boundary])
    for m in range(boundary, len(savings)):
        freed += savings[m]
        if freed >= excess:
            return m + 1
    return len(savings)


def render_folded(steps: Sequence[tuple[ToolCall, ToolResult]]) -> RenderedItem:
    """The platform's note of folded tool steps: how many, their events and their tools
    (names and counts), never content."""
    tools: dict[str, int] = {}
    for call, _ in steps:
        tools[call.name] = tools.get(call.name, 0) + 1
    note = {
        "elided": "tool_steps",
        "count": len(steps),
        "first_event_id": steps[0][0].seq,
        "last_event_id": steps[-1][1].seq,
        "tools": tools,
    }
    return RenderedItem("current_turn", "system", text=FOLDED_TEXT + json_inline(note))


class Chunks:
    """A list of positive savings grouped greedily, from the first, into chunks of at least
    ``at_least`` (a trailing chunk that saves less stays open): ``count`` is ``cleared_count``
    by bisection over cumulative sums."""

    __slots__ = ("cum", "ends", "ends_cum")

    def __init__(self, savings: Sequence[int], at_least: int) -> None:
        self.cum = [0]
        self.ends: list[int] = []
        chunk = 0
        for i, saving in enumerate(savings):
            self.cum.append(self.cum[-1] + saving)
            chunk += saving
            if chunk >= at_least:
                self.ends.append(i + 1)
                chunk = 0
        self.ends_cum = [self.cum[end] for end in self.ends]

    def count(self, within: int, total: int, need: int) -> int:
        """``cleared_count(savings[:total], within, need, at_least)``: the fewest leading
        items whose savings reach ``need``, at a chunk's end up to ``within``, else item by
        item after the last such end (at most ``total``)."""
        if need <= 0:
            return 0
        whole = bisect_right(self.ends, within)
        at = bisect_left(self.ends_cum, need, 0, whole)
        if at < whole:
            return self.ends[at]
        after = self.ends[whole - 1] if whole else 0
        return min(bisect_left(self.cum, need, after, total + 1), total)


def _decide(
    items: Sequence[ConversationItem],
    raws: Sequence[int],
    pairs: Sequence[tuple[int, int, str]],
    useful: Sequence[tuple[int, int, int]],
    known: Mapping[int, tuple[RenderedItem, int]],
    rules: TurnRules,
    start: int,
    upto: tuple[int, int],
) -> tuple[int, int]:
    """How many of ``useful`` (the clearable pairs) are cleared and how many of those folded:
    the largest counts any prefix of the turn asks for (prefixes from ``start + 1`` items on,
    ``upto`` those before), so both only grow as the run grows (see the module)."""
    budget, at_least, slack = rules.turn_budget, rules.at_least, rules.slack
    saving = [raws[at] - known[at][1] for _, _, at in useful]
    clear = Chunks(saving, at_least)
    fold = Chunks([raws[call_at] + known[at][1] for _, call_at, at in useful], at_least)
    order = [n for n, _, _ in useful]  # each clearable pair's index among the completed ones
    done = [at for _, at, _ in pairs]  # where each completed pair completes
    cleared, folded = upto
    total = sum(raws[:start])
    completed = bisect_left(done, start)  # pairs completed within the prefix
    for p in range(start, len(items)):
        total += raws[p]
        while completed < len(done) and done[completed] <= p:
            completed += 1
        if total <= budget:
            continue
        note = FOLD_NOTE_TOKENS if folded else 0
        if slack and total - clear.cum[cleared] - fold.cum[folded] + note <= budget:
            continue  # version 3: the counts so far still fit this prefix (ADR 0027)
        # The prefix's clearable pairs: all completed before its newest; outside the kept ones.
        among = bisect_left(order, completed - 1)
        outside = bisect_left(order, completed - rules.keep_pairs) if rules.keep_pairs else among
        outside = min(outside, among)
        # The floor: the prefix with every clearable pair cleared, its newest too (it only grows).
        floor = total - clear.cum[bisect_left(order, completed)]
        f = fold.count(outside, outside, floor - budget // 2)
        left = total - fold.cum[f] - clear.cum[f] + (FOLD_NOTE_TOKENS if f else 0) - budget
        m = max(f, clear.count(outside, among, left + clear.cum[f]) if left > 0 else f)
        if slack:
            # Further by the slack: outside the kept pairs, or into them when fitting the
            # budget already reaches into them (never the prefix's newest pair).
            reach = among if m > outside else outside
            m = max(m, clear.count(outside, reach, left + slack + clear.cum[f]))
        cleared, folded = max(cleared, m), max(folded, f)
    return cleared, folded


def view_turn(
    turn: Sequence[ConversationItem],
    rules: TurnRules,
    cache: RenderCache,
    estimator: Any,
    previous: TurnView | None = None,
) -> TurnView:
    """The turn under ``rules`` (see the module). ``previous``: the view of an earlier state
    of this turn, whose renders, counts and pointers of the items both share (by identity)
    are taken as they are (a function of the item and the rules alone)."""
    model_id = rules.model_id
    cap = rules.item_cap
    items = tuple(turn)
    k = 0
    if previous is not None and previous.rules == rules:
        k = shared_prefix(previous.items, items)
    user = bool(items) and isinstance(items[0], UserMessage)
    if k:
        assert previous is not None
        renders = list(previous.shown[:k])
        raws = list(previous.raws[:k])
        clips = list(previous.clips[:k])
        known = {at: made for at, made in previous.pointers.items() if at < k}
    else:
        renders, raws, clips, known = [], [], [], {}
    fresh = []
    for i in range(k, len(items)):
        rendered, clipped = shown(
            items[i], "current_user" if user and i == 0 else "current_turn", cap, cache, estimator, model_id
        )
        fresh.append(rendered)
        clips.append(clipped)
    if fresh:
        renders += fresh
        raws += estimator.raw_estimates(fresh, model_id)
    out: list[RenderedItem | None] = list(renders)
    cleared = folded = 0
    upto = (0, 0)  # (the largest cleared count, folded count) over every prefix of the turn
    note = None
    if sum(raws) > rules.turn_budget:
        pairs = completed_pairs(items)
        new_pointers: list[tuple[int, RenderedItem]] = []
        for _, at, tool in pairs:
            if tool not in rules.exclude_tools and at not in known:
                result = items[at]
                assert isinstance(result, ToolResult)
                new_pointers.append((at, render_turn_pointer(result, tool)))
        if new_pointers:
            made = estimator.raw_estimates([pointer for _, pointer in new_pointers], model_id)
            known.update((at, (pointer, raw)) for (at, pointer), raw in zip(new_pointers, made, strict=True))
        # The clearable pairs, in the order they completed: not excluded, pointer smaller than result.
        useful = [
            (n, call_at, at)
            for n, (call_at, at, tool) in enumerate(pairs)
            if tool not in rules.exclude_tools and raws[at] > known[at][1]
        ]
        extended = previous is not None and k == len(previous.items) and previous.rules == rules
        start = len(previous.items) if extended and previous is not None else 0
        upto = previous.upto if extended and previous is not None else (0, 0)
        cleared, folded = upto = _decide(items, raws, pairs, useful, known, rules, start, upto)
        for _, _, at in useful[folded:cleared]:
            out[at] = known[at][0]
        if folded:
            steps = []
            for _, call_at, at in useful[:folded]:
                call, result = items[call_at], items[at]
                assert isinstance(call, ToolCall) and isinstance(result, ToolResult)
                steps.append((call, result))
                out[call_at] = out[at] = None
                # A reasoning item just before a folded call goes with it.
                before = call_at - 1
                while before >= 0 and isinstance(items[before], ReasoningItem):
                    out[before] = None
                    before -= 1
            # The same steps fold into the same note (they are old: in the shared prefix).
            same = previous is not None and previous.folded == folded and useful[folded - 1][2] < k
            note = previous.note if same and previous is not None else render_folded(steps)
            out[useful[0][1]] = note
    first = 1 if user else 0
    return TurnView(
        tuple(r for r in out[:first] if r is not None),
        tuple(r for r in out[first:] if r is not None),
        sum(clips),
        cleared - folded,
        folded,
        rules,
        items,
        tuple(renders),
        tuple(raws),
        tuple(clips),
        known,
        note,
        upto,
    )


__all__ = [
    "FOLDED_TEXT",
    "FOLD_NOTE_TOKENS",
    "LONG_RUNS_VERSION",
    "LONG_RUNS_VERSIONS",
    "POINTER_TEXT",
    "TurnRules",
    "TurnView",
    "cleared_count",
    "completed_pairs",
    "render_folded",
    "render_turn_pointer",
    "turn_rules",
    "view_turn",
]
