"""The demo's human report: budget use per turn, the summary, and the checks (rich, or plain
text without the cli extra: ``console``)."""

from __future__ import annotations

from typing import Any

from .console import Console, Table, escape
from .demo_checks import Check

BAR_WIDTH = 24


def budget_bar(total: int, capacity: int, width: int = BAR_WIDTH) -> str:
    """``total/capacity`` as a fixed-width bar (rich markup), red past 90 %."""
    share = 0.0 if capacity <= 0 else min(1.0, total / capacity)
    filled = round(share * width)
    colour = "red" if share > 0.9 else ("yellow" if share > 0.75 else "green")
    return f"[{colour}]{'█' * filled}[/{colour}][dim]{'░' * (width - filled)}[/dim] {share:5.1%}"


def _estimate_actual(estimated: int, actual: int) -> str:
    """The turn's estimated and provider-counted tokens, and their ratio."""
    if not estimated:
        return "-"
    return f"{estimated:,} / {actual:,} ({actual / estimated:.2f})"


def turn_table(report: dict[str, Any]) -> Table:
    table = Table(title="Budget use per turn (peak request of the turn)", title_justify="left")
    table.add_column("turn", justify="right")
    table.add_column("time (UTC)")
    table.add_column("steps", justify="right")
    table.add_column("tokens / capacity", justify="right")
    table.add_column("budget use")
    table.add_column("estimate / actual", justify="right")
    table.add_column("compactions", justify="right")
    table.add_column("depth", justify="right")
    table.add_column("what happened")
    for t in report["per_turn"]:
        table.add_row(
            str(t["turn"]),
            t["time"],
            str(t["steps"]),
            f"{t['max_total_tokens']:,} / {t['capacity_tokens']:,}",
            budget_bar(t["max_total_tokens"], t["capacity_tokens"]),
            _estimate_actual(t.get("estimated_tokens", 0), t.get("actual_tokens", 0)),
            str(t["compactions"] or ""),
            str(t["depth"]),
            escape("; ".join(t["notes"])),
        )
    return table


def summary_table(report: dict[str, Any]) -> Table:
    table = Table(title="Session", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    per_epoch = ", ".join(f"epoch {e}: {n}" for e, n in report["prefix_hashes_per_epoch"].items())
    rows = [
        ("store", report["store"]),
        ("session", report["session_id"]),
        ("backend", report["backend"]),
        ("model", f"{report['model_id']} ({report['context_window']:,}-token window)"),
        ("turns / requests", f"{report['turns']} / {report['requests']}"),
        ("epochs", str(report["epochs"])),
        ("distinct prefix hashes", per_epoch or "-"),
        ("compactions (max depth)", f"{report['compactions']} ({report['max_depth']})"),
        ("peak request", f"{report['max_total_tokens']:,} of {report['capacity_tokens']:,} tokens"),
        ("orphaned tool pairs", str(report["orphaned_pairs"])),
        ("dates in runtime metadata", ", ".join(report["dates"])),
        ("tool calls refused", str(len(report["refusals"]))),
        ("estimator correction factor", f"{report['correction_factor']:.4f}"),
        ("elapsed", f"{report['elapsed_s']:.2f} s"),
    ]
    for what, value in rows:
        table.add_row(what, escape(value))
    return table


def checks_table(checks: list[Check]) -> Table:
    table = Table(title="Invariants", title_justify="left")
    table.add_column("")
    table.add_column("check")
    table.add_column("detail")
    for c in checks:
        mark = "[dim]-[/dim]" if not c.reached else ("[green]✓[/green]" if c.ok else "[bold red]✗[/bold red]")
        detail = c.detail if c.reached else f"not reached ({c.detail})"
        table.add_row(mark, escape(c.name), escape(detail))
    return table


def print_report(report: dict[str, Any], checks: list[Check], console: Console, *, inspect_url: str) -> None:
    console.print(turn_table(report))
    console.print(summary_table(report))
    console.print(checks_table(checks))
    if report["ok"]:
        console.print("[bold green]All invariants held.[/bold green]")
    else:
        console.print(f"[bold red]Invariants broken:[/bold red] {escape(', '.join(report['violations']))}")
    command = escape(f"ctxengine inspect --store {inspect_url} {report['session_id']}")
    console.print(f"Inspect the session: [bold]{command}[/bold]")


__all__ = ["budget_bar", "checks_table", "print_report", "summary_table", "turn_table"]
