"""Type stub of ``ctxengine._core``, the Rust backend (ADR 0001).

The pure-Python twin is ``ctxengine.reference``; both export these names
(``bind_errors`` aside) with byte-identical results.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any, final

from ctxengine.model.body import BodyFit, BodyInputs, BodyLimits

__all__ = [
    "LangChainCounter",
    "LineState",
    "TokenEstimator",
    "allocate_tokens",
    "bind_errors",
    "canonical_json",
    "count_tokens",
    "counting_method",
    "encode_tokens",
    "encoding_ranks_sha256",
    "exact_raw",
    "load_encoding",
    "decode_items",
    "fit_body",
    "item_canonical",
    "item_schema",
    "langchain_trim",
    "mappings_cut",
    "openai_chat_cut",
    "payload_hash",
    "render_items",
    "render_pointers",
    "select_history",
    "shared_prefix",
    "validate_tool_pairs",
    "_schema_tables",
]

__version__: str

def bind_errors(module: ModuleType) -> None:
    """The module whose error classes this one raises (``ctxengine.errors``)."""

def canonical_json(value: object) -> bytes:
    """RFC 8785 canonical JSON bytes of ``value``; raises ``CanonicalizationError``."""

def payload_hash(value: object) -> str:
    """Lowercase SHA-256 hex of ``canonical_json(value)`` (items reuse their cached digest)."""

def item_canonical(item: object) -> tuple[bytes, bytes]:
    """``(canonical_bytes, sha256_digest)`` of an item's ``to_dict()``, cached in its ``_cj`` slot."""

def item_schema() -> str:
    """The item schema (``rust/core/src/schema.rs``) as JSON text: ``ctxengine/model/schema.json``."""

def _schema_tables() -> list[tuple[str, str, list[str]]]:
    """``(table, kind, dict keys)`` of each hand-written Rust item table (for the schema test)."""

def allocate_tokens(
    context_window: int,
    max_output_tokens: int,
    default_output_reserve: int,
    prefix_tokens: int,
    reserve_tokens: int,
    margin_ratio: float,
    tool_results_ratio: float,
    working_state_tokens: int,
    history_floor: int,
    prefix_ceiling: int,
) -> tuple[int, int, int, int, int]:
    """``(reserve, body, usable, tool_results, history)``; raises ``ContextOverflow``."""

def select_history(
    items: Iterable[object],
    summary_floor: int | None,
    history_tokens: int,
    estimator: Any,
    model_id: str,
    raw: Sequence[int] | None = None,
) -> int:
    """The cut index: ``items[cut:]`` is retained; raises ``OrphanedToolPair``."""

def count_tokens(encoding_name: str, text: str) -> int:
    """Tokens of ``text`` in a public encoding (``o200k_base``, ``cl100k_base``), as ordinary text."""

def encode_tokens(encoding_name: str, text: str) -> list[int]:
    """The token ids of ``text`` in a public encoding, as ordinary text."""

def load_encoding(encoding_name: str) -> None:
    """Build a public encoding's tables now (else on first use), with the GIL released."""

def exact_raw(encoding_name: str, kind: str, canonical: bytes) -> int:
    """The exact raw count of a value of ``kind`` whose canonical JSON is ``canonical`` (ADR 0012)."""

def counting_method(model_id: str, table: Mapping[str, str] | None = None) -> str:
    """``heuristic`` or the encoding that counts ``model_id`` (built-in table, then ``table``)."""

def encoding_ranks_sha256(encoding_name: str) -> str:
    """SHA-256 hex over the encoding's ranks in order (one length byte, then the bytes)."""

def validate_tool_pairs(items: Iterable[object]) -> None:
    """Raise ``OrphanedToolPair`` for the first pairing violation in scan order."""

def shared_prefix(a: Iterable[object], b: Iterable[object]) -> int:
    """How many leading items ``a`` and ``b`` share: the first ``n`` with ``a[i] is b[i]``."""

@final
class LineState:
    """What ``fit_body`` read of one history line (``RenderLine.state``), kept for the line's
    next call; owned by the line's owner and dropped with it."""

    def __new__(cls) -> LineState: ...
    @property
    def nbytes(self) -> int:
        """The estimated bytes it holds (as of the last call that gave it back)."""
    @property
    def served(self) -> int:
        """Entries calls read from it instead of from the line, in all (for tests)."""
    def clear(self) -> None:
        """Drop everything it holds (the owner starts the line again)."""

def fit_body(*, inputs: BodyInputs, limits: BodyLimits, estimator: TokenEstimator, model_id: str) -> BodyFit:
    """Region B measured, capped, yielded and cut (``ctxengine.model.body``)."""

def decode_items(
    payloads: Sequence[object],
    seqs: Sequence[int],
    classes: Mapping[str, type[Any]],
    parts: tuple[type[Any], type[Any]],
    trust: Sequence[Any],
    extra: Mapping[str, object] | None = None,
) -> tuple[list[Any], int | None, str | None]:
    """Stored item payloads as items of events ``seqs``, ``_cj`` filled (``reference.decode``).

    Returns ``(items, None, None)``, or ``(items before it, index, reason)`` at
    the first payload that does not decode.
    """

def render_items(items: Iterable[Any], region_class: str, rendered_cls: type[Any]) -> list[Any]:
    """Each item's render for ``region_class`` (``rendered_cls``), or ``None`` for the caller to make."""

def render_pointers(items: Iterable[Any], rendered_cls: type[Any]) -> list[Any]:
    """Each tool result's pointer render (``rendered_cls``), or ``None`` for the caller to make."""

@final
class TokenEstimator:
    """Per-model token counts (exact for public encodings, the calibrated byte heuristic
    elsewhere; ADR 0012) with a bounded LRU memo."""

    def __new__(
        cls,
        *,
        bytes_per_token: float = 3.0,
        framing_tokens: int = 4,
        profiles: Mapping[str, tuple[float, int]] | None = None,
        memo_capacity: int = 100000,
        encodings: Mapping[str, str] | None = None,
    ) -> TokenEstimator: ...
    def counting_method(self, model_id: str) -> str: ...
    def raw(self, value: object, model_id: str) -> int: ...
    def raw_estimates(self, items: Iterable[object], model_id: str) -> list[int]: ...
    def counter_id(self, model_id: str, kind: str) -> str: ...
    def prime(self, model_id: str, kind: str, digests: Iterable[bytes], raws: Iterable[int]) -> None: ...
    def estimate(self, items: Iterable[object], model_id: str) -> int: ...
    def estimate_text(self, text: str, model_id: str) -> int: ...
    def estimate_tools(self, tools: Iterable[object], model_id: str) -> int: ...
    def corrected(self, raw_sum: int, model_id: str) -> int: ...
    def reconcile(self, model_id: str, estimated: int, actual: int) -> None: ...
    def correction(self, model_id: str) -> float: ...
    def error_ratio(self, model_id: str) -> float: ...
    def snapshot(self, max_version: int = 2) -> dict[str, Any]: ...
    @classmethod
    def restore(cls, snapshot: Mapping[str, Any]) -> TokenEstimator: ...
    def memo_stats(self) -> dict[str, int]: ...

# -- foreign histories (issue 15; twin: ctxengine.reference.interop) ------------------------

def openai_chat_cut(
    messages: Any,
    summary_floor: int | None,
    history_tokens: int,
    estimator: Any,
    model_id: str,
    seq_field: str | None,
    first_seq: int | None,
    tool_trust: str,
) -> int:
    """The cut over OpenAI Chat dict messages as a message index, without building items.

    The cut's arguments are checked as ``select_history`` checks them (``ArgumentError``).
    ``-1 - i`` when message ``i`` needs the reference (which raises its error),
    ``-1`` when the fast path does not take the input (not a list, another estimator,
    other provenance options).
    """

def mappings_cut(
    mappings: Any, summary_floor: int | None, history_tokens: int, estimator: Any, model_id: str
) -> int:
    """The cut over items' ``to_dict()`` mappings, measured without building items.

    The cut's arguments are checked as ``select_history`` checks them (``ArgumentError``).

    ``-1 - i`` when mapping ``i`` is not exactly an item's dict form (the reference
    decodes it and raises its error), ``-1`` when the input is not taken at all.
    """

def langchain_trim(
    counter: LangChainCounter,
    messages: Any,
    max_tokens: float,
    strategy: str,
    use_len: bool,
    include_system: object,
    end_on: Callable[[Any], bool] | None,
    start_on: Callable[[Any], bool] | None,
) -> tuple[bool, int, int] | None:
    """``(system_kept, start, end)`` of the pair-safe ``trim_messages`` over memoized counts;
    ``None`` when ``messages`` is not a list of ``BaseMessage`` (the caller converts it).
    ``max_tokens`` is any int or float (``check_token_limit``); ``include_system`` is read
    for its truth."""

@final
class LangChainCounter:
    """Per-message ``count_tokens_approximately`` facts, memoized by message identity (never
    keeping a message alive), within ``max_bytes`` of estimated entry memory."""

    def __new__(cls, classes: Any, max_bytes: int = ...) -> LangChainCounter: ...
    def __len__(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @max_bytes.setter
    def max_bytes(self, value: int) -> None: ...
