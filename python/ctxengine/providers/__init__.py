"""Provider renderers: a ``ModelRequest`` as the plain-dict body each API accepts.

Every renderer keeps tool pairs paired (a call's results follow it before
anything else of the same kind), gives each pair an id of its own within the
request (``wire_call_ids``: a history may reuse an id once its pair is complete),
starts the conversation where the API requires it, and merges consecutive
same-role turns where the API needs it.
"""

from __future__ import annotations

from .anthropic import to_anthropic_messages
from .openai import to_openai_chat, to_openai_responses
from .pairs import check_wire_pairs, wire_call_ids
from .routers import anthropic_router, openai_router

__all__ = [
    "anthropic_router",
    "check_wire_pairs",
    "to_anthropic_messages",
    "to_openai_chat",
    "openai_router",
    "to_openai_responses",
    "wire_call_ids",
]
