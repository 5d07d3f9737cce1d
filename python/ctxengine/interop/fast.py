"""The cut over foreign dict messages on the active backend.

The Rust backend writes each message's items as canonical bytes straight
from the dicts and measures them by length (no item objects, no hashing,
no memo: measuring a length costs less than looking it up). Whatever it
does not take (another estimator, non-dict messages, a field it does not
know) goes to the reference, which raises the same typed errors. Both check
the cut's arguments as ``select_history`` does, before reading a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import TrustLevel
from ..reference import message_cut
from ..reference.arguments import check_cut_arguments, check_sequence
from ._backend import active_name
from ._common import Provenance, check_groups


def openai_chat_cut(
    messages: Sequence[Any],
    summary_floor: int,
    history_tokens: int,
    estimator: Any,
    model_id: str,
    *,
    seq_field: str | None,
    first_seq: int | None,
    tool_trust: TrustLevel | str = TrustLevel.EXTERNAL_UNTRUSTED,
    strict: bool = False,
) -> int:
    trust = TrustLevel(tool_trust)
    if active_name() == "rust" and not strict:  # the strict check is the reference's
        from .._core import openai_chat_cut

        cut: int = openai_chat_cut(
            messages, summary_floor, history_tokens, estimator, model_id, seq_field, first_seq, trust.value
        )
        if cut >= 0:
            return cut
    from . import openai_chat

    # The arguments first, in signature order, as the Rust path checks them.
    messages = check_sequence("select_history", "messages", messages, "messages")
    check_cut_arguments("select_history", summary_floor, history_tokens, estimator, model_id)
    p = Provenance(openai_chat.SOURCE, seq_field, first_seq, tool_trust=trust)
    items, owners = openai_chat._convert(p, messages)
    check_groups(p, owners, openai_chat.groups(items), len(items))
    return message_cut.items_cut(
        items, owners, len(messages), summary_floor, history_tokens, estimator, model_id, strict=strict
    )


__all__ = ["openai_chat_cut"]
