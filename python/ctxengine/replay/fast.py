"""The replay of one session under one configuration, from per-item counts (issue 42).

Each item of the session is counted once as it renders (its stored count where the log has
one: a turn item renders the same text as in the history, so one count serves both); a
request is then arithmetic over prefix sums of those counts, in the builder's order of
operations (``reference.assembly.fit_body`` for a body of a summary, the history, the
per-turn blocks and the turn): the fixed part's checks, history tool results truncated to
pointers oldest first while over a cap, then the cut (``cut_after_pairs``). A cut is what
``build_with_pressure`` compacts for: the configuration's ``StructuredCompactor`` compacts
a checkpoint of the retained history and the turn, and the request is fitted again (at most
``MAX_COMPACTIONS_PER_STEP`` times). A turn with an item over the per-item cap or over its
budget is the builder's own view of it (``view_turn``: clipped, cleared and folded); any
other turn is its items as they are. ``tests/replay/test_fast_matches_builder.py`` holds
the figures to the real loop's, on both backends.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any

from ..assembly.clearing import TurnView, view_turn
from ..assembly.render import render_items
from ..assembly.render_cache import RENDERS, tool_result_pointer
from ..assembly.request import RenderedItem
from ..core.prompt_cache import RequestCache
from ..errors import CompactionDepthExceeded
from ..model import Checkpoint, ConversationItem, ToolCall, ToolResult, UserMessage, content_text
from ..plan import STABLE_BODY_VERSIONS
from ..reference.cut import cut_after_pairs
from ..runtime.loop_pressure import MAX_COMPACTIONS_PER_STEP
from ..runtime.seeding import RENDERED
from .cache import Layout, SessionCache
from .setup import Configured, unit_digest
from .sources import ReplaySession, request_points

FITS = "fits"
CUT = "history_requires_compaction"
#: The reason of a request whose compaction would go deeper than the configuration allows
#: (the loop raises ``CompactionDepthExceeded`` there).
DEPTH = "compaction_depth_exceeded"


@dataclass(slots=True)
class Request:
    """One rebuilt request's figures (``api.request_row`` makes the report's object)."""

    index: int
    item: int
    run: int
    step: int
    prefix: int
    summary: int
    history: int
    blocks: int
    turn: int
    capacity: int
    fits: bool
    reason: str
    history_items: int
    cut: int
    dropped_tokens: int
    pointers: int
    compactions: int
    clipped: int
    cleared: int
    folded: int
    #: The request's cache units ``(tokens, digests, breakpoints)`` for ``PromptCacheSimulator``
    #: (exact path and baselines), or its figures already made (``cache``: fast path).
    units: tuple[Sequence[int], Sequence[Any], Sequence[int]] = ((), (), ())
    #: The Anthropic Messages body's units (the exact path only).
    anthropic_units: tuple[Sequence[int], Sequence[Any], Sequence[int]] | None = None
    cache: RequestCache | None = None

    @property
    def total(self) -> int:
        return self.prefix + self.summary + self.history + self.blocks + self.turn


@dataclass(slots=True)
class Counts:
    """A session's items counted under one counting key, with what a request reads of them."""

    items: tuple[ConversationItem, ...]
    raws: list[int]
    sums: list[int]
    #: UTF-8 bytes of each item's content (a clip is decided on them too).
    sizes: list[int]
    #: Tool call index -> its result's index (pairs by position, ADR 0019); result indices.
    ends: dict[int, int]
    results: list[int]
    result_sums: list[int]
    pointers: dict[int, tuple[RenderedItem, int]]
    #: The estimators (by id) whose memo holds these counts (``prime``).
    primed: set[int] = field(default_factory=set)

    def prime(self, c: Configured) -> None:
        """Put the counts in ``c``'s estimator's memo (the compactor counts the history's
        renders: from the stored counts, as a seed does), once."""
        if id(c.estimator) not in self.primed:
            self.primed.add(id(c.estimator))
            renders = render_items(self.items, "history")
            c.estimator.prime(c.key, RENDERED, [unit_digest(r) for r in renders], self.raws)


def count_session(
    session: ReplaySession, c: Configured, stored: Sequence[int | None] | None = None
) -> Counts:
    """Count every item as it renders (stored counts where given, the rest counted)."""
    items = session.items
    raws = [0 if stored is None or n is None else int(n) for n in (stored or [None] * len(items))]
    missing = [i for i in range(len(items)) if stored is None or stored[i] is None]
    if missing:
        renders = render_items([items[i] for i in missing], "history")
        counted = c.estimator.raw_estimates(renders, c.key)
        for i, n in zip(missing, counted, strict=True):
            raws[i] = n
    ends: dict[int, int] = {}
    open_calls: dict[str, int] = {}
    results: list[int] = []
    for i, item in enumerate(items):
        if isinstance(item, ToolCall):
            open_calls[item.call_id] = i
        elif isinstance(item, ToolResult):
            ends[open_calls.pop(item.call_id)] = i
            results.append(i)
    sizes = [len(content_text(getattr(item, "content", "")).encode()) for item in items]
    result_sums = [0, *accumulate(raws[i] for i in results)]
    return Counts(items, raws, [0, *accumulate(raws)], sizes, ends, results, result_sums, {})


class SessionReplay:
    """One session's replay under one configuration: the compacted checkpoint (its summary
    and where the retained history starts) over the per-item counts."""

    def __init__(self, c: Configured, counts: Counts, *, materialize: bool = False) -> None:
        self.c = c
        self.k = counts
        self.materialize = materialize
        self.start = 0  # index of the first retained history item
        self.cp: Checkpoint | None = None
        self.summary_keys: tuple[Hashable, ...] = ()
        self.summary_raws: tuple[int, ...] = ()
        budget = c.plan.budget
        self.usable = budget.usable_body_tokens
        self.history_cap = budget.history_tokens + budget.tool_result_tokens
        self.tool_cap = budget.tool_result_tokens
        self.ws_cap = budget.working_state_tokens
        self.block_raw = sum(c.block_raws)
        self.block_keys = tuple(unit_digest(b) for b in c.blocks)
        est, key = c.estimator, c.key
        # A replay never reconciles: a factor of 1 (every fresh estimator's) corrects nothing.
        identity = est.corrected(1 << 40, key) == 1 << 40
        self.c_of: Callable[[int], int] = int if identity else lambda raw: int(est.corrected(raw, key))
        self.pointer_raw: dict[int, int] = {}
        self.cache = SessionCache(
            c.plan.prefix_tokens, self.block_keys, c.block_raws, counts.raws, counts.sums, self.pointer_raw
        )

    def pointer(self, i: int) -> int:
        hit = self.k.pointers.get(i)
        if hit is None:
            item = self.k.items[i]
            assert isinstance(item, ToolResult)
            p = tool_result_pointer(item)
            hit = self.k.pointers[i] = (p, self.c.estimator.raw_estimates([p], self.c.key)[0])
        self.pointer_raw[i] = hit[1]
        return hit[1]

    def fit(self, user: int, turn_raw: int) -> dict[str, Any]:
        """``fit_body``'s arithmetic for the history ``items[start:user]`` and this turn."""
        c, k, lo = self.c_of, self.k, self.start
        fixed = self.block_raw + turn_raw
        summary = sum(self.summary_raws)
        reason, compactable = FITS, False
        depth_ok = self.cp is None or self.cp.summary_depth < self.c.builder.max_compaction_depth
        if c(self.c.working_state_raw) > self.ws_cap:
            reason = "working_state_exceeds_cap"
        elif c(fixed) > self.usable:
            reason = "fixed_body_exceeds_context_window"
        elif c(fixed + summary) > self.usable:
            reason, compactable = "body_exceeds_context_window", depth_ok
        history_raw = k.sums[user] - k.sums[lo]
        base = fixed + summary
        pointers: list[int] = []
        pressured = False  # a history tool result truncated under pressure, not over its cap
        if (
            c(history_raw) > self.tool_cap
            or c(base + history_raw) > self.usable
            or c(history_raw) > self.history_cap
        ):
            first, end = bisect_left(k.results, lo), bisect_left(k.results, user)
            result_raw = k.result_sums[end] - k.result_sums[first]
            nxt = first

            def truncate_next() -> bool:
                nonlocal nxt, result_raw, history_raw
                while nxt < end:
                    i = k.results[nxt]
                    nxt += 1
                    new = self.pointer(i)
                    if new < k.raws[i]:
                        result_raw += new - k.raws[i]
                        history_raw += new - k.raws[i]
                        pointers.append(i)
                        return True
                return False

            while c(result_raw) > self.tool_cap and truncate_next():
                pass
            while (
                c(base + history_raw) > self.usable or c(history_raw) > self.history_cap
            ) and truncate_next():
                pressured = True
        budget = max(0, min(self.history_cap, self.usable - c(base)))
        cut = 0
        floor = self.cp.replaced_through_sequence if self.cp is not None else None
        first_seq = k.items[lo].seq if user > lo else None
        below_floor = floor is not None and (first_seq is None or first_seq <= floor)
        if user > lo and (c(history_raw) > budget or below_floor):
            raws = k.raws[lo:user]
            for i in pointers:
                raws[i - lo] = self.pointer_raw[i]
            ends = {i - lo: e - lo for i, e in k.ends.items() if lo <= i < user}
            cut = cut_after_pairs(k.items[lo:user], ends, floor, budget, raws, c)
        if cut > 0 and reason == FITS:
            reason, compactable = CUT, True
        return {
            "reason": reason,
            "compactable": compactable,
            "cut": cut,
            "budget": budget,
            "history_raw": history_raw,
            "pointers": pointers,
            "summary": summary,
            # Builder version 3 compacts once instead (ADR 0027; ``loop_pressure.compacts_early``).
            "early": pressured and self.c.plan.builder_version in STABLE_BODY_VERSIONS and depth_ok,
        }

    def compact(self, user: int, point: int, budget: int) -> None:
        """The loop's compaction: the configuration's compactor over the retained history."""
        items = self.k.items
        self.k.prime(self.c)
        base = self.cp if self.cp is not None else Checkpoint("replay-run")
        cp = replace(base, conversation=tuple(items[self.start : point]))
        seed = items[user].seq
        assert seed is not None
        compacted, _ = self.c.compactor.compact(
            cp, self.c.plan.budget, CUT, model_id=self.c.key, seed_sequence=seed, history_budget_tokens=budget
        )
        self.cp = compacted
        first = compacted.conversation[0].seq if compacted.conversation else seed
        start = self.start
        while start < point and items[start].seq != first:
            start += 1
        self.start = start
        blocks = self.c.builder.summary_blocks(compacted.compacted_summary, compacted.summary_elided)
        self.summary_keys = tuple(unit_digest(b) for b in blocks)
        self.summary_raws = tuple(self.c.estimator.raw_estimates(list(blocks), self.c.key)) if blocks else ()

    def _turn(self, u: int, point: int, view: TurnView | None) -> tuple[TurnView | None, tuple[Any, ...]]:
        """The turn's units (keys and raws) and the view it took, when it took one."""
        k, rules = self.k, self.c.rules
        raws = k.raws[u:point]
        if rules is not None and (
            sum(raws) > rules.turn_budget
            or any(n > rules.item_cap for n in raws)
            or any(b > rules.item_cap for b in k.sizes[u:point])
        ):
            view = view_turn(k.items[u:point], rules, RENDERS, self.c.estimator, view)
            shown = [*view.user, *view.rest]
            plain = {id(r): u + j for j, r in enumerate(view.shown) if not view.clips[j]}
            keys = tuple(plain.get(id(r), unit_digest(r)) for r in shown)
            tokens = tuple(self.c.estimator.raw_estimates(shown, self.c.key))
            return view, (keys, tokens, view.clipped, view.cleared, view.folded)
        return None, (tuple(range(u, point)), tuple(raws), 0, 0, 0)

    def requests(self) -> list[Request]:
        """Every request of the session, in order."""
        items = self.k.items
        out: list[Request] = []
        run, user, step = -1, -1, 0
        view: TurnView | None = None
        for point in request_points(items):
            u = point - 1
            while u > 0 and not isinstance(items[u], UserMessage):
                u -= 1
            if u != user:
                user, view, step, run = u, None, 0, run + 1
                if self.cp is not None:
                    # A run seeds from the session's carry, its depth re-based to 0 (ADR 0011).
                    self.cp = replace(self.cp, summary_depth=0)
            view, (keys, tokens, clipped, cleared, folded) = self._turn(u, point, view)
            turn_raw = sum(tokens)
            compactions = 0
            while True:
                fit = self.fit(u, turn_raw)
                early = compactions == 0 and fit["reason"] == FITS and fit["early"]
                if (
                    (fit["reason"] == FITS and not early)
                    or (fit["reason"] != FITS and not fit["compactable"])
                    or compactions >= MAX_COMPACTIONS_PER_STEP
                    or not self.c.config.compaction.enabled
                ):
                    break
                try:
                    self.compact(u, point, fit["budget"])
                except CompactionDepthExceeded:
                    fit["reason"] = DEPTH
                    break
                compactions += 1
            out.append(self._request(len(out), point, run, step, u, fit, keys, tokens, compactions))
            out[-1].clipped, out[-1].cleared, out[-1].folded = clipped, cleared, folded
            step += 1
        return out

    def _request(
        self,
        index: int,
        point: int,
        run: int,
        step: int,
        user: int,
        fit: dict[str, Any],
        keys: tuple[Any, ...],
        tokens: tuple[int, ...],
        compactions: int,
    ) -> Request:
        c, k = self.c, self.k
        cut, pointers = fit["cut"], fit["pointers"]
        a = self.start + cut
        shown = fit["history_raw"]
        dropped = 0
        if cut:
            dropped = k.sums[a] - k.sums[self.start]
            for i in pointers:
                if i < a:
                    dropped += self.pointer_raw[i] - k.raws[i]
            shown -= dropped
        layout = Layout(
            self.summary_keys,
            self.summary_raws,
            a,
            user,
            shown,
            tuple(i for i in pointers if i >= a),
            keys,
            tokens,
        )
        units = self.cache.units(layout) if self.materialize else ((), (), ())
        budget = c.plan.budget
        return Request(
            index,
            point,
            run,
            step,
            c.plan.prefix_tokens,
            fit["summary"],
            shown,
            self.block_raw,
            sum(tokens),
            budget.total_tokens - budget.reserve_output_tokens,
            fit["reason"] == FITS,
            fit["reason"],
            user - a,
            cut,
            dropped,
            len(pointers),
            compactions,
            0,
            0,
            0,
            units,
            None,
            self.cache.add(layout),
        )


__all__ = ["DEPTH", "Counts", "Request", "SessionReplay", "count_session"]
