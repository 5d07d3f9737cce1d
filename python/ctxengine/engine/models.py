"""The models ``Engine.open(model="...")`` knows by name (issue 41).

Each entry is a ``ResolvedModel`` (provider, model, window, most output tokens, the output
reserve a request keeps by default) and how its tokens are counted: OpenAI's models with
their byte-pair encoding, exactly (the estimator knows their ids, ADR 0012), every other
model with the byte heuristic that the provider's usage calibrates. ``register_model`` adds
or replaces an entry; an entry with ``encoding=`` is counted exactly with that encoding.

Windows and output limits are the providers' published figures. A model whose input limit
is below its window less its output (GPT-5: 272k in, 128k out, 400k in all) keeps the
difference as its default reserve, so that no request is built larger than the input limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelValidationError
from ..model import ResolvedModel
from ..plan.context_plan import COUNTING_METHODS


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One named model: its limits and, when counted exactly, its encoding."""

    model: ResolvedModel
    #: The byte-pair encoding the model is counted with (``None``: the estimator's own rule
    #: for the model id: exact for OpenAI's public models, the heuristic elsewhere).
    encoding: str | None = None


def _openai(name: str, window: int, output: int, reserve: int = 16_384) -> ModelEntry:
    return ModelEntry(ResolvedModel("openai", name, window, output, min(reserve, output)))


def _anthropic(name: str, output: int, window: int = 200_000) -> ModelEntry:
    return ModelEntry(ResolvedModel("anthropic", name, window, output, min(8_192, output)))


_BUILT_IN = (
    _openai("gpt-5", 400_000, 128_000, 128_000),
    _openai("gpt-5-mini", 400_000, 128_000, 128_000),
    _openai("gpt-5-nano", 400_000, 128_000, 128_000),
    _openai("gpt-4.1", 1_047_576, 32_768, 8_192),
    _openai("gpt-4.1-mini", 1_047_576, 32_768, 8_192),
    _openai("gpt-4.1-nano", 1_047_576, 32_768, 8_192),
    _openai("gpt-4o", 128_000, 16_384, 8_192),
    _openai("gpt-4o-mini", 128_000, 16_384, 8_192),
    _openai("o3", 200_000, 100_000, 32_768),
    _openai("o4-mini", 200_000, 100_000, 32_768),
    _anthropic("claude-opus-4-1", 32_000),
    _anthropic("claude-sonnet-4-5", 64_000),
    _anthropic("claude-haiku-4-5", 64_000),
    _anthropic("claude-sonnet-4-0", 64_000),
    _anthropic("claude-3-5-haiku-latest", 8_192),
)

#: Name -> entry. Looked up by the model's name (``"gpt-4.1"``) or its id (``"openai:gpt-4.1"``).
MODELS: dict[str, ModelEntry] = {entry.model.model: entry for entry in _BUILT_IN}


def register_model(name: str, model: ResolvedModel, *, encoding: str | None = None) -> ModelEntry:
    """Add (or replace) the model ``name`` stands for; returns its entry."""
    if not isinstance(name, str) or not name:
        raise ModelValidationError("register_model", "name", "expected a non-empty str")
    if not isinstance(model, ResolvedModel):
        raise ModelValidationError("register_model", "model", f"expected a ResolvedModel, got {type(model)}")
    if encoding is not None and encoding not in COUNTING_METHODS - {"heuristic"}:
        known = sorted(COUNTING_METHODS - {"heuristic"})
        raise ModelValidationError("register_model", "encoding", f"{encoding!r} is not one of {known}")
    entry = ModelEntry(model, encoding)
    MODELS[name] = entry
    return entry


def lookup_model(model: str | ResolvedModel) -> ModelEntry:
    """The entry for a name or id in ``MODELS``, or a ``ResolvedModel`` as its own entry."""
    if isinstance(model, ResolvedModel):
        return ModelEntry(model)
    if not isinstance(model, str):
        raise ModelValidationError(
            "Engine", "model", f"expected a model name or a ResolvedModel, got {type(model)}"
        )
    entry = MODELS.get(model)
    if entry is None and ":" in model:
        provider, _, name = model.partition(":")
        found = MODELS.get(name)
        entry = found if found is not None and found.model.provider == provider else None
    if entry is None:
        raise ModelValidationError(
            "Engine",
            "model",
            f"no model named {model!r} in ctxengine.engine.MODELS (known: {', '.join(sorted(MODELS))}); "
            "pass a ResolvedModel or add it with register_model",
        )
    return entry


__all__ = ["MODELS", "ModelEntry", "lookup_model", "register_model"]
