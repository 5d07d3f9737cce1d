"""The report of ``ctxengine bench --cache`` (issue 39, ADRs 0020 and 0027): each workload's
figures beside their ceilings as Markdown, and the issue's acceptance figures against their
targets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.prompt_cache import VLLM_BLOCK_TOKENS

if TYPE_CHECKING:
    from .bench_cache import CacheResults

#: The baseline's side.
BASELINE = "trim_messages/openai_chat"


def cache_markdown(results: CacheResults) -> list[str]:
    """The cache section as Markdown: per workload, each side's figures beside the ceiling."""
    data = results.to_dict()
    p = results.prices
    lines = [
        "## Prompt cache (issue 39)",
        "",
        f"{data['model']}, {data['window']:,}-token window; units counted with o200k; effective "
        f"cost in input-token equivalents (cached read {p.cached_read:g}x, cache write "
        f"{p.cache_write:g}x); vLLM blocks of {VLLM_BLOCK_TOKENS} tokens"
        + ("" if results.langchain else "; LangChain not installed: no baseline"),
        "",
    ]
    for name, w in data["workloads"].items():
        lines += [
            f"### {name}",
            "",
            f"request points {w['request_points']}, built {w['built']}, ContextOverflow "
            f"{w['context_overflow']} {w['overflow_classes'] or ''}; history budget "
            f"{w['history_budget']:,}; bare conversation {w['bare_tokens_per_point']:,.0f} tokens per "
            f"point; ctxengine / bare at the built requests {w['ctxengine_vs_bare_per_built_request']}; "
            f"invalid wire pairs {w['invalid_wire_pairs']}; baseline requests without the user "
            f"message {w['baseline_requests_without_the_user_message']}; requests with nothing "
            f"dropped {w['requests_with_nothing_dropped']}, ctxengine / bare (same tools) there "
            f"{w['ctxengine_vs_bare_nothing_dropped']}",
            "",
            "| side | requests | input tokens | per request | OpenAI | Anthropic | vLLM | ceiling "
            "| cost OpenAI | cost Anthropic |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for side, d in w["sides"].items():
            f = d["cached_fraction"]
            c = d["effective_cost"]

            def pct(rule: str, f: dict[str, float] = f) -> str:
                return f"{100 * f[rule]:.1f}%" if rule in f else "-"

            def cost(rule: str, c: dict[str, float] = c) -> str:
                return f"{c[rule]:,.0f}" if rule in c else "-"

            lines.append(
                f"| {side} | {d['requests']} | {d['input_tokens']:,} | {d['tokens_per_request']:,.0f} "
                f"| {pct('openai')} | {pct('anthropic')} | {pct('vllm')} | {pct('ceiling')} "
                f"| {cost('openai')} | {cost('anthropic')} |"
            )
        lines.append("")
    lines += acceptance_markdown(data["acceptance"])
    return lines


#: Issue 39's acceptance figures: (workload, side, what, rule, at least / at most, target).
TARGETS: tuple[tuple[str, str, str, str, str, float], ...] = (
    ("long run", "ctxengine/openai_chat", "cached", "openai", ">=", 0.60),
    ("session", "ctxengine/openai_chat", "cached", "openai", ">=", 0.90),
    ("session", "ctxengine/anthropic", "cached", "anthropic", ">=", 0.85),
    ("session", "ctxengine/openai_chat", "cost_vs_baseline", "openai", "<=", 0.36),
    ("long run 128k", "ctxengine/openai_chat", "vs_bare", "", "<=", 1.08),
)


def acceptance(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each acceptance figure of issue 39 with its ceiling (where it has one) and target."""
    out: list[dict[str, Any]] = []
    workloads = data["workloads"]
    for workload, side, what, rule, sense, target in TARGETS:
        w = workloads.get(workload)
        if w is None or side not in w["sides"]:
            continue
        d = w["sides"][side]
        ceiling: float | None = None
        if what == "cached":
            value: float | None = d["cached_fraction"][rule]
            ceiling = d["cached_fraction"]["ceiling"]
        elif what == "vs_bare":
            value = w["ctxengine_vs_bare_nothing_dropped"]
        else:
            base = w["sides"].get(BASELINE)
            cost = base["effective_cost"][rule] if base else 0
            value = round(d["effective_cost"][rule] / cost, 4) if cost else None
        met = None if value is None else (value >= target if sense == ">=" else value <= target)
        out.append(
            {
                "workload": workload,
                "side": side,
                "figure": what if not rule else f"{what} ({rule})",
                "value": value,
                "ceiling": ceiling,
                "target": f"{sense} {target:g}",
                "met": met,
            }
        )
    return out


def acceptance_markdown(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "### acceptance (issue 39)",
        "",
        "| workload | side | figure | value | ceiling | target | met |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['side']} | {r['figure']} | {r['value']} | "
            f"{'-' if r['ceiling'] is None else r['ceiling']} | {r['target']} | "
            f"{'-' if r['met'] is None else ('yes' if r['met'] else 'no')} |"
        )
    lines.append("")
    return lines


__all__ = ["BASELINE", "TARGETS", "acceptance", "acceptance_markdown", "cache_markdown"]
