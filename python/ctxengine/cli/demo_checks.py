"""The demo's invariants, judged on what it observed (a ``DemoRecord``), and its JSON report.

A check that the script has not reached yet (``--turns`` shorter than the
turn where a scope is revoked, say) is reported as not reached, not as
passed and not as failed. Everything else must hold on every request.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from .demo import DemoRecord
from .fakemodel import EMAIL_REFUSED_TURN, SCOPE_REVOKED_TURN

#: From this many turns on, the history must have been compacted at least twice.
REPEATED_COMPACTION_BY = 30
MAX_DEPTH = 2


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    reached: bool = True

    @property
    def failed(self) -> bool:
        return self.reached and not self.ok

    def to_dict(self) -> dict[str, Any]:
        status = "not reached" if not self.reached else ("ok" if self.ok else "FAILED")
        return {"status": status, "ok": self.ok or not self.reached, "detail": self.detail}


def prefix_hashes_per_epoch(record: DemoRecord) -> dict[int, int]:
    """Epoch -> number of distinct prefix hashes its requests carried."""
    seen: dict[int, set[str]] = defaultdict(set)
    for r in record.requests:
        seen[r.epoch].add(r.prefix_sha256)
    return {epoch: len(hashes) for epoch, hashes in sorted(seen.items())}


def check(record: DemoRecord) -> list[Check]:
    requests = record.requests
    turns = len(record.turns)
    checks: list[Check] = [
        Check(
            "session completed",
            record.error is None,
            record.error or f"{turns} turns, {len(requests)} requests",
        )
    ]

    per_epoch = prefix_hashes_per_epoch(record)
    plan_hashes = {(r.epoch, r.plan_prefix_sha256) for r in requests}
    checks.append(
        Check(
            "one prefix hash per epoch",
            bool(per_epoch)
            and all(n == 1 for n in per_epoch.values())
            and len(plan_hashes) == len(per_epoch),
            ", ".join(f"epoch {e}: {n}" for e, n in per_epoch.items()) or "no request",
        )
    )
    checks.append(
        Check(
            "one epoch (nothing in the script rotates the plan)",
            record.epochs == 1,
            f"{record.epochs} epoch(s): {', '.join(record.epoch_reasons) or '-'}",
        )
    )

    over = [
        r
        for r in requests
        if r.total_tokens > r.capacity_tokens
        or r.total_tokens + r.max_output_tokens > record.model.context_window
    ]
    peak = max((r.total_tokens for r in requests), default=0)
    checks.append(
        Check(
            "every request inside its window",
            not over,
            f"peak {peak:,} of {record.model.context_window - record.model.default_output_reserve:,} tokens"
            if not over
            else f"{len(over)} over, first: turn {over[0].turn} step {over[0].step} {over[0].total_tokens:,}",
        )
    )

    orphans = sum(r.orphaned_pairs for r in requests)
    wire = [f"turn {r.turn} step {r.step}: {f}" for r in requests for f in r.wire_failures]
    checks.append(
        Check(
            "no orphaned tool pair (body and three wire formats)",
            orphans == 0 and not wire,
            f"{orphans} orphaned in bodies; {len(wire)} wire failures" + (f"; {wire[0]}" if wire else ""),
        )
    )

    observed = sum(t.compactions for t in record.turns)
    depth = max([record.logged_max_depth, *(r.summary_depth for r in requests)])
    checks.append(
        Check(
            "compactions logged as they happened, depth <= 2",
            observed == record.logged_compactions and depth <= MAX_DEPTH,
            f"{record.logged_compactions} logged, {observed} observed, max depth {depth}",
        )
    )
    checks.append(
        Check(
            "history compacted repeatedly",
            record.logged_compactions >= 2,
            f"{record.logged_compactions} compactions",
            reached=turns >= REPEATED_COMPACTION_BY,
        )
    )

    if record.config.summarizer == "scripted":
        checks.append(
            Check(
                "every compaction summarized by the scripted model, recorded (format 7)",
                record.logged_compactions > 0 and record.model_summaries == record.logged_compactions,
                f"{record.model_summaries} model summaries, {record.summary_fallbacks} fallbacks; "
                f"{record.compaction_tokens:,} input tokens in the books",
            )
        )
    checks.append(
        Check(
            "builds are deterministic (a rebuild gives the same request)",
            all(r.rebuilt_identical for r in requests),
            f"{sum(not r.rebuilt_identical for r in requests)} differing rebuilds",
        )
    )
    checks.append(
        Check(
            "current user message in every request",
            all(r.has_current_user for r in requests),
            f"{sum(not r.has_current_user for r in requests)} requests without it",
        )
    )

    dates = sorted({r.date for r in requests})
    stale = [r for r in requests if r.date != r.clock_date]
    checks.append(
        Check(
            "runtime metadata follows the clock (body, not prefix)",
            not stale,
            f"dates {', '.join(dates)}" if not stale else f"{len(stale)} requests show a stale date",
        )
    )

    tool_sets = {r.tool_names for r in requests}
    refused = bool(record.refusals)
    checks.append(
        Check(
            "revoked scope refused at call time, tools unchanged",
            refused
            and record.allowed_emails >= 1
            and len(tool_sets) == 1
            and record.revoked_at == SCOPE_REVOKED_TURN,
            f"{record.allowed_emails} allowed before; " + ("; ".join(record.refusals) or "no refusal"),
            reached=turns >= EMAIL_REFUSED_TURN,
        )
    )
    checks.append(
        Check(
            "memory snapshot pinned, corrections in every later body",
            len(record.memory_snapshots) <= 1 and all(r.has_correction for r in requests),
            f"{len(record.memory_snapshots)} snapshot(s); corrected on turn {record.corrected_at}"
            if record.corrected_at
            else f"{len(record.memory_snapshots)} snapshot(s)",
        )
    )
    return checks


def report_dict(record: DemoRecord, checks: list[Check]) -> dict[str, Any]:
    """The ``--json`` report: SPEC section 9's keys, then the detail."""
    requests = record.requests
    failed = [c.name for c in checks if c.failed]
    return {
        "turns": len(record.turns),
        "epochs": record.epochs,
        "prefix_hashes_per_epoch": {str(e): n for e, n in prefix_hashes_per_epoch(record).items()},
        "compactions": record.logged_compactions,
        "summarizer": record.config.summarizer,
        "model_summaries": record.model_summaries,
        "summary_fallbacks": record.summary_fallbacks,
        "compaction_input_tokens": record.compaction_tokens,
        "max_depth": max([record.logged_max_depth, *(r.summary_depth for r in requests)]),
        "max_total_tokens": max((r.total_tokens for r in requests), default=0),
        "capacity_tokens": max((r.capacity_tokens for r in requests), default=0),
        "orphaned_pairs": sum(r.orphaned_pairs for r in requests),
        "wire_failures": sum(len(r.wire_failures) for r in requests),
        "requests": len(requests),
        "context_window": record.model.context_window,
        "model_id": record.model.model_id,
        "backend": record.backend,
        "store": record.store,
        "session_id": record.session_id,
        "refusals": list(record.refusals),
        "dates": sorted({r.date for r in requests}),
        "correction_factor": round(record.correction_factor, 6),
        "elapsed_s": round(record.elapsed_s, 3),
        "error": record.error,
        "ok": not failed,
        "violations": failed,
        "checks": {c.name: c.to_dict() for c in checks},
        "per_turn": [
            {
                "turn": t.turn,
                "run_id": t.run_id,
                "time": t.time,
                "steps": t.steps,
                "max_total_tokens": t.max_total_tokens,
                "capacity_tokens": t.capacity_tokens,
                "estimated_tokens": t.estimated_tokens,
                "actual_tokens": t.actual_tokens,
                "compactions": t.compactions,
                "depth": t.depth,
                "notes": list(t.notes),
            }
            for t in record.turns
        ],
    }


__all__ = ["MAX_DEPTH", "REPEATED_COMPACTION_BY", "Check", "check", "prefix_hashes_per_epoch", "report_dict"]
