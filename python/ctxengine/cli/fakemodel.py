"""The demo's scripted world: a deterministic fake model and the tools it calls.

Nothing here calls a network or reads a clock. The script is a function of
the turn number, so every demo run (on either backend, on any store) sends
the same requests; the story exercises what the engine is for:

* research turns whose web pages are large and ``external_untrusted``, plus
  internal files, so history outgrows a small window and is compacted again
  and again;
* working-state updates through the ``context.update_working_state`` control
  tool (objective, constraints, tasks, facts, next action);
* memory written (a recall line) and later corrected (a correction line):
  both ride in the body, because the memory snapshot is pinned in the prefix;
* a scope revoked mid-session: ``send_email`` stays advertised in the prefix
  and ``ToolGate`` refuses the call with a structured refusal;
* one deep-research turn with several large pages, so the current turn
  itself grows under pressure.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..assembly.request import ModelRequest
from ..assembly.router import RouterReply
from ..model import ToolResult, ToolSpec, TrustLevel
from ..runtime.working_state import UPDATE_WORKING_STATE_TOOL

CONTROL_TOOL = UPDATE_WORKING_STATE_TOOL.name

SEARCH = ToolSpec(
    "search",
    "Search the public web; returns the text of the best-matching page.",
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["query"],
        "properties": {"query": {"type": "string"}, "max_bytes": {"type": "integer"}},
    },
)
READ_FILE = ToolSpec(
    "read_file",
    "Read a document from the team's shared drive.",
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["path"],
        "properties": {"path": {"type": "string"}},
    },
)
SEND_EMAIL = ToolSpec(
    "send_email",
    "Send an email on the user's behalf (needs the mail.send scope).",
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["to", "subject", "body"],
        "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
    },
)
TOOLS: tuple[ToolSpec, ...] = (SEARCH, READ_FILE, SEND_EMAIL, UPDATE_WORKING_STATE_TOOL)
#: Call-time authorization: the scopes each tool needs (checked by ``ToolGate``).
REQUIRED_SCOPES: Mapping[str, frozenset[str]] = {
    "search": frozenset({"web.search"}),
    "read_file": frozenset({"files.read"}),
    "send_email": frozenset({"mail.send"}),
}

MEMORY_SNAPSHOT = (
    "- The user is Dana Weber, procurement lead at Acme GmbH.\n"
    "- Dana's timezone is Europe/Berlin.\n"
    "- Dana prefers short tables over long prose."
)

# Turns (1-based) where the story does something the report points at.
MEMORY_WRITTEN_TURN = 8
EMAIL_SENT_TURN = 12
SCOPE_REVOKED_TURN = 25
EMAIL_REFUSED_TURN = 27
MEMORY_CORRECTED_TURN = 33
DEEP_RESEARCH_TURN = 42
#: Page size on the deep-research turn: its own tool pairs (which never yield)
#: crowd the history out, so the run compacts a second time (depth 2).
DEEP_PAGE_BYTES = 13_000

MEMORY_WRITTEN_LINE = "Dana is vegetarian; pick team-dinner venues accordingly (told in this session)."
MEMORY_CORRECTION_LINE = (
    "Dana's timezone is now Europe/Lisbon (she moved); this overrides 'Europe/Berlin' in the memory snapshot."
)

_VENDORS = ("Nimbus", "Stratus", "Cirrus")
_TOPICS = (
    "storage pricing",
    "egress fees",
    "EU data residency",
    "support tiers",
    "compliance certifications",
    "managed Postgres",
    "GPU availability",
    "contract terms",
    "uptime history",
    "migration tooling",
    "network peering",
    "identity integration",
)
_WORDS = (
    "vendor region pricing tier contract egress storage replica latency availability zone "
    "support incident audit certificate discount commitment invoice throughput backup "
    "retention encryption residency migration schedule quota capacity benchmark"
).split()


@dataclass(frozen=True, slots=True)
class ToolUse:
    """One tool call the model makes."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CallTools:
    """A model response that calls tools (the runtime answers each before the next request)."""

    calls: tuple[ToolUse, ...]


@dataclass(frozen=True, slots=True)
class Answer:
    """A final answer: the run ends."""

    text: str


Reply = CallTools | Answer


@dataclass(frozen=True, slots=True)
class TurnScript:
    """What the user says on one turn, what the model does, and what the runtime changes first."""

    turn: int
    user: str
    replies: tuple[Reply, ...]
    revoke_scope: str | None = None
    remember: str | None = None
    correct: str | None = None


def filler(seed: str, n_bytes: int) -> str:
    """Deterministic prose-like text of exactly ``n_bytes`` ASCII bytes."""
    rng = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < n_bytes:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:n_bytes]


def _state(**update: Any) -> ToolUse:
    return ToolUse(CONTROL_TOOL, update)


def _search(query: str, max_bytes: int) -> ToolUse:
    return ToolUse("search", {"query": query, "max_bytes": max_bytes})


def _answer(turn: int, topic: str) -> Answer:
    head = f"Turn {turn}: here is what I found on {topic}. "
    return Answer(head + filler(f"answer:{turn}", 700))


def _research_turn(turn: int) -> TurnScript:
    """The default turn: search (a large external page), maybe read a file, record a fact, answer."""
    topic = _TOPICS[turn % len(_TOPICS)]
    vendor = _VENDORS[turn % len(_VENDORS)]
    page = 5_000 + (turn * 811) % 5_000  # 5-10 KB of untrusted page text
    calls: list[ToolUse] = [_search(f"{vendor} {topic} 2026", page)]
    if turn % 3 == 0:
        calls.append(ToolUse("read_file", {"path": f"/procurement/{vendor.lower()}/{turn:02d}-notes.md"}))
    fact = f"{vendor}: {topic} checked on turn {turn} (see search results)."
    task_status = "completed" if turn % 4 == 0 else "in_progress"
    update = _state(
        add_facts=[fact],
        upsert_tasks=[
            {"task_id": f"{vendor.lower()}-review", "text": f"Review {vendor}", "status": task_status}
        ],
        next_action=f"compare {topic} across vendors",
    )
    user = f"What about {vendor}'s {topic}? " + filler(f"user:{turn}", 350)
    return TurnScript(turn, user, (CallTools(tuple(calls)), CallTools((update,)), _answer(turn, topic)))


def script_turn(turn: int) -> TurnScript:
    """The script of ``turn`` (1-based); turns past fifty keep researching."""
    if turn == 1:
        user = (
            "Help me compare three cloud vendors (Nimbus, Stratus, Cirrus) for our data platform. "
            "The budget is under 40k EUR a year and EU data residency is mandatory."
        )
        setup = _state(
            objective="Recommend one cloud vendor for the Acme data platform",
            add_constraints=["Total cost under 40k EUR per year", "Data must stay in the EU"],
            upsert_tasks=[
                {"task_id": f"{v.lower()}-review", "text": f"Review {v}", "status": "open"} for v in _VENDORS
            ],
            next_action="search pricing pages",
        )
        return TurnScript(turn, user, (CallTools((setup,)), Answer("Understood. I will start with pricing.")))
    if turn == MEMORY_WRITTEN_TURN:
        user = "Remember for later: I'm vegetarian, so pick team-dinner venues accordingly."
        return TurnScript(turn, user, (Answer("Noted; I'll remember that."),), remember=MEMORY_WRITTEN_LINE)
    if turn == EMAIL_SENT_TURN:
        email = ToolUse(
            "send_email",
            {
                "to": "priya@acme.example",
                "subject": "Interim vendor findings",
                "body": filler("mail:12", 400),
            },
        )
        return TurnScript(
            turn, "Email the interim findings to Priya.", (CallTools((email,)), Answer("Sent."))
        )
    if turn == SCOPE_REVOKED_TURN:
        base = _research_turn(turn)
        return TurnScript(turn, base.user, base.replies, revoke_scope="mail.send")
    if turn == EMAIL_REFUSED_TURN:
        email = ToolUse(
            "send_email",
            {"to": "priya@acme.example", "subject": "Updated comparison", "body": filler("mail:27", 400)},
        )
        blocked = Answer("I could not send it: your account no longer has the mail.send scope.")
        return TurnScript(turn, "Send Priya the updated comparison.", (CallTools((email,)), blocked))
    if turn == MEMORY_CORRECTED_TURN:
        user = "Correction: I moved to Lisbon last month, so my timezone is Europe/Lisbon now."
        return TurnScript(
            turn, user, (Answer("Thanks, I'll use Lisbon time from now on."),), correct=MEMORY_CORRECTION_LINE
        )
    if turn == DEEP_RESEARCH_TURN:
        rounds = tuple(
            CallTools((_search(f"{v} independent benchmark report {n}", DEEP_PAGE_BYTES),))
            for n, v in enumerate((*_VENDORS, "all three"))
        )
        return TurnScript(
            turn,
            "Do a deep dive: find independent benchmark reports for all three vendors.",
            (*rounds, _answer(turn, "independent benchmarks")),
        )
    if turn % 10 == 0:
        done = _state(
            upsert_tasks=[
                {"task_id": f"summary-{turn}", "text": f"Checkpoint summary {turn}", "status": "completed"}
            ],
            next_action="continue the comparison",
        )
        user = f"Give me a short status table so far (turn {turn})."
        return TurnScript(turn, user, (CallTools((done,)), _answer(turn, "the overall status")))
    return _research_turn(turn)


def run_tool(call_id: str, use: ToolUse, turn: int) -> ToolResult:
    """What the tool returns (the control tool and refusals are the runtime's, not handled here)."""
    if use.name == "search":
        size = int(use.arguments.get("max_bytes", 4_000))
        page = f"Page for {use.arguments['query']!r}: " + filler(f"page:{turn}:{call_id}", size)
        return ToolResult(call_id, page, trust=TrustLevel.EXTERNAL_UNTRUSTED)
    if use.name == "read_file":
        text = f"{use.arguments['path']}:\n" + filler(f"file:{turn}:{call_id}", 2_500)
        return ToolResult(call_id, text)
    if use.name == "send_email":
        receipt = {"status": "sent", "to": use.arguments["to"], "message_id": f"msg-{turn:03d}"}
        return ToolResult(call_id, json.dumps(receipt, sort_keys=True))
    return ToolResult(call_id, json.dumps({"error": "unknown_tool", "tool": use.name}), is_error=True)


def actual_usage(estimated: int, turn: int, step: int) -> int:
    """The fake provider's reported prompt tokens: within a few percent of the estimate."""
    ratio = 0.95 + ((turn * 7 + step * 3) % 12) / 100.0  # 0.95 .. 1.06
    return max(1, int(estimated * ratio))


_LINE = re.compile(r"^\[event (\d+) ([a-z_]+)(:? ?)", re.MULTILINE)


class ScriptedSummarizer:
    """The demo's compaction model (``ctxengine demo --summarizer scripted``): a router whose
    summary is a function of the request it is sent, so every run writes the same summaries.
    It counts what the request shows (messages it may read, items withheld as pointers) and
    never repeats their text."""

    model_id = "scripted:summarizer-1"

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, request: ModelRequest) -> RouterReply:
        self.calls += 1
        text = request.body[0].text or ""
        shown: dict[str, int] = {}
        withheld = 0
        events = []
        for match in _LINE.finditer(text):
            events.append(int(match.group(1)))
            if match.group(3).startswith(":"):
                withheld += 1
            else:
                shown[match.group(2)] = shown.get(match.group(2), 0) + 1
        parts = ", ".join(f"{n} {kind.replace('_', ' ')}(s)" for kind, n in sorted(shown.items()))
        span = f"events {min(events)} to {max(events)}" if events else "no new events"
        summary = (
            f"Earlier in this session ({span}) the user and the assistant exchanged {parts or 'nothing'}; "
            f"{withheld} tool or untrusted item(s) were withheld and remain as pointers. The user's "
            "research and reporting requests continue below."
        )
        return RouterReply(summary, input_tokens=len(text) // 4 + 200, output_tokens=len(summary) // 4)


__all__ = [
    "ScriptedSummarizer",
    "CONTROL_TOOL",
    "DEEP_RESEARCH_TURN",
    "EMAIL_REFUSED_TURN",
    "EMAIL_SENT_TURN",
    "MEMORY_CORRECTED_TURN",
    "MEMORY_CORRECTION_LINE",
    "MEMORY_SNAPSHOT",
    "MEMORY_WRITTEN_LINE",
    "MEMORY_WRITTEN_TURN",
    "REQUIRED_SCOPES",
    "SCOPE_REVOKED_TURN",
    "TOOLS",
    "Answer",
    "CallTools",
    "Reply",
    "ToolUse",
    "TurnScript",
    "actual_usage",
    "filler",
    "run_tool",
    "script_turn",
]
