"""The OpenAI Agents SDK's ``Session`` on a ctxengine store (issue 41, ADR 0023).

``ContextSession(session_id, engine)`` is the SDK's memory (``Runner.run(agent, text,
session=...)``), with the engine's budget::

    session = ContextSession("alice", engine)
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    result = await Runner.run(agent, "What is the weather in Paris?", session=session, run_config=config)

- ``add_items`` appends the SDK's Responses items to the session's log as ctxengine items
  (``interop.openai_responses``), and keeps the SDK's own form of them (its ids and
  statuses, which the conversion leaves out) in one ``agents.items.added`` event of the
  same commit, so that ``get_items`` hands back what the SDK wrote.
- ``get_items(limit)`` returns the history the next request should carry: the session's
  view, fitted to the window by the engine's plan (``fit.fit_items``: pair-safe, tool
  results truncated to pointers oldest first, then the history cut and a summary of what
  it left out, first). ``limit`` is the SDK's: the latest ``limit`` items of that history
  (``SessionSettings.limit`` when ``None``; none for 0; all for a negative limit, as
  ``SQLiteSession`` reads SQLite's ``LIMIT``). Where no budget binds it is what
  ``SQLiteSession`` returns.
- ``pop_item`` and ``clear_session`` change the view, as ``SQLiteSession``'s deletes do,
  by appending ``agents.item.popped`` / ``agents.session.cleared``: nothing leaves the log.
- The SDK reads ``get_items`` once, for a run's first model call; ``call_model_input_filter``
  (for ``RunConfig``) fits every model call's input the same way.

The events are format 5 (ADR 0009): a deployment pinned below it (``CTXENGINE_WRITE_FORMAT``)
still records the items (``get_items`` then hands back their converted form) and refuses
``pop_item`` and ``clear_session`` with ``FormatDisabled``.

Open the engine with the agent's instructions and tools, so that the prefix the budget
leaves room for is the one the SDK sends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConversionError
from ..interop import openai_responses
from ..interop._sdk import plain
from ..model import ConversationItem, Principal, UserMessage
from ..runtime.session import decode_rows, item_event
from ..stores.events import Event, NewEvent, Visibility
from .fit import Fitted, fit_items

if TYPE_CHECKING:
    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData

    from ..engine import Engine

#: The SDK's own form of the items one ``add_items`` appended: ``{"sequences", "items"}``.
ITEMS_ADDED = "agents.items.added"
#: An item left out of the view from now on (``pop_item``): ``{"sequence"}``.
ITEM_POPPED = "agents.item.popped"
#: Every item up to a sequence left out of the view from now on (``clear_session``):
#: ``{"through_sequence"}``.
SESSION_CLEARED = "agents.session.cleared"
EVENTS = (ITEMS_ADDED, ITEM_POPPED, SESSION_CLEARED)


def _settings(value: Any) -> SessionSettings:
    from agents.memory import SessionSettings
    from agents.memory.session_settings import coerce_session_settings

    return SessionSettings() if value is None else coerce_session_settings(value)


def _sdk_form(item: Any, index: int) -> dict[str, Any]:
    raw = plain(item)
    if not isinstance(raw, Mapping):
        raise ConversionError(
            "openai_responses", index, "<item>", f"expected a dict, got {type(item).__name__}"
        )
    return dict(raw)


class ContextSession:
    """The Agents SDK's ``Session`` protocol on an ``Engine``'s store (see the module docstring)."""

    def __init__(
        self,
        session_id: str,
        engine: Engine,
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        principal: Principal | None = None,
    ) -> None:
        self.session_id = session_id
        self.engine = engine
        self.session_settings = _settings(session_settings)
        #: Who the session's items are recorded for (and whose view is read).
        self.principal = principal or engine.principal

    # -- the view -----------------------------------------------------------------------

    async def view(self) -> tuple[list[ConversationItem], list[dict[str, Any]]]:
        """The session's items as its view stands (what was added, less what was popped or
        cleared), and the SDK's form of each."""
        store, sid = self.engine.store, self.session_id
        rows = [r for r in await store.events.read_items(sid) if r.visibility.allows(self.principal)]
        items = decode_rows(sid, rows)
        forms: dict[int, dict[str, Any]] = {}
        popped: set[int] = set()
        cleared = 0
        for event in await store.events.read(sid, types=EVENTS):
            if not event.visibility.allows(self.principal):
                continue
            payload = event.payload
            if event.type == ITEMS_ADDED:
                forms.update(zip(payload["sequences"], payload["items"], strict=True))
            elif event.type == ITEM_POPPED:
                popped.add(int(payload["sequence"]))
            else:
                cleared = max(cleared, int(payload["through_sequence"]))
        shown = [i for i in items if i.seq is not None and i.seq > cleared and i.seq not in popped]
        return shown, [forms.get(i.seq) or _converted(i) for i in shown if i.seq is not None]

    async def fit(self, items: Sequence[ConversationItem], turn_start: int) -> Fitted:
        """``fit.fit_items`` under this session's plan."""
        plan = await self.engine.plan(self.session_id, self.principal)
        return fit_items(self.engine, plan, self.principal, items, turn_start)

    # -- the Session protocol -------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history the next request should carry, oldest first (its latest ``limit``)."""
        if limit is None:
            limit = self.session_settings.limit
        if limit == 0:
            return []
        items, forms = await self.view()
        if not items:
            return []
        fitted = await self.fit(items, len(items))
        out = _fitted_forms(fitted, forms)
        return out[-limit:] if limit is not None and limit > 0 else out

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` (Responses input items, as the SDK gives them) to the session's log,
        and their SDK form beside them, in one commit."""
        if not items:
            return
        forms = [_sdk_form(item, i) for i, item in enumerate(items)]
        converted = openai_responses.to_items(forms, first_seq=None)
        store, sid, who = self.engine.store, self.session_id, self.principal
        news = [item_event(sid, item, principal=who)[0] for item in converted]
        keep_forms = store.write_policy.allows(ITEMS_ADDED) if hasattr(store, "write_policy") else True
        async with store.transaction():
            stored, _ = await store.events.append_all(news)
            sequences = [e.sequence for e in stored]
            if keep_forms:
                await self._append(
                    ITEMS_ADDED, {"sequences": sequences, "items": forms}, f"{sequences[0]}-{sequences[-1]}"
                )

    async def pop_item(self) -> Any | None:
        """Take the latest item out of the view and return it (``None`` when the view is
        empty): an ``agents.item.popped`` event; the item stays in the log."""
        items, forms = await self.view()
        if not items or items[-1].seq is None:
            return None
        await self._append(ITEM_POPPED, {"sequence": items[-1].seq}, str(items[-1].seq))
        return forms[-1]

    async def clear_session(self) -> None:
        """Empty the view: an ``agents.session.cleared`` event through the latest item; the
        items stay in the log, and items added later are seen."""
        items, _ = await self.view()
        if not items or items[-1].seq is None:
            return
        through = items[-1].seq
        await self._append(SESSION_CLEARED, {"through_sequence": through}, str(through))

    async def _append(self, kind: str, payload: dict[str, Any], key: str) -> Event:
        event = NewEvent(
            session_id=self.session_id,
            type=kind,
            payload=payload,
            derivation_key=f"{kind}:{key}",
            actor=self.principal.principal_id,
            visibility=Visibility.tenant(self.principal.tenant_id),
        )
        return await self.engine.store.events.append(event)

    # -- every model call ----------------------------------------------------------------

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """For ``RunConfig(call_model_input_filter=...)``: the model call's input fitted as
        ``get_items`` fits the history, the current turn (from the user's last message) kept
        whole. The input's items are handed back as they came (a truncated tool result with
        its pointer as output; the summary of what was cut first)."""
        from agents.run_config import ModelInputData

        given = data.model_data
        forms = [_sdk_form(item, i) for i, item in enumerate(given.input)]
        items = openai_responses.to_items(forms, first_seq=None)
        users = [i for i, item in enumerate(items) if isinstance(item, UserMessage)]
        fitted = await self.fit(items, users[-1] if users else 0)
        if fitted.summary is None and not fitted.pointers and len(fitted.kept) == len(forms):
            return given
        fitted_input: list[Any] = _fitted_forms(fitted, forms)
        return ModelInputData(input=fitted_input, instructions=given.instructions)

    def __repr__(self) -> str:
        return f"ContextSession({self.session_id!r})"


def _converted(item: ConversationItem) -> dict[str, Any]:
    return openai_responses.from_items([item])[0]


def _fitted_forms(fitted: Fitted, forms: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The SDK forms of what ``fitted`` keeps: the summary first, pointers for truncated results."""
    out: list[dict[str, Any]] = []
    if fitted.summary is not None:
        out.append({"type": "message", "role": "system", "content": fitted.summary})
    for i in fitted.kept:
        pointer = fitted.pointers.get(i)
        out.append(forms[i] if pointer is None else {**forms[i], "output": pointer})
    return out


__all__ = ["EVENTS", "ITEMS_ADDED", "ITEM_POPPED", "SESSION_CLEARED", "ContextSession"]
