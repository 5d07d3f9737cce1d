"""Tool pairs checked at the door (issue 39, ADR 0019): what ``record_step`` and
``start_run`` refuse before anything is written.

Items pair by position: a result answers the nearest earlier open call with its id, so a
call id may recur once its earlier pair is complete. New items are refused when they hold
a result without an open call for it, a second result for one call, or a call whose id is
still open. "Earlier" is the run's current turn (``split_turn``) followed by the new items
in order: the history below the run's seed holds whole pairs only (a seed leaves halves
out, ``whole_pairs``; compaction replaces whole pairs), so no result of this run can
answer a call there. A call may stay open at the end: a later step records its result.

``append_item`` writes one item to the log, and the log is not a request: it checks the
item alone (that it reads back), not its pairing. Every reader of the log pairs it by the
same rule and leaves halves out (``whole_pairs``), so an unpaired item appended there can
never reach a request; a run's own tool items go through ``record_step``, checked here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import OrphanedToolPair
from ..model import ConversationItem, ToolCall, ToolResult


def check_new_pairs(
    earlier: Sequence[ConversationItem], items: Sequence[ConversationItem], where: str, field: str
) -> None:
    """Raise ``OrphanedToolPair`` (naming the call id, the index in ``items`` and what is
    wrong) for the first of ``items`` that would break a tool pair after ``earlier``."""
    open_calls: set[str] = set()
    answered: set[str] = set()
    for item in earlier:
        if isinstance(item, ToolCall):
            open_calls.add(item.call_id)
            answered.discard(item.call_id)
        elif isinstance(item, ToolResult) and item.call_id in open_calls:
            open_calls.discard(item.call_id)
            answered.add(item.call_id)
    for index, item in enumerate(items):
        if not isinstance(item, ToolCall | ToolResult):
            continue
        call_id = item.call_id
        name = f"{where}: {field}[{index}]" if len(items) > 1 or field == "items" else f"{where}: {field}"
        if isinstance(item, ToolCall):
            if call_id in open_calls:
                raise OrphanedToolPair(
                    call_id,
                    index,
                    f"{name}: a tool call id reused while its earlier call is still open (an id "
                    "may recur only once its pair is complete); nothing was written",
                )
            open_calls.add(call_id)
            answered.discard(call_id)
        elif call_id in open_calls:
            open_calls.discard(call_id)
            answered.add(call_id)
        elif call_id in answered:
            raise OrphanedToolPair(
                call_id,
                index,
                f"{name}: a second result for call {call_id!r} (it was answered already); "
                "nothing was written",
            )
        else:
            raise OrphanedToolPair(
                call_id,
                index,
                f"{name}: a tool result without its call (no open call {call_id!r} in the run's "
                "turn or earlier in these items); nothing was written",
            )


__all__ = ["check_new_pairs"]
