"""RFC 8785 canonical JSON and payload hashing, on the active backend."""

from __future__ import annotations

from . import backends


def canonical_json(value: object) -> bytes:
    """RFC 8785 (JCS) bytes of ``value``; raises ``CanonicalizationError`` naming the JSON path."""
    data: bytes = backends.active().canonical_json(value)
    return data


def payload_hash(value: object) -> str:
    """Lowercase SHA-256 hex of ``canonical_json(value)``."""
    digest: str = backends.active().payload_hash(value)
    return digest


__all__ = ["canonical_json", "payload_hash"]
