"""What a request is made for: tools, the resolved model, the agent, the principal, the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import ModelValidationError
from .checks import JSON, _get, _get_list, _optional_int, _require, _str_set
from .items import _Item


@dataclass(frozen=True, slots=True, eq=True)
class ToolSpec(_Item):
    name: str
    description: str
    input_schema: dict[str, Any]
    _cj: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    kind: ClassVar[str] = "tool_spec"
    __hash__ = _Item.__hash__

    def __post_init__(self) -> None:
        _require("ToolSpec", "name", self.name, str)
        if not self.name:
            raise ModelValidationError("ToolSpec", "name", "must not be empty")
        _require("ToolSpec", "description", self.description, str)
        _require("ToolSpec", "input_schema", self.input_schema, dict)
        object.__setattr__(self, "input_schema", dict(self.input_schema))

    def to_dict(self) -> dict[str, JSON]:
        return {
            "type": self.kind,
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolSpec:
        n = "ToolSpec"
        return cls(_get(d, n, "name"), _get(d, n, "description"), _get(d, n, "input_schema"))


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    provider: str
    model: str
    context_window: int
    max_output_tokens: int
    default_output_reserve: int
    capabilities: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        n = "ResolvedModel"
        _require(n, "provider", self.provider, str)
        _require(n, "model", self.model, str)
        for name in ("context_window", "max_output_tokens", "default_output_reserve"):
            value = getattr(self, name)
            _require(n, name, value, int)
            if value <= 0:
                raise ModelValidationError(n, name, f"must be positive, got {value}")
        object.__setattr__(self, "capabilities", _str_set(n, "capabilities", self.capabilities))

    @property
    def model_id(self) -> str:
        return f"{self.provider}:{self.model}"

    def to_dict(self) -> dict[str, JSON]:
        return {
            "provider": self.provider,
            "model": self.model,
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "default_output_reserve": self.default_output_reserve,
            "capabilities": sorted(self.capabilities),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ResolvedModel:
        n = "ResolvedModel"
        return cls(
            _get(d, n, "provider"),
            _get(d, n, "model"),
            _get(d, n, "context_window"),
            _get(d, n, "max_output_tokens"),
            _get(d, n, "default_output_reserve"),
            frozenset(_get_list(d, n, "capabilities")),
        )


@dataclass(frozen=True, slots=True)
class AgentSpec:
    agent_id: str
    version: str
    instructions: str

    def __post_init__(self) -> None:
        for name in ("agent_id", "version", "instructions"):
            _require("AgentSpec", name, getattr(self, name), str)

    def to_dict(self) -> dict[str, JSON]:
        return {"agent_id": self.agent_id, "version": self.version, "instructions": self.instructions}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentSpec:
        n = "AgentSpec"
        return cls(_get(d, n, "agent_id"), _get(d, n, "version"), _get(d, n, "instructions"))


@dataclass(frozen=True, slots=True)
class Principal:
    principal_id: str
    tenant_id: str
    scopes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _require("Principal", "principal_id", self.principal_id, str)
        _require("Principal", "tenant_id", self.tenant_id, str)
        object.__setattr__(self, "scopes", _str_set("Principal", "scopes", self.scopes))

    def to_dict(self) -> dict[str, JSON]:
        return {"principal_id": self.principal_id, "tenant_id": self.tenant_id, "scopes": sorted(self.scopes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Principal:
        n = "Principal"
        return cls(_get(d, n, "principal_id"), _get(d, n, "tenant_id"), frozenset(_get_list(d, n, "scopes")))


@dataclass(frozen=True, slots=True)
class RunContext:
    run_id: str
    session_id: str
    seed_sequence: int
    step: int = 0
    max_output_tokens: int | None = None

    def __post_init__(self) -> None:
        n = "RunContext"
        _require(n, "run_id", self.run_id, str)
        _require(n, "session_id", self.session_id, str)
        _require(n, "seed_sequence", self.seed_sequence, int)
        _require(n, "step", self.step, int)
        _optional_int(n, "max_output_tokens", self.max_output_tokens)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "seed_sequence": self.seed_sequence,
            "step": self.step,
            "max_output_tokens": self.max_output_tokens,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunContext:
        n = "RunContext"
        return cls(
            _get(d, n, "run_id"),
            _get(d, n, "session_id"),
            _get(d, n, "seed_sequence"),
            _get(d, n, "step", 0),
            _get(d, n, "max_output_tokens", None),
        )
