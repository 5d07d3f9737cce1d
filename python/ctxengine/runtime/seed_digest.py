"""``checkpoint_sha256`` of a seeded checkpoint without hashing the whole window every turn (ADR 0011).

The ``run.checkpoint.seeded`` event records ``payload_hash`` of the seeded
checkpoint's dict: SHA-256 over its canonical JSON, where the conversation is
the items' canonical bytes joined by commas. Keys are sorted, so the bytes are
``{"compacted_summary":…,"conversation":[`` + items + ``],"corrections":…}``,
and two seeds of one session from the same carry share everything up to the
end of the earlier seed's conversation: the next seed's history is the earlier
one's followed by what was logged since. ``SeedDigest`` keeps, per session, the
hash state after the last seed's conversation and continues it with the new
items only, when the head and the earlier items (the same objects) match;
otherwise it hashes from the start. The digest is the same either way (tests
compare it with ``payload_hash``); the format of the event does not change.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

from ..core import backends
from ..core.canonical import canonical_json
from ..core.history import shared_prefix
from ..core.identity import ByIdentity
from ..model import Checkpoint, ConversationItem
from .checkpoints import shell_dict

_MARK = b'"conversation":[]'
#: Items hashed per update (a few tens of KiB joined: a buffer the allocator reuses).
_CHUNK = 64


class SeedDigest:
    """Per-process, per-session SHA-256 state of the last seeded conversation, bounded."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._last: OrderedDict[str, tuple[bytes, tuple[ConversationItem, ...], Any]] = OrderedDict()
        self.continued = 0  # digests continued from an earlier seed (for tests)
        # The span dicts of recent ``summary_elided`` tuples, by the tuple's identity.
        self._spans: ByIdentity[list[dict[str, Any]]] = ByIdentity(capacity)

    def forget(self, session_id: str) -> None:
        """Drop what is kept of the session (its items will not be these objects again)."""
        self._last.pop(session_id, None)

    def shell(self, checkpoint: Checkpoint) -> dict[str, Any]:
        """``checkpoint.to_dict()`` without its conversation (for ``digest``, which only
        reads it). A seeded run's spans are its carry's, the very tuple run after run: their
        dicts are made once per tuple, not once per span per run."""
        elided = checkpoint.summary_elided
        data = shell_dict(checkpoint, summary_elided=())
        data["summary_elided"] = self._spans.get(elided, lambda: [span.to_dict() for span in elided])
        return data

    def digest(self, session_id: str, shell: dict[str, Any], items: tuple[ConversationItem, ...]) -> str:
        """``payload_hash({**shell, "conversation": list(items)})``; ``shell`` holds the
        checkpoint's other fields (its ``conversation`` is empty)."""
        text = canonical_json({**shell, "conversation": []})
        at = text.index(_MARK) + len(_MARK) - 1  # the first match is the key (quotes in strings are escaped)
        head, tail = text[:at], text[at:]
        last = self._last.get(session_id)
        start = 0
        if last is not None and last[0] == head and len(last[1]) <= len(items):
            done = last[1]
            if shared_prefix(done, items) == len(done):
                state, start = last[2].copy(), len(done)
                self.continued += 1
        if start == 0:
            state = hashlib.sha256(head)
        canonical = backends.active().item_canonical
        parts = [
            cached[0] if (cached := item._cj) is not None else canonical(item)[0] for item in items[start:]
        ]
        if parts:
            if start:
                state.update(b",")
            # An update per item cost more than the hashing, and one over the whole joined
            # window made a buffer as large as the window (fresh memory, a page fault per
            # 4 KiB of it in a new worker): joined a chunk at a time, comma between chunks.
            for at in range(0, len(parts), _CHUNK):
                if at:
                    state.update(b",")
                state.update(b",".join(parts[at : at + _CHUNK]))
        self._last[session_id] = (head, items, state.copy())
        self._last.move_to_end(session_id)
        while len(self._last) > self.capacity:
            self._last.popitem(last=False)
        state.update(tail)
        digest: str = state.hexdigest()
        return digest


__all__ = ["SeedDigest"]
