"""Budget policy and allocation: every class has an absolute cap; only history scales.

The arithmetic runs on the active backend (``allocate_tokens``, ADR 0001);
this module owns the policy shape, its validation and the ``ContextBudget``
value.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..errors import ContextOverflow, PolicyError
from ..model import ResolvedModel
from . import backends

# (section, key) -> (field name, kind). Kinds: "tokens" (int >= 0),
# "items" (int >= 0), "ratio" (float in [0, 1)), "names" (a list of non-empty strings).
_SCHEMA: dict[tuple[str, str], tuple[str, str]] = {
    ("platform_policy", "max_tokens"): ("platform_policy_tokens", "tokens"),
    ("agent_instructions", "max_tokens"): ("agent_instructions_tokens", "tokens"),
    ("tool_definitions", "max_items"): ("tool_definitions_items", "items"),
    ("tool_definitions", "max_tokens"): ("tool_definitions_tokens", "tokens"),
    ("skill_catalog", "max_items"): ("skill_catalog_items", "items"),
    ("skill_catalog", "max_tokens"): ("skill_catalog_tokens", "tokens"),
    ("memory_snapshot", "max_items"): ("memory_snapshot_items", "items"),
    ("memory_snapshot", "max_tokens"): ("memory_snapshot_tokens", "tokens"),
    ("prefix", "ceiling_tokens"): ("prefix_ceiling_tokens", "tokens"),
    ("skill_bodies", "max_items"): ("skill_bodies_items", "items"),
    ("skill_bodies", "max_tokens"): ("skill_bodies_tokens", "tokens"),
    ("working_state", "max_tokens"): ("working_state_tokens", "tokens"),
    ("knowledge", "max_items"): ("knowledge_items", "items"),
    ("knowledge", "max_tokens"): ("knowledge_tokens", "tokens"),
    ("recall", "max_tokens"): ("recall_tokens", "tokens"),
    ("notes", "max_tokens"): ("notes_tokens", "tokens"),
    ("tool_results", "ratio"): ("tool_results_ratio", "ratio"),
    ("history", "floor_tokens"): ("history_floor_tokens", "tokens"),
    ("output", "reserve_tokens"): ("output_reserve_tokens", "tokens"),
    ("safety", "margin_ratio"): ("safety_margin_ratio", "ratio"),
    # Long runs (ADR 0021; plans of builder version 2): the per-item cap and clearing inside a run.
    ("item", "max_ratio"): ("item_max_ratio", "ratio"),
    ("clearing", "keep_pairs"): ("clearing_keep_pairs", "items"),
    ("clearing", "at_least_tokens"): ("clearing_at_least_tokens", "tokens"),
    ("clearing", "at_least_ratio"): ("clearing_at_least_ratio", "ratio"),
    ("clearing", "exclude_tools"): ("clearing_exclude_tools", "names"),
}

# The prefix classes of Region A, with their (tokens, items) policy fields.
PREFIX_CLASSES: dict[str, tuple[str, str | None]] = {
    "platform_policy": ("platform_policy_tokens", None),
    "agent_instructions": ("agent_instructions_tokens", None),
    "tool_definitions": ("tool_definitions_tokens", "tool_definitions_items"),
    "skill_catalog": ("skill_catalog_tokens", "skill_catalog_items"),
    "memory_snapshot": ("memory_snapshot_tokens", "memory_snapshot_items"),
}


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """Absolute caps per class (tokens unless named items); SPEC section 3 defaults."""

    platform_policy_tokens: int = 2000
    agent_instructions_tokens: int = 4000
    tool_definitions_items: int = 30
    tool_definitions_tokens: int = 6000
    skill_catalog_items: int = 20
    skill_catalog_tokens: int = 1500
    memory_snapshot_items: int = 40
    memory_snapshot_tokens: int = 1500
    prefix_ceiling_tokens: int = 15000
    skill_bodies_items: int = 2
    skill_bodies_tokens: int = 6000
    working_state_tokens: int = 1000
    knowledge_items: int = 3
    knowledge_tokens: int = 3000
    recall_tokens: int = 2000
    notes_tokens: int = 1000
    tool_results_ratio: float = 0.25
    history_floor_tokens: int = 8000
    output_reserve_tokens: int = 8192
    safety_margin_ratio: float = 0.05
    #: An item rendering to more than this share of the usable body (and at least
    #: ``ITEM_CAP_FLOOR`` tokens) is shown clipped (ADR 0021).
    item_max_ratio: float = 0.25
    #: Completed tool pairs of the current run kept verbatim, newest first (ADR 0021).
    clearing_keep_pairs: int = 3
    #: Tokens one clearing step frees at least (ADR 0021) ...
    clearing_at_least_tokens: int = 4096
    #: ... and at least this share of the current turn's budget (a step that frees a few
    #: thousand tokens of a 100k turn changes the body, and so misses the cache, every step).
    clearing_at_least_ratio: float = 0.25
    #: Tools whose results are never cleared (ADR 0021).
    clearing_exclude_tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        by_field = {name: (section, key, kind) for (section, key), (name, kind) in _SCHEMA.items()}
        for f in fields(self):
            section, key, kind = by_field[f.name]
            value = getattr(self, f.name)
            _check_value(f"{section}.{key}", kind, value)
            if kind == "names" and not isinstance(value, tuple):
                object.__setattr__(self, f.name, tuple(value))  # a frozen, hashable policy

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BudgetPolicy:
        """Override the defaults key by key: ``{"history": {"floor_tokens": 8000}, ...}``."""
        if not isinstance(d, Mapping):
            raise PolicyError("<root>", f"expected a table, got {type(d).__name__}")
        changes: dict[str, Any] = {}
        sections = {section for section, _ in _SCHEMA}
        for section, table in d.items():
            if section not in sections:
                raise PolicyError(str(section), "unknown section")
            if not isinstance(table, Mapping):
                raise PolicyError(str(section), f"expected a table, got {type(table).__name__}")
            for key, value in table.items():
                entry = _SCHEMA.get((section, key))
                if entry is None:
                    raise PolicyError(f"{section}.{key}", "unknown key")
                name, kind = entry
                _check_value(f"{section}.{key}", kind, value)
                changes[name] = (
                    float(value) if kind == "ratio" else tuple(value) if kind == "names" else value
                )
        return replace(cls(), **changes)

    @classmethod
    def from_toml(cls, path: str | Path) -> BudgetPolicy:
        """Read overrides from a TOML file in the ``from_dict`` shape."""
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(str(path), f"not valid TOML: {exc}") from exc
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for (section, key), (name, kind) in _SCHEMA.items():
            value = getattr(self, name)
            out.setdefault(section, {})[key] = list(value) if kind == "names" else value
        return out


#: The per-item cap never falls below this many tokens (ADR 0021).
ITEM_CAP_FLOOR = 1024


def _check_value(where: str, kind: str, value: object) -> None:
    if kind == "names":
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise PolicyError(where, f"expected a list of names, got {type(value).__name__}")
        for i, name in enumerate(value):
            if not isinstance(name, str) or not name:
                raise PolicyError(f"{where}[{i}]", f"expected a non-empty string, got {name!r:.60}")
        return
    if kind == "ratio":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PolicyError(where, f"expected a number, got {type(value).__name__}")
        if not 0.0 <= float(value) < 1.0:
            raise PolicyError(where, f"must be in [0, 1), got {value}")
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(where, f"expected an integer, got {type(value).__name__}")
    if value < 0:
        raise PolicyError(where, f"must be >= 0, got {value}")


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """The absolute token budget of one plan (SPEC section 3)."""

    total_tokens: int
    reserve_output_tokens: int
    prefix_tokens: int
    body_tokens: int
    usable_body_tokens: int
    platform_tokens: int
    agent_tokens: int
    tool_tokens: int
    skill_catalog_tokens: int
    skill_body_tokens: int
    retrieved_context_tokens: int
    history_tokens: int
    working_state_tokens: int
    tool_result_tokens: int
    knowledge_tokens: int
    safety_margin_ratio: float

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ContextBudget:
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        missing = names - set(d)
        if unknown or missing:
            raise PolicyError("ContextBudget", f"unknown keys {sorted(unknown)}, missing {sorted(missing)}")
        return cls(**dict(d))


def allocate(model: ResolvedModel, prefix_tokens: int, policy: BudgetPolicy | None = None) -> ContextBudget:
    """Split ``model``'s window after a measured prefix; raises ``ContextOverflow``."""
    policy = policy or BudgetPolicy()
    if isinstance(prefix_tokens, bool) or not isinstance(prefix_tokens, int) or prefix_tokens < 0:
        raise PolicyError("prefix_tokens", f"must be a non-negative integer, got {prefix_tokens!r}")
    reserve, body, usable, tool_results, history = backends.active().allocate_tokens(
        model.context_window,
        model.max_output_tokens,
        model.default_output_reserve,
        prefix_tokens,
        policy.output_reserve_tokens,
        policy.safety_margin_ratio,
        policy.tool_results_ratio,
        policy.working_state_tokens,
        policy.history_floor_tokens,
        policy.prefix_ceiling_tokens,
    )
    return ContextBudget(
        total_tokens=model.context_window,
        reserve_output_tokens=reserve,
        prefix_tokens=prefix_tokens,
        body_tokens=body,
        usable_body_tokens=usable,
        platform_tokens=policy.platform_policy_tokens,
        agent_tokens=policy.agent_instructions_tokens,
        tool_tokens=policy.tool_definitions_tokens,
        skill_catalog_tokens=policy.skill_catalog_tokens,
        skill_body_tokens=policy.skill_bodies_tokens,
        retrieved_context_tokens=policy.recall_tokens,
        history_tokens=history,
        working_state_tokens=policy.working_state_tokens,
        tool_result_tokens=tool_results,
        knowledge_tokens=policy.knowledge_tokens,
        safety_margin_ratio=policy.safety_margin_ratio,
    )


def check_prefix_class(policy: BudgetPolicy, budget_class: str, tokens: int, items: int = 1) -> None:
    """Raise ``ContextOverflow`` when one Region A class is over its item or token cap."""
    try:
        tokens_field, items_field = PREFIX_CLASSES[budget_class]
    except KeyError:
        raise PolicyError(budget_class, "not a prefix class") from None
    if items_field is not None:
        max_items = getattr(policy, items_field)
        if items > max_items:
            raise ContextOverflow(
                budget_class,
                tokens,
                getattr(policy, tokens_field),
                f"{items} items exceed the cap of {max_items} items; {policy_knob(items_field, 'raise')}",
            )
    cap = getattr(policy, tokens_field)
    if tokens > cap:
        raise ContextOverflow(
            budget_class,
            tokens,
            cap,
            f"{tokens} tokens exceed the cap of {cap} tokens; {policy_knob(tokens_field, 'raise')}",
        )


def policy_knob(field: str, verb: str) -> str:
    """``"raise BudgetPolicy history.floor_tokens (BudgetPolicy.from_dict(...))"``: how an error
    names the policy key that moves ``field`` (a ``BudgetPolicy`` field name)."""
    section, key = _KNOBS[field]
    return f"{verb} BudgetPolicy {section}.{key} (BudgetPolicy.from_dict({{'{section}': {{'{key}': N}}}}))"


# field name -> (section, key): the inverse of _SCHEMA, for the errors that name a knob.
_KNOBS: dict[str, tuple[str, str]] = {field: path for path, (field, _) in _SCHEMA.items()}


__all__ = [
    "ITEM_CAP_FLOOR",
    "PREFIX_CLASSES",
    "BudgetPolicy",
    "ContextBudget",
    "allocate",
    "check_prefix_class",
    "policy_knob",
]
