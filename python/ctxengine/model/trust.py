"""Trust levels: who authored a piece of content."""

from __future__ import annotations

import enum

from ..errors import ModelValidationError


class TrustLevel(enum.StrEnum):
    """Who authored a piece of content, most trusted first."""

    PLATFORM = "platform"
    TRUSTED_CONFIGURATION = "trusted_configuration"
    USER = "user"
    INTERNAL_TOOL = "internal_tool"
    EXTERNAL_UNTRUSTED = "external_untrusted"
    MEMORY = "memory"
    KNOWLEDGE = "knowledge"

    @property
    def rank(self) -> int:
        """0 is most trusted."""
        return _TRUST_ORDER.index(self)

    def is_trusted(self) -> bool:
        """True for platform and trusted_configuration: rendered without an envelope."""
        return self.rank <= TrustLevel.TRUSTED_CONFIGURATION.rank


_TRUST_ORDER = tuple(TrustLevel)


def _trust(type_name: str, value: object) -> TrustLevel:
    try:
        return TrustLevel(value)  # type: ignore[arg-type]  # validated here
    except ValueError:
        raise ModelValidationError(type_name, "trust", f"unknown trust level {value!r}") from None
