"""Events the engine encoded itself (ADR 0010, "Nothing that cannot be read back is written").

A store writes a payload as its canonical JSON text and, before it writes, decodes that
text by the reader's rules (``_rows.probe_event``): a payload from outside may hold what
canonicalizes but does not read back (an enum key spelled like another key, a value type's
own ``to_dict``). The engine's own events are made of typed values' plain JSON forms, and
it holds their text already: a step's items were encoded and decoded by the strict item
reader before the step was written (``runtime.steps``), and a request record's text is what
its derivation key digests (``runtime.request_records``). An ``EncodedEvent`` carries that
text: a store writes it as given and returns the event with the payload it was made of,
without encoding it a second time or decoding it back. Every other check (the columns, the
write policy, idempotency against a stored row) runs as for any ``NewEvent``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..core.canonical import canonical_json
from ..errors import CanonicalizationError
from .events import NewEvent


@dataclass(frozen=True, slots=True)
class EncodedEvent(NewEvent):
    """A ``NewEvent`` with its payload's canonical JSON text (``with_text``)."""

    #: ``canonical_json(payload)`` as text; ``None`` (a copy made by ``dataclasses.replace``,
    #: whose payload may differ): the store encodes and checks the payload as any other.
    text: str | None = field(default=None, init=False, repr=False, compare=False)


def with_text(event: EncodedEvent, text: str) -> EncodedEvent:
    """``event`` carrying ``text``, which must be ``canonical_json(event.payload)`` of a payload
    the engine made of plain JSON values (so that it reads back as that payload)."""
    object.__setattr__(event, "text", text)
    return event


def encoded_text(event: NewEvent) -> str | None:
    """The text the engine encoded ``event``'s payload as, if it did."""
    return event.text if isinstance(event, EncodedEvent) else None


def reads_back(value: object) -> bool:
    """Whether ``value``'s canonical JSON reads back as a value with the same canonical JSON:
    a store's check of a whole payload, for a part the engine took from outside (a float of
    2**53 or more is written as an integer the reader refuses). ``CanonicalizationError``
    when ``value`` has no canonical JSON at all."""
    text = canonical_json(value)
    try:
        return canonical_json(json.loads(text)) == text
    except (ValueError, RecursionError, CanonicalizationError):
        return False


__all__ = ["EncodedEvent", "encoded_text", "reads_back", "with_text"]
