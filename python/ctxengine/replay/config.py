"""Named replay configurations (issue 42): what a recorded session is replayed under.

A configuration is a model window and output reserve, a counting method, a budget policy
(``core.budget.BudgetPolicy``: its caps, ``item.max_ratio`` and the clearing keys of ADR
0021) and compaction settings. They come from a TOML or JSON file::

    [configs.small]
    model = "openai:gpt-4o-mini"     # provider:model
    window = 16000                   # context window, tokens
    max_output = 4096                # the model's largest output
    output_reserve = 2048            # tokens kept free for the answer
    counting = "exact"               # "exact" (o200k_base), "estimate" (heuristic) or "auto"
    instructions = "You are ..."     # the agent's instructions (the prefix); optional
    [configs.small.policy]           # BudgetPolicy.from_dict overrides
    history = { floor_tokens = 4000 }
    clearing = { keep_pairs = 2 }
    [configs.small.compaction]
    enabled = true                   # compact when the history does not fit (the loop's rule)
    max_depth = 8                    # summaries of summaries
    max_listed_spans = 64            # elided spans the summary lists

or from flags (one configuration). Every bad key raises ``PolicyError`` naming it by its
path (``configs.small.window``).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.budget import BudgetPolicy
from ..errors import PolicyError
from ..model import ResolvedModel
from ..model.checkpoint import MAX_COMPACTION_DEPTH

#: Counting methods a configuration names, and the encoding each forces (``None``: the
#: estimator's model table decides, ADR 0012).
COUNTING: Mapping[str, str | None] = {"exact": "o200k_base", "estimate": "heuristic", "auto": None}
#: The agent instructions of a configuration that names none (a foreign transcript's system
#: messages take their place).
DEFAULT_INSTRUCTIONS = "You are a helpful agent."
_KEYS = frozenset(
    {"model", "window", "max_output", "output_reserve", "counting", "instructions", "policy", "compaction"}
)
_COMPACTION_KEYS = frozenset({"enabled", "max_depth", "max_listed_spans"})


@dataclass(frozen=True, slots=True)
class Compaction:
    """When and how a replay compacts: as the loop does (``build_with_pressure``), with the
    ``StructuredCompactor``'s depth and listing limits."""

    enabled: bool = True
    max_depth: int = MAX_COMPACTION_DEPTH
    max_listed_spans: int = 64


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """One named configuration a session is replayed under."""

    name: str
    model: ResolvedModel = field(
        default_factory=lambda: ResolvedModel("openai", "gpt-4o-mini", 32_000, 4_096, 4_096)
    )
    counting: str = "exact"
    policy: BudgetPolicy = field(default_factory=BudgetPolicy)
    compaction: Compaction = field(default_factory=Compaction)
    instructions: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or len(self.name) > 64:
            raise PolicyError("name", f"expected a name of 1-64 characters, got {self.name!r:.80}")
        if self.counting not in COUNTING:
            raise PolicyError(f"configs.{self.name}.counting", f"expected one of {sorted(COUNTING)}")

    @property
    def encoding(self) -> str | None:
        return COUNTING[self.counting]

    def to_dict(self) -> dict[str, Any]:
        m = self.model
        return {
            "name": self.name,
            "model": m.model_id,
            "window": m.context_window,
            "max_output": m.max_output_tokens,
            "output_reserve": m.default_output_reserve,
            "counting": self.counting,
            "policy": self.policy.to_dict(),
            "compaction": {
                "enabled": self.compaction.enabled,
                "max_depth": self.compaction.max_depth,
                "max_listed_spans": self.compaction.max_listed_spans,
            },
        }


def _int(where: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PolicyError(where, f"expected an integer >= {low}, got {value!r:.60}")
    return value


def _str(where: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise PolicyError(where, f"expected a non-empty string, got {value!r:.60}")
    return value


def _model(where: str, value: object, window: int, max_output: int, reserve: int) -> ResolvedModel:
    text = _str(where, value)
    provider, sep, name = text.partition(":")
    if not sep or not provider or not name:
        raise PolicyError(where, f"expected provider:model, got {text!r:.60}")
    return ResolvedModel(provider, name, window, max_output, reserve)


def config_from_dict(name: str, table: Mapping[str, Any]) -> ReplayConfig:
    """One configuration from its table (the file's ``configs.NAME``)."""
    at = f"configs.{name}"
    if not isinstance(table, Mapping):
        raise PolicyError(at, f"expected a table, got {type(table).__name__}")
    for key in table:
        if key not in _KEYS:
            raise PolicyError(f"{at}.{key}", f"unknown key (known: {', '.join(sorted(_KEYS))})")
    window = _int(f"{at}.window", table.get("window", 32_000), 1)
    max_output = _int(f"{at}.max_output", table.get("max_output", 4_096), 1)
    reserve = _int(f"{at}.output_reserve", table.get("output_reserve", min(4_096, max_output)), 0)
    if reserve > max_output:
        raise PolicyError(f"{at}.output_reserve", f"{reserve} exceeds max_output {max_output}")
    model = _model(f"{at}.model", table.get("model", "openai:gpt-4o-mini"), window, max_output, reserve)
    counting = table.get("counting", "exact")
    if counting not in COUNTING:
        raise PolicyError(f"{at}.counting", f"expected one of {sorted(COUNTING)}, got {counting!r:.60}")
    policy_table = table.get("policy", {})
    try:
        policy = BudgetPolicy.from_dict(policy_table)
    except PolicyError as exc:
        raise PolicyError(f"{at}.policy.{exc.key}", exc.reason) from None
    compaction = _compaction(f"{at}.compaction", table.get("compaction", {}))
    instructions = table.get("instructions")
    if instructions is not None:
        instructions = _str(f"{at}.instructions", instructions)
    return ReplayConfig(name, model, str(counting), policy, compaction, instructions)


def _compaction(at: str, table: object) -> Compaction:
    if not isinstance(table, Mapping):
        raise PolicyError(at, f"expected a table, got {type(table).__name__}")
    for key in table:
        if key not in _COMPACTION_KEYS:
            raise PolicyError(f"{at}.{key}", f"unknown key (known: {', '.join(sorted(_COMPACTION_KEYS))})")
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise PolicyError(f"{at}.enabled", f"expected true or false, got {enabled!r:.60}")
    depth = _int(f"{at}.max_depth", table.get("max_depth", MAX_COMPACTION_DEPTH), 1)
    spans = _int(f"{at}.max_listed_spans", table.get("max_listed_spans", 64), 0)
    return Compaction(enabled, depth, spans)


def configs_from_dict(data: Mapping[str, Any]) -> list[ReplayConfig]:
    """Every configuration of a parsed file: ``{"configs": {NAME: {...}, ...}}``."""
    if not isinstance(data, Mapping):
        raise PolicyError("<root>", f"expected a table, got {type(data).__name__}")
    for key in data:
        if key != "configs":
            raise PolicyError(str(key), "unknown key (a file holds one table, configs)")
    tables = data.get("configs")
    if not isinstance(tables, Mapping) or not tables:
        raise PolicyError("configs", "expected a table of at least one named configuration")
    return [config_from_dict(str(name), table) for name, table in tables.items()]


def load_configs(path: str | Path) -> list[ReplayConfig]:
    """The configurations of a ``.toml`` or ``.json`` file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise PolicyError(str(p), f"cannot read: {exc.strerror}") from None
    try:
        data = json.loads(raw) if p.suffix.lower() == ".json" else tomllib.loads(raw.decode())
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "JSON" if p.suffix.lower() == ".json" else "TOML"
        raise PolicyError(str(p), f"not valid {kind}: {exc}") from None
    return configs_from_dict(data)


def check_names(configs: Sequence[ReplayConfig]) -> None:
    """Names are unique and never a baseline's."""
    seen: set[str] = set()
    for c in configs:
        if c.name in seen:
            raise PolicyError(f"configs.{c.name}", "a configuration of this name is given twice")
        if c.name in ("full_history", "trim_messages"):
            raise PolicyError(f"configs.{c.name}", "is a baseline's name")
        seen.add(c.name)


__all__ = [
    "COUNTING",
    "DEFAULT_INSTRUCTIONS",
    "Compaction",
    "ReplayConfig",
    "check_names",
    "config_from_dict",
    "configs_from_dict",
    "load_configs",
]
