"""What every format converter shares: provenance options, sequence numbers, trust defaults,
text parts, tool-call arguments, and the grouping check that keeps round trips exact."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentError, CanonicalizationError, ConversionError, ModelValidationError
from ..model import ConversationItem, TextPart, TrustLevel
from ..reference.arguments import is_int

#: Per-message trust: a mapping of message index to trust, or ``f(index, message)``
#: returning a trust level (``None`` keeps the role's default).
TrustOverride = Mapping[int, TrustLevel | str] | Callable[[int, Any], TrustLevel | str | None] | None


@dataclass(frozen=True, slots=True)
class Provenance:
    """How foreign messages become items: where ``seq`` comes from and who is trusted.

    ``seq_field`` names a field of each message holding its source sequence
    number (an int): the first item made from that message takes it, the
    others ``None``. Without it, items are numbered from ``first_seq`` on,
    one number per item (``first_seq=None``: no numbers at all).
    ``tool_trust`` is the trust of tool output from a foreign history
    (``external_untrusted`` unless said otherwise, ADR 0008); ``trust``
    overrides the role default per message.
    """

    source: str
    seq_field: str | None = None
    first_seq: int | None = 1
    trust: TrustOverride = None
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED

    def __post_init__(self) -> None:
        trust = self.trust
        if trust is not None and not callable(trust) and not isinstance(trust, Mapping):
            raise ArgumentError(
                f"{self.source} conversion",
                "trust",
                "expected a mapping of message index to trust level ({0: 'external_untrusted'}), "
                "a callable f(index, message) returning a trust level or None, or None; "
                f"got {type(trust).__name__} {trust!r:.60} (one level for every message: "
                f"trust=lambda index, message: {trust!r:.40}; the trust of tool output is tool_trust=)",
            )

    def error(self, index: int, field: str, reason: str) -> ConversionError:
        return ConversionError(self.source, index, field, reason)

    def trust_for(self, index: int, message: Any, default: TrustLevel | str) -> TrustLevel:
        chosen: TrustLevel | str | None = None
        if self.trust is not None:
            if callable(self.trust):
                chosen = self.trust(index, message)
            else:
                chosen = self.trust.get(index)
        value = default if chosen is None else chosen
        try:
            return TrustLevel(value)
        except ValueError:
            raise self.error(index, "trust", f"unknown trust level {value!r}") from None


def check_trust(
    p: Provenance, k: int, item: ConversationItem, index: int, message: Any, default: TrustLevel | str
) -> None:
    """On the way out: item ``k``, written into message ``index`` (``message``, as written),
    must come back with its own trust when ``to_items`` reads that message with the same
    ``trust`` and ``tool_trust`` (``default`` is the role's). No format has a field for any
    other trust, and a silent change would fence or unfence content (ADR 0008: exact or an
    error)."""
    trust: TrustLevel = item.trust  # type: ignore[union-attr]  # called for items with a trust
    back = p.trust_for(index, message, default)
    if trust is not back:
        raise ConversionError(
            p.source,
            k,
            "trust",
            f"{trust.value} has no {p.source} form: this message would be read back as "
            f"{back.value} (pass to_items and from_items the same trust= and tool_trust=)",
        )


#: The largest sequence number canonical JSON holds exactly (ADR 0001).
MAX_SEQ = 2**53 - 1


class Sequencer:
    """Hands out ``seq`` values item by item, as ``Provenance`` says; each within
    ``±MAX_SEQ`` (what an item's canonical JSON holds), or a ``ConversionError`` naming the
    message and ``seq_field`` or ``first_seq``."""

    __slots__ = ("_field", "_first_of_message", "_index", "_message_seq", "_next", "_p")

    def __init__(self, p: Provenance) -> None:
        if p.first_seq is not None and not is_int(p.first_seq):
            raise p.error(0, "first_seq", f"expected an int, got {type(p.first_seq).__name__}")
        self._p = p
        self._field = p.seq_field
        self._next = p.first_seq
        self._message_seq: int | None = None
        self._first_of_message = True
        self._index = 0

    def message(self, p: Provenance, index: int, seq_value: object) -> None:
        """Start message ``index``; ``seq_value`` is its ``seq_field`` value (ignored without one)."""
        self._first_of_message = True
        self._index = index
        if self._field is not None:
            if not is_int(seq_value):
                raise p.error(
                    index, self._field, f"sequence field: expected an int, got {type(seq_value).__name__}"
                )
            assert isinstance(seq_value, int)
            if not -MAX_SEQ <= seq_value <= MAX_SEQ:
                raise p.error(index, self._field, f"sequence field: {seq_value} is outside ±(2**53-1)")
            self._message_seq = seq_value

    def take(self) -> int | None:
        if self._field is not None:
            seq = self._message_seq if self._first_of_message else None
            self._first_of_message = False
            return seq
        if self._next is None:
            return None
        seq = self._next
        if not -MAX_SEQ <= seq <= MAX_SEQ:
            raise self._p.error(self._index, "first_seq", f"numbering reaches {seq}, outside ±(2**53-1)")
        self._next += 1
        return seq


def text_parts(
    p: Provenance, index: int, field: str, blocks: Sequence[Any], text_type: str
) -> tuple[TextPart, ...]:
    """``[{"type": text_type, "text": ...}, ...]`` as text parts; any other block is an error."""
    parts = []
    for j, block in enumerate(blocks):
        where = f"{field}[{j}]"
        if not isinstance(block, Mapping):
            raise p.error(index, where, f"expected a {text_type!r} block, got {type(block).__name__}")
        if block.get("type") != text_type:
            raise p.error(index, f"{where}.type", f"{block.get('type')!r} has no ctxengine form (text only)")
        extra = sorted(set(block) - {"type", "text"})
        if extra:
            raise p.error(index, f"{where}.{extra[0]}", "has no ctxengine form")
        parts.append(text_part(p, index, where, block.get("text")))
    return tuple(parts)


def text_part(p: Provenance, index: int, where: str, text: object) -> TextPart:
    """Block ``where``'s text as a ``TextPart``; a non-str or a text no item can hold (a lone
    surrogate) is a ``ConversionError`` at ``{where}.text``."""
    if not isinstance(text, str):
        raise p.error(index, f"{where}.text", f"expected a str, got {type(text).__name__}")
    try:
        return TextPart(text)
    except ModelValidationError as exc:
        raise p.error(index, f"{where}.text", exc.reason) from None


def content_value(
    p: Provenance, index: int, field: str, value: Any, text_type: str
) -> str | tuple[TextPart, ...]:
    """A format's ``content`` (a string or a list of text blocks) as item content."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return text_parts(p, index, field, value, text_type)
    raise p.error(
        index, field, f"expected a str or a list of {text_type!r} blocks, got {type(value).__name__}"
    )


def content_out(
    content: str | tuple[Any, ...], text_type: str, where: Callable[[str, str], ConversionError]
) -> Any:
    """Item content in a format: a string stays one, text parts become ``text_type`` blocks."""
    if isinstance(content, str):
        return content
    out = []
    for j, part in enumerate(content):
        if not isinstance(part, TextPart):
            raise where(f"content[{j}]", f"{type(part).__name__} has no form in this format")
        out.append({"type": text_type, "text": part.text})
    return out


def parse_arguments(p: Provenance, index: int, field: str, text: Any) -> dict[str, Any]:
    """A JSON-object argument string as a dict (ctxengine holds arguments as JSON values)."""
    if not isinstance(text, str):
        raise p.error(index, field, f"expected a JSON string, got {type(text).__name__}")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise p.error(index, field, "not valid JSON") from None
    if not isinstance(value, dict):
        raise p.error(index, field, f"expected a JSON object, got {type(value).__name__}")
    return value


def dump_arguments(arguments: Mapping[str, Any]) -> str:
    """Arguments as compact JSON, keys in the order held (what the model wrote, re-spaced)."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def make(
    p: Provenance,
    index: int,
    cls: Callable[..., ConversationItem],
    *args: Any,
    fields: Mapping[str, str] | None = None,
    blocks: Sequence[int] | None = None,
    **kwargs: Any,
) -> ConversationItem:
    """``cls(*args, **kwargs)``, validated as the item it must be: the model's checks, and
    canonical JSON (ADR 0001: no lone surrogate, NaN, integer beyond ±(2**53-1), nesting
    beyond the limit), so a bad value fails here, at its message, not later in a cut.

    A failure is a ``ConversionError`` at ``index`` naming the message field the value came
    from: ``fields`` maps an item field to that field where the names differ
    (``{"arguments": "tool_calls[0].function.arguments"}``; ``""`` for a field that is the
    message itself), and ``blocks[k]`` is the message block that text part ``k`` came from
    when the item holds a run of the message's blocks."""
    try:
        item = cls(*args, **kwargs)
        item.canonical_bytes()  # computed once and cached on the item
    except ModelValidationError as exc:
        raise p.error(index, message_field(exc.field, fields, blocks), exc.reason) from None
    except CanonicalizationError as exc:
        raise p.error(index, message_field(exc.path, fields, blocks), exc.reason) from None
    return item


_PATH = re.compile(r"^\$?\.?([A-Za-z_]+)(?:\[(\d+)\])?(.*)$", re.DOTALL)


def message_field(path: str, fields: Mapping[str, str] | None, blocks: Sequence[int] | None) -> str:
    """An item's field or JSON path (``$.content[1].text``) as the message's field."""
    match = _PATH.match(path)
    if match is None:
        return path
    name, position, rest = match.groups()
    if position is not None:
        k = int(position)
        if name == "content" and blocks is not None and k < len(blocks):
            k = blocks[k]
        rest = f"[{k}]{rest}"
    field = (fields or {}).get(name, name)
    if not field:
        return rest.lstrip(".") or "<item>"
    return field + rest


def only_fields(p: Provenance, index: int, message: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """Every key of ``message`` is one this converter reads; anything else would be dropped."""
    for key in message:
        if key not in allowed and key != p.seq_field:
            raise p.error(index, str(key), "has no ctxengine form")


def check_groups(
    p: Provenance, owners: Sequence[int], groups: Iterator[tuple[int, int]], n_items: int
) -> None:
    """Items made from one message must regroup into that message on the way back.

    ``owners[k]`` is the message each item came from; ``groups`` are the
    ``(start, end)`` item runs the reverse conversion would make. A message
    whose items would merge with a neighbour's (or split) cannot round-trip,
    so it is an error rather than a silent reshaping.
    """
    for start, end in groups:
        first = owners[start]
        if owners[end - 1] != first:
            bad = next(owners[k] for k in range(start, end) if owners[k] != first)
            raise p.error(bad, "role", "merges with the message before it on the way back; merge them first")
        if start > 0 and owners[start - 1] == first:
            raise p.error(first, "content", "would split into several messages on the way back")
    del n_items


def seq_of(message: Mapping[str, Any], p: Provenance) -> object:
    return message.get(p.seq_field) if p.seq_field is not None else None


def item_error(source: str) -> Callable[[int], Callable[[str, str], ConversionError]]:
    """``item_error(src)(i)(field, reason)``: an error about item ``i`` on the way out."""

    def at(index: int) -> Callable[[str, str], ConversionError]:
        def err(field: str, reason: str) -> ConversionError:
            return ConversionError(source, index, field, reason)

        return err

    return at


__all__ = [
    "MAX_SEQ",
    "Provenance",
    "Sequencer",
    "TrustOverride",
    "check_groups",
    "check_trust",
    "text_part",
    "content_out",
    "content_value",
    "dump_arguments",
    "item_error",
    "make",
    "message_field",
    "only_fields",
    "parse_arguments",
    "seq_of",
    "text_parts",
]
