"""Call-time tool authorization: scopes are checked when a tool is called, never by editing
the prefix (a revoked scope leaves the tool advertised and the call refused)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..model import Principal
from .context_plan import ContextPlan


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """The gate's answer. A refusal is content the model can read, not an exception."""

    allowed: bool
    tool_name: str
    reason: str = "allowed"
    missing_scopes: tuple[str, ...] = ()

    def refusal(self) -> dict[str, Any]:
        return {
            "error": "tool_call_refused",
            "tool": self.tool_name,
            "reason": self.reason,
            "missing_scopes": list(self.missing_scopes),
            "message": self.message,
        }

    @property
    def message(self) -> str:
        if self.allowed:
            return f"{self.tool_name} may be called."
        if self.reason == "tool_not_in_plan":
            return f"The tool {self.tool_name!r} is not available in this session."
        scopes = ", ".join(self.missing_scopes)
        return (
            f"The tool {self.tool_name!r} was not called: the current user lacks the scope(s) {scopes}. "
            "Do not retry it; continue without it or ask the user."
        )


class ToolGate:
    """Call-time authorization: scopes are checked when a tool is called, never by editing the prefix.

    ``required_scopes`` maps a tool name to the scopes a principal must hold.
    """

    def __init__(self, required_scopes: Mapping[str, Iterable[str]] | None = None) -> None:
        self._required = {name: frozenset(scopes) for name, scopes in (required_scopes or {}).items()}

    def check(self, plan: ContextPlan, principal: Principal, tool_name: str) -> ToolDecision:
        if tool_name not in plan.tool_names:
            return ToolDecision(False, tool_name, "tool_not_in_plan")
        missing = tuple(sorted(self._required.get(tool_name, frozenset()) - principal.scopes))
        if missing:
            return ToolDecision(False, tool_name, "scope_missing", missing)
        return ToolDecision(True, tool_name)


__all__ = ["ToolDecision", "ToolGate"]
