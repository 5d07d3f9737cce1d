"""Trust envelopes, as assembly renders them: the rules live in ``plan/envelope.py``
(the plan measures the rendered prefix, memory envelope included, at plan time;
ADR 0012). This module is their assembly-side name."""

from __future__ import annotations

from ..plan.envelope import (
    NONCE_HEX,
    clipped_envelope,
    envelope,
    escape_attr,
    escape_body,
    escape_inline,
    json_inline,
    needs_envelope,
    nonce_for,
)

__all__ = [
    "NONCE_HEX",
    "clipped_envelope",
    "envelope",
    "escape_attr",
    "escape_body",
    "escape_inline",
    "json_inline",
    "needs_envelope",
    "nonce_for",
]
