"""Terminal summary of a sweep (rich): counts, best variant per profile, points that did not run."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from sim.sweep.grid import SweepPlan
from sim.sweep.runner import SweepOutcome
from sim.validate.bands import fmt_gain


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f}%"


def render_sweep_summary(plan: SweepPlan, outcome: SweepOutcome, console: Console, max_not_run: int = 10) -> None:
    c = outcome.summary["counts"]
    rate = outcome.computed / outcome.seconds if outcome.seconds > 0 and outcome.computed else 0.0
    console.print(
        f"[bold]sweep[/bold] {plan.scenario.spec.name}: {len(plan.points)} points "
        f"({outcome.computed} run in {outcome.seconds:.1f} s, {rate:.1f} points/s; {outcome.cached} from cache); "
        f"{c['ok']} ok, {c['infeasible']} infeasible, {c['invalid']} invalid"
    )
    t = Table(title="best variant per profile (by weighted step gain over the swept points)", title_justify="left")
    for col in ("profile", "variant", "at", "step gain", "kernel-only gain", "coverage", "fallback"):
        t.add_column(col, justify="left" if col in ("profile", "variant", "at") else "right")
    for b in outcome.summary["best"]:
        at = ", ".join(f"{k}={v}" for k, v in b["params"].items()) or "—"
        t.add_row(b["hardware"], b["variant"], at, fmt_gain(b["gain"], b.get("gain_interval")), _pct(b["micro_gain"]),
                  f"{b['coverage'] * 100:.0f}%", f"{b['fallback_rate'] * 100:.0f}%")
    console.print(t)
    not_run = outcome.summary["not_run"]
    if not_run:
        n = Table(title=f"{len(not_run)} points did not run", title_justify="left")
        for col in ("point", "profile", "params", "status", "reason"):
            n.add_column(col)
        for r in not_run[:max_not_run]:
            n.add_row(str(r["point"]), r["hardware"], str(r["params"]), r["status"], r["reason"])
        if len(not_run) > max_not_run:
            n.add_row("…", "", "", "", f"{len(not_run) - max_not_run} more in sweep.json")
        console.print(n)
