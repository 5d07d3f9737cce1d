"""Provider renderers: a ``ModelRequest`` as the plain-dict body each API accepts.

Every renderer keeps tool pairs paired (a call's results follow it before
anything else of the same kind), starts the conversation where the API
requires it, and merges consecutive same-role turns where the API needs it.
"""

from __future__ import annotations

from .anthropic import to_anthropic_messages
from .openai import to_openai_chat, to_openai_responses
from .pairs import check_wire_pairs

__all__ = ["check_wire_pairs", "to_anthropic_messages", "to_openai_chat", "to_openai_responses"]
