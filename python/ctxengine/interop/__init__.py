"""Adopt ctxengine without rewriting a runtime: foreign histories <-> ctxengine items.

One module per format, each with ``to_items(history, ...)`` and
``from_items(items, ...)``:

- ``openai_chat``: Chat Completions ``messages`` (and ``select_history``, the
  cut over dict messages without building items),
- ``openai_responses``: Responses ``input`` items,
- ``anthropic``: Messages ``system`` + ``messages`` (thinking blocks are
  ``ReasoningItem`` items),
- ``langchain``: ``BaseMessage`` lists (needs ``langchain-core``),
- ``mappings``: ctxengine's own item dicts (``to_dict()``), cut without decoding.

The round trip format -> items -> format gives back every field the format
defines for a request history; response-only metadata is dropped by design
(each module lists it). Whatever else has no ctxengine form raises
``ConversionError`` naming the message index and field: nothing is dropped
silently. Tool output from a foreign history is ``external_untrusted`` by
default (ADR 0008); ``trust=`` and ``tool_trust=`` change that per message.
Trust is not written on the way out: ``from_items`` takes the same ``trust=`` and
``tool_trust=`` and raises ``ConversionError`` (field ``trust``) for an item that
``to_items`` would read back with another trust, so items -> format -> items is
exact too, or an error, never a silent change of trust.
"""

from __future__ import annotations

from ..errors import ConversionError
from . import anthropic, langchain, mappings, openai_chat, openai_responses
from ._common import Provenance, TrustOverride

__all__ = [
    "ConversionError",
    "Provenance",
    "TrustOverride",
    "anthropic",
    "langchain",
    "mappings",
    "openai_chat",
    "openai_responses",
]
