"""The session API (issue 41): ``Engine`` (an agent's configuration on a store), a
``Session`` handle per session and the ``Turn`` as the unit of work, with a blocking twin
(``Engine.open_sync``) and the table of models known by name (``MODELS``).

Above every engine layer and the provider renderers; the advanced layer it is built from
(planner, builder, loop, stores) stays public.
"""

from __future__ import annotations

from .blocking import BlockingEngine, BlockingSession, BlockingTurn
from .engine import DEFAULT_INSTRUCTIONS, DEFAULT_PRINCIPAL, Engine, Session
from .messages import Reply, Usage, read_reply, user_message
from .models import MODELS, ModelEntry, lookup_model, register_model
from .turn import WIRES, Turn

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_PRINCIPAL",
    "MODELS",
    "WIRES",
    "BlockingEngine",
    "BlockingSession",
    "BlockingTurn",
    "Engine",
    "ModelEntry",
    "Reply",
    "Session",
    "Turn",
    "Usage",
    "lookup_model",
    "read_reply",
    "register_model",
    "user_message",
]
