"""One session's window in a worker (ADR 0016).

A worker that takes a session's turns keeps, in one ``SessionWindow``, what
its runs need of the session: the item rows after the carried point in log
order, as columns (sequences, visibility classes, stored token counts and the
decoded items; not a row object per item, nor the payload text once decoded: a
20,000-item window would otherwise hold 20,000 more containers for the
collector's full passes to walk, ADR 0028);
what the last seed made of them (``view``: the history its principal reads,
the calls left open); the SHA-256 state of that seed's
canonical conversation; the carry and working-state events below the last
seed, per reader; the carries decoded; the render line the builder reads
(``line``: the history's renders and pointers in order, and the native
fit's state); the last reference checkpoint of the session and of each run
this worker wrote (so a write folds only what is new); and, per run, what
its next write needs (its rows, the carry it was seeded from, counts to
store).

It is append-only and has one writer: a seed reads the log after ``hi``
into it (``Windows.span``); ``start_run`` and ``record_step`` append what
they committed (``Windows.extend``). Nothing outside it compares objects by
identity to learn that the session grew. When it cannot be extended (a
sequence gap: another worker wrote; another counting key; a carried point
outside it) its rows start again from the log, which is always correct; the
facts keyed by sequence (events below a seed, carries) stay, as events never
change. Dropping a window (``Windows``' one byte bound) drops everything it
held.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any

from ..assembly.session_renders import SessionRenders
from ..core import backends, slices
from ..core.canonical import canonical_json
from ..core.history import shared_prefix
from ..core.slices import Steps, finish
from ..model import Checkpoint, ConversationItem, Principal
from ..stores.events import Event, ItemRow, RawCheckpoint, Visibility
from . import checkpoint_refs as refs
from .carry import Carry, stored_carry
from .checkpoint_refs import Entry
from .checkpoints import shell_dict

Conversation = tuple[ConversationItem, ...]

#: The estimated memory of a row beside twice its payload text (the decoded item's content and
#: its canonical bytes; the text itself is not kept): its columns' entries, the item, headers.
ROW_OBJECTS = 400
#: A reference snapshot's estimated memory beside its items: the row, dicts and tuples.
MEMO_OBJECTS = 1024
#: Per item of a reference snapshot: its entry and segment, beside the item's bytes.
ITEM_OBJECTS = 320
#: Runs a window remembers (a session's runs mostly follow one another).
RUNS_KEPT = 64
#: Carry and state events an unbroken run of committed events keeps.
MARKS_KEPT = 32
#: Items hashed per update of the seed digest (a few tens of KiB joined).
DIGEST_CHUNK = 64

_sequence = itemgetter(0)  # ItemRow.sequence
_payload = itemgetter(1)  # ItemRow.payload
_visibility = itemgetter(2)  # ItemRow.visibility
_tokens = itemgetter(3)  # ItemRow.tokens
_cached = attrgetter("_cj")
_first = itemgetter(0)
_MARK = b'"conversation":[]'


def row_sizes(rows: Sequence[ItemRow]) -> list[int]:
    """Each row's estimated memory in a window (with its decoded item)."""
    return [ROW_OBJECTS + 2 * n for n in map(len, map(_payload, rows))]


def memo_bytes(conversation: Sequence[ConversationItem], start: int = 0) -> int:
    """The estimated memory of ``conversation[start:]`` held by a reference snapshot: per item
    ``ITEM_OBJECTS`` and twice its canonical bytes (an item not yet canonicalized: 512)."""
    tail = islice(conversation, start, None)
    held = [cj for cj in map(_cached, tail) if cj is not None]
    missing = len(conversation) - start - len(held)
    return (len(conversation) - start) * ITEM_OBJECTS + 2 * sum(map(len, map(_first, held))) + 512 * missing


def _extends(known: Conversation, conversation: Sequence[ConversationItem]) -> bool:
    return len(known) <= len(conversation) and shared_prefix(known, conversation) == len(known)


@dataclass(slots=True)
class View:
    """What the last seed made of the window's first ``end`` items (``seed_history``)."""

    end: int
    #: Each visibility class's decision (by ``id``; the window holds the classes).
    decisions: dict[int, bool]
    history: tuple[ConversationItem, ...]
    #: Calls left open (and so out of ``history``).
    open: set[str]
    #: The sequence of the last item looked at (visible, not reasoning): what is left to prime.
    last_seq: int | None


@dataclass(frozen=True, slots=True)
class Marks:
    """The newest carry and working-state events with ``sequence < below`` a reader may see."""

    below: int
    carry: Event | None
    state: Event | None


@dataclass(slots=True)
class RunMemo:
    """What a run's next write needs, from this worker's last one."""

    #: The run's checkpoint rows after this worker's last write.
    rows: list[RawCheckpoint] | None = None
    #: The carry it was seeded from and the principal it was seeded for (``None``: not
    #: seeded here).
    seeded: tuple[Carry | None, Principal | None] | None = None
    #: The seed message's count, stored with the run's first step.
    pending: list[tuple[int, int]] = field(default_factory=list)
    #: The last reference row written, the dict it materializes to, its conversation.
    ref: tuple[RawCheckpoint, dict[str, Any], Conversation] | None = None
    ref_bytes: int = 0
    #: The request built last and not recorded yet (``request_records.BuiltRequest``).
    built: Any = None


class SessionWindow:
    """One session's window (see the module)."""

    def __init__(self, session_id: str, lo: int = 0, counter: str | None = None) -> None:
        self.session_id = session_id
        #: Per reader (principal id, tenant): the carry and state events below its last seed.
        self.marks: dict[tuple[str, str], Marks] = {}
        #: ``(lo, hi, carry and state events)`` of an unbroken run of events committed in order.
        self.tail: tuple[int, int, tuple[Event, ...]] | None = None
        #: Carries decoded, by sequence.
        self.carries: dict[int, Carry] = {}
        self.runs: OrderedDict[str, RunMemo] = OrderedDict()
        #: Seed digests continued from the last one (for tests).
        self.continued = 0
        self.reset(lo, counter)
        #: Whether its rows were read from the log (``Windows.span``): until then it knows
        #: nothing of the session's items.
        self.known = False

    def reset(self, lo: int, counter: str | None) -> None:
        """Start the rows again at ``lo`` (and everything made of the items they held)."""
        #: The rows held are those with ``lo < sequence <= hi``, read with ``counter``.
        self.lo = self.hi = lo
        self.counter = counter
        #: Rows up to this sequence have primed the estimator's memo.
        self.primed = 0
        #: The rows' columns, one entry per row in log order: sequence, visibility class,
        #: stored count (``None``: not counted with ``counter``), decoded item, estimated size.
        self.seqs: list[int] = []
        self.visibilities: list[Visibility] = []
        self.tokens: list[int | None] = []
        self.items: list[ConversationItem] = []
        self.sizes: list[int] = []
        self.row_bytes = 0
        #: Every visibility class the rows hold (or held), by ``id``.
        self.classes: dict[int, Visibility] = {}
        self.view: View | None = None
        #: The seed digest's head bytes, conversation and hash state after it.
        self.digest: tuple[bytes, Conversation, Any] | None = None
        #: The history's renders in order (the builder's line) and the native fit's state.
        self.line = SessionRenders()
        #: The last full reference snapshot: conversation, entries, segments, with spans.
        self.full: tuple[Conversation, list[Entry], list[Any], bool] | None = None
        self.full_bytes = 0
        #: The last request record's history region and its digest state (``request_records``).
        self.region: tuple[tuple[Any, ...], Any] | None = None
        for memo in self.runs.values():
            memo.ref, memo.ref_bytes = None, 0

    @property
    def nbytes(self) -> int:
        """The memory it is estimated to hold."""
        refs_bytes = sum(memo.ref_bytes for memo in self.runs.values())
        state = self.line.line.state  # the native fit's readings of the line (None: reference)
        fit_bytes = state.nbytes if state is not None else 0
        return self.row_bytes + self.line.nbytes + fit_bytes + self.full_bytes + refs_bytes

    # -- rows ----------------------------------------------------------------------

    def add(self, rows: Sequence[ItemRow], items: Sequence[ConversationItem]) -> None:
        """Append ``rows`` and their decoded ``items`` (the rows' columns are kept, not them)."""
        sizes = row_sizes(rows)
        self.sizes.extend(sizes)
        self.row_bytes += sum(sizes)
        self.items.extend(items)
        self.seqs.extend(map(_sequence, rows))
        self.tokens.extend(map(_tokens, rows))
        visibilities = list(map(_visibility, rows))
        self.visibilities.extend(visibilities)
        self.classes.update(zip(map(id, visibilities), visibilities, strict=True))

    def drop_below(self, count: int) -> None:
        """Remove the first ``count`` rows (the carried point moved past them)."""
        self.row_bytes -= sum(self.sizes[:count])
        del self.seqs[:count], self.visibilities[:count], self.tokens[:count]
        del self.items[:count], self.sizes[:count]
        self.view = None  # its positions were the old ones

    def drop_from(self, index: int) -> None:
        """Remove the rows from ``index`` on (a write that was not committed)."""
        self.row_bytes -= sum(self.sizes[index:])
        del self.seqs[index:], self.visibilities[index:], self.tokens[index:]
        del self.items[index:], self.sizes[index:]
        if self.view is not None and self.view.end > index:
            self.view = None

    def follows(self, sequences: Sequence[int]) -> bool:
        """Whether ``sequences`` are the events right after the window, without a gap."""
        return (
            bool(sequences)
            and min(sequences) == self.hi + 1
            and max(sequences) - min(sequences) + 1 == len(sequences)
        )

    # -- runs ----------------------------------------------------------------------

    def run(self, run_id: str) -> RunMemo:
        """The run's memo (made when missing), now the most recent."""
        memo = self.runs.get(run_id)
        if memo is None:
            memo = self.runs[run_id] = RunMemo()
            while len(self.runs) > RUNS_KEPT:
                self.runs.popitem(last=False)
        else:
            self.runs.move_to_end(run_id)
        return memo

    # -- events below a seed -----------------------------------------------------------

    def carry(self, event: Event) -> Carry:
        """The carry ``event`` records, decoded once."""
        carry = self.carries.get(event.sequence)
        if carry is None:
            carry = self.carries[event.sequence] = stored_carry(event)
        return carry

    def committed(self, events: Sequence[Event], types: tuple[str, ...]) -> None:
        """``events`` are committed: when they continue the unbroken run of events this
        worker saw committed, it grows by them (its ``types`` events kept); else one starts."""
        if not events:
            return
        seqs = sorted(e.sequence for e in events)
        first, last = seqs[0], seqs[-1]
        if last - first + 1 != len(seqs) or len(set(seqs)) != len(seqs):
            self.tail = None
            return
        marks = tuple(sorted((e for e in events if e.type in types), key=lambda e: e.sequence))
        tail = self.tail
        if tail is not None and tail[1] + 1 == first:
            lo, marks = tail[0], (*tail[2], *marks)
            if len(marks) > MARKS_KEPT:  # the run now starts after the marks let go
                lo, marks = marks[-MARKS_KEPT - 1].sequence + 1, marks[-MARKS_KEPT:]
            self.tail = (lo, last, marks)
        else:
            self.tail = (first, last, marks)

    def tail_between(self, below: int, before: int) -> list[Event] | None:
        """The marks with ``below <= sequence < before`` when the unbroken run covers the range."""
        tail = self.tail
        if tail is not None and tail[0] <= below and before - 1 <= tail[1]:
            return [e for e in tail[2] if below <= e.sequence < before]
        return None

    # -- the seed digest ---------------------------------------------------------------

    def seed_digest(self, shell: dict[str, Any], items: Conversation) -> tuple[str, bool]:
        """``payload_hash({**shell, "conversation": list(items)})``, continued from the last
        seed's hash state when ``items`` extend its conversation (and whether it was)."""
        return finish(self.seed_digest_steps(shell, items))

    def seed_digest_steps(self, shell: dict[str, Any], items: Conversation) -> Steps[tuple[str, bool]]:
        """``seed_digest`` as steps (``core.slices``): a chunk of items hashed a step."""
        text = canonical_json({**shell, "conversation": []})
        at = text.index(_MARK) + len(_MARK) - 1  # the first match is the key (strings escape quotes)
        head, tail = text[:at], text[at:]
        last = self.digest
        start = 0
        if last is not None and last[0] == head and _extends(last[1], items):
            state, start = last[2].copy(), len(last[1])
        else:
            state = hashlib.sha256(head)
        canonical = backends.active().item_canonical
        # Joined a chunk at a time (an update per item costs more than the hashing; one
        # join of the whole window is a buffer as large as the window).
        for at in range(start, len(items), DIGEST_CHUNK):
            if at > start and not (at - start) % slices.SLICE_ITEMS < DIGEST_CHUNK:
                yield
            if at:
                state.update(b",")
            parts = [
                cached[0] if (cached := item._cj) is not None else canonical(item)[0]
                for item in items[at : at + DIGEST_CHUNK]
            ]
            state.update(b",".join(parts))
        self.digest = (head, items, state.copy())
        state.update(tail)
        self.continued += start > 0
        return state.hexdigest(), start > 0

    # -- reference checkpoints (``checkpoints.write_checkpoint``'s memo) ---------------

    def full_refs(
        self, session_id: str, conversation: Conversation, items: Sequence[int] | None = None
    ) -> tuple[list[Entry], list[Any]]:
        """``entries_of`` and ``to_segments`` of a full snapshot's conversation, continued from
        the last one's when it extends it (``items``: the session's item sequences, for spans)."""
        spans = items is not None
        known = self.full
        if known is not None and known[3] == spans and _extends(known[0], conversation):
            tail = refs.entries_of(conversation[len(known[0]) :], session_id)
            entries = known[1] + tail
            segments = refs.to_segments(tail, known[2], items)
            self.full_bytes += memo_bytes(conversation, len(known[0]))
        else:
            entries = refs.entries_of(conversation, session_id)
            segments = refs.to_segments(entries, items=items)
            self.full_bytes = MEMO_OBJECTS + memo_bytes(conversation)
        self.full = (conversation, entries, segments, spans)
        return entries, segments

    def ref_base(self, run_id: str, rows: list[RawCheckpoint]) -> tuple[dict[str, Any], Conversation] | None:
        """The dict ``rows`` materialize to and its conversation, when ``rows`` ends with the
        row this worker wrote last for the run."""
        memo = self.runs.get(run_id)
        known = memo.ref if memo is not None else None
        if known is None or not rows or rows[-1] is not known[0]:
            return None
        return known[1], known[2]

    def ref_entries(
        self, session_id: str, base: dict[str, Any], known: Conversation, conversation: Conversation
    ) -> list[Entry]:
        """``entries_of(conversation)``, from the base's entries where it extends ``known``."""
        if _extends(known, conversation):
            old: list[Entry] = base["conversation"]
            return old + refs.entries_of(conversation[len(known) :], session_id)
        return refs.entries_of(conversation, session_id)

    def ref_wrote(
        self, run_id: str, row: RawCheckpoint, data: dict[str, Any], conversation: Conversation
    ) -> None:
        """``row`` was written for the run; it materializes to ``data``."""
        memo = self.run(run_id)
        old = memo.ref
        if old is not None and memo.ref_bytes and _extends(old[2], conversation):
            memo.ref_bytes += memo_bytes(conversation, len(old[2]))
        else:
            memo.ref_bytes = MEMO_OBJECTS + memo_bytes(conversation)
        memo.ref = (row, data, conversation)

    def ref_forget(self, run_id: str) -> None:
        memo = self.runs.get(run_id)
        if memo is not None:
            memo.ref, memo.ref_bytes = None, 0


def checkpoint_shell(checkpoint: Checkpoint) -> dict[str, Any]:
    """``checkpoint.to_dict()`` without its conversation (for ``SessionWindow.seed_digest``)."""
    data = shell_dict(checkpoint, summary_elided=())
    data["summary_elided"] = [span.to_dict() for span in checkpoint.summary_elided]
    return data


__all__ = [
    "ITEM_OBJECTS",
    "MEMO_OBJECTS",
    "ROW_OBJECTS",
    "Marks",
    "RunMemo",
    "SessionWindow",
    "View",
    "checkpoint_shell",
    "memo_bytes",
    "row_sizes",
]
