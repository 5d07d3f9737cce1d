"""ctxengine's own dict form: a history kept as the items' ``to_dict()`` mappings
(as a runtime stores them in JSON columns or sends them between services).

``to_items`` decodes them (``item_from_dict``, with the index in the error),
``from_items`` is ``[item.to_dict() for item in items]``, and
``select_history`` cuts the mappings directly. A mapping that is exactly an
item's dict form has the item's canonical bytes, so its estimate is the
item's; the Rust backend measures such mappings without building items, and
hands any other mapping to the reference, which decodes it first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import CanonicalizationError, ConversionError, ModelValidationError
from ..model import ConversationItem, item_from_dict
from ._backend import active_name
from ._common import message_field

SOURCE = "item_dicts"


def to_items(mappings: Sequence[Mapping[str, Any]]) -> list[ConversationItem]:
    """Each mapping decoded with ``item_from_dict`` and checked to be canonical JSON; a bad
    one is a ``ConversionError`` naming its index and field."""
    items: list[ConversationItem] = []
    for i, m in enumerate(mappings):
        try:
            item = item_from_dict(dict(m) if not isinstance(m, dict) else m)
            item.canonical_bytes()  # canonical JSON (ADR 0001), checked here and cached
        except ModelValidationError as exc:
            raise ConversionError(SOURCE, i, exc.field, exc.reason) from None
        except CanonicalizationError as exc:
            raise ConversionError(SOURCE, i, message_field(exc.path, None, None), exc.reason) from None
        except (TypeError, ValueError) as exc:
            raise ConversionError(SOURCE, i, "<mapping>", str(exc)) from None
        items.append(item)
    return items


def from_items(items: Sequence[ConversationItem]) -> list[dict[str, Any]]:
    """The items' dict forms."""
    return [item.to_dict() for item in items]


def select_history(
    mappings: Sequence[Mapping[str, Any]],
    summary_floor: int,
    history_tokens: int,
    estimator: Any,
    model_id: str,
) -> int:
    """``ce.select_history(to_items(mappings), ...)``, without building the items where the
    backend can: the same index, the same errors."""
    if active_name() == "rust":
        from .._core import mappings_cut

        cut: int = mappings_cut(mappings, summary_floor, history_tokens, estimator, model_id)
        if cut >= 0:
            return cut
    from ..reference.arguments import check_cut_arguments, check_sequence
    from ..reference.cut import select_history as reference_cut

    # The arguments first, in signature order, as the Rust path checks them.
    values = check_sequence("select_history", "mappings", mappings, "mappings")
    check_cut_arguments("select_history", summary_floor, history_tokens, estimator, model_id)
    return reference_cut(to_items(values), summary_floor, history_tokens, estimator, model_id)


__all__ = ["SOURCE", "from_items", "select_history", "to_items"]
