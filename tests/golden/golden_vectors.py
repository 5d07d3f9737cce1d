"""The values whose canonical bytes ``generate.py`` wrote to ``vectors.json`` (issue 10).

Split out of ``generate.py`` unchanged; like it, never re-run to make a golden test pass.
"""

from __future__ import annotations

from typing import Any

from ctxengine.canonical import canonical_json, payload_hash
from ctxengine.demo import AGENT, demo_model
from golden_scenarios import OPENAI_MODEL

import ctxengine as ce


def vectors() -> list[dict[str, Any]]:
    from ctxengine.budget import BudgetPolicy, allocate

    from ctxengine.model import (
        ElidedSpan,
        KnowledgePassage,
        SkillBody,
        StateEntry,
        Task,
    )

    part_text = ce.TextPart("see the attached quote — 12 € ✓")
    part_file = ce.FileRef("art-1", "application/pdf", "quote.pdf")
    part_file_bare = ce.FileRef("art-2", "image/png")
    nested_args = {
        "query": 'vendors "EU" \\ résumé \u2028 line',
        "limits": {
            "max": 10,
            "ratio": 0.1,
            "big": 9007199254740991,
            "neg": -0.0,
            "exp": 1e21,
            "tiny": 5e-324,
        },
        "flags": [True, False, None],
        "emoji": "😀 𝄞",
        "\u00e9": 1,
        "e": 2,
        "\U0001f600": 3,
        "\ufb33": 4,
    }
    ws = ce.WorkingState(
        objective="Pick a vendor",
        constraints=(StateEntry("c1", "Under 40k", ce.TrustLevel.USER),),
        tasks=(Task("t1", "Review Nimbus", "in_progress"), Task("t2", "Review Stratus", "completed", "user")),
        established_facts=(StateEntry("f1", "Nimbus is EU-hosted"),),
        open_questions=(StateEntry("q1", "Which region?", ce.TrustLevel.PLATFORM),),
        next_action="read the price sheet",
    )
    values: list[tuple[str, Any]] = [
        ("TextPart", part_text),
        ("FileRef", part_file),
        ("FileRef", part_file_bare),
        ("SystemMessage", ce.SystemMessage("You are helpful.")),
        ("SystemMessage", ce.SystemMessage((part_text,), trust=ce.TrustLevel.TRUSTED_CONFIGURATION, seq=3)),
        ("UserMessage", ce.UserMessage("hello", seq=1)),
        ("UserMessage", ce.UserMessage((part_text, part_file), principal_id="dana", seq=7)),
        ("UserMessage", ce.UserMessage("", trust=ce.TrustLevel.EXTERNAL_UNTRUSTED)),
        ("AssistantMessage", ce.AssistantMessage("Done.", seq=9)),
        ("AssistantMessage", ce.AssistantMessage((part_text,), trust=ce.TrustLevel.INTERNAL_TOOL)),
        ("ToolCall", ce.ToolCall("c1", "search", {}, seq=2)),
        ("ToolCall", ce.ToolCall("call_ÄÖ", "search", nested_args)),
        ("ToolResult", ce.ToolResult("c1", "report.pdf, 12 pages", seq=3)),
        (
            "ToolResult",
            ce.ToolResult("c1", (part_file_bare, part_text), is_error=True, trust="external_untrusted"),
        ),
        (
            "ReasoningItem",
            ce.ReasoningItem("openai", {"encrypted_content": "gAAA==", "id": "rs_1", "n": [1, 2.5]}),
        ),
        ("ReasoningItem", ce.ReasoningItem("anthropic", {"signature": "sig", "thinking": "hmm"}, seq=4)),
        (
            "ToolSpec",
            ce.ToolSpec("search", "Search.", {"type": "object", "properties": {"q": {"type": "string"}}}),
        ),
        ("ToolSpec", ce.UPDATE_WORKING_STATE_TOOL),
        ("ResolvedModel", ce.ResolvedModel("openai", "gpt-x", 128_000, 16_384, 8_192, frozenset({"b", "a"}))),
        ("ResolvedModel", demo_model()),
        ("AgentSpec", AGENT),
        ("Principal", ce.Principal("dana", "acme", frozenset({"web.search", "mail.send"}))),
        ("Principal", ce.Principal("eve", "other")),
        ("RunContext", ce.RunContext("r1", "s1", 5)),
        ("RunContext", ce.RunContext("r1", "s1", 5, step=3, max_output_tokens=1024)),
        ("StateEntry", StateEntry("f1", "fact")),
        ("Task", Task("t1", "do it", "open", "user")),
        ("WorkingState", ce.WorkingState()),
        ("WorkingState", ws),
        ("ElidedSpan", ElidedSpan("tool_result:4", ce.TrustLevel.EXTERNAL_UNTRUSTED, 1234, 4, "art-1,art-2")),
        ("ElidedSpan", ElidedSpan("folded:3@1..9", ce.TrustLevel.MEMORY, 99)),
        ("KnowledgePassage", KnowledgePassage("p1", "Nimbus runs in Frankfurt.", 0.75, "kb")),
        ("KnowledgePassage", KnowledgePassage("p2", "x")),
        ("SkillBody", SkillBody("tables", "Use short tables.")),
        ("Checkpoint", ce.Checkpoint("r0")),
        (
            "Checkpoint",
            ce.Checkpoint(
                "r1",
                version=4,
                conversation=(
                    ce.UserMessage("old", seq=1),
                    ce.ToolCall("c1", "search", {"q": "x"}, seq=2),
                    ce.ToolResult("c1", "page", seq=3, trust="external_untrusted"),
                    ce.UserMessage("now", seq=5),
                ),
                compacted_summary="Compacted conversation through event 0.",
                summary_source_event_ids=(0,),
                summary_elided=(ElidedSpan("assistant_message:0", ce.TrustLevel.EXTERNAL_UNTRUSTED, 10, 0),),
                replaced_through_sequence=0,
                summary_depth=1,
                working_state=ws,
                knowledge=(KnowledgePassage("p1", "k", 0.5),),
                recall=("Dana likes tables.",),
                loaded_skills=(SkillBody("tables", "Use short tables."),),
                reasoning=(ce.ReasoningItem("openai", {"id": "rs_2"}, seq=6),),
                corrections=("Dana moved to Munich.",),
            ),
        ),
    ]
    out = []
    for type_name, value in values:
        data = canonical_json(value)
        out.append(
            {
                "type": type_name,
                "dict": value.to_dict(),
                "canonical": data.decode("utf-8"),
                "sha256": payload_hash(value),
            }
        )
    policy = BudgetPolicy()
    for name, budget in (
        ("ContextBudget", allocate(demo_model(), 3_000, policy)),
        ("ContextBudget", allocate(OPENAI_MODEL, 1_234, policy)),
    ):
        out.append(
            {
                "type": name,
                "dict": budget.to_dict(),
                "canonical": canonical_json(budget.to_dict()).decode("utf-8"),
                "sha256": payload_hash(budget.to_dict()),
            }
        )
    plain: list[Any] = [
        None, True, 0, -1, 1.5, 1e21, 1e-7, 123456789.125, -0.0, "", "a\u0000b\u001f\u007f\u2028",
        [], {}, {"b": 1, "a": [1, "x", None], "A": {"z": 0.30000000000000004}},
        {"\U0001f600": 1, "\ufb33": 2, "é": 3},
    ]  # fmt: skip
    for value in plain:
        out.append(
            {
                "type": "json",
                "dict": value,
                "canonical": canonical_json(value).decode("utf-8"),
                "sha256": payload_hash(value),
            }
        )
    return out
