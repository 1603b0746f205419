"""Terminal summary of a sweep (rich): counts, best variant per profile, points that did not run."""

from __future__ import annotations

from rich.console import Console

from sim.report.tables import Col, print_table
from sim.sweep.grid import SweepPlan
from sim.sweep.runner import SweepOutcome
from sim.validate.bands import fmt_gain


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f}%"


#: One row per profile: the variant and point with the highest step gain (row: a `best` entry of sweep.json's
#: summary). When that gain is negative no variant wins anywhere: the row says so rather than "best".
BEST_COLUMNS: list[Col] = [
    Col("profile", lambda b: b["hardware"], numeric=False),
    Col("variant", lambda b: b["variant"], numeric=False),
    Col("at", lambda b: ", ".join(f"{k}={v}" for k, v in b["params"].items()) or "—", numeric=False),
    Col("step gain", lambda b: fmt_gain(b["gain"], b.get("gain_interval"))),
    Col("kernel-only gain", lambda b: _pct(b["micro_gain"])),
    Col("coverage", lambda b: f"{b['coverage'] * 100:.0f}%"),
    Col("fallback", lambda b: f"{b['fallback_rate'] * 100:.0f}%"),
    Col("verdict", lambda b: "wins" if b["gain"] > 0 else "loses everywhere", numeric=False),
]

#: Points that did not run (row: a `not_run` entry).
NOT_RUN_COLUMNS: list[Col] = [
    Col("point", lambda r: str(r["point"])),
    Col("profile", lambda r: r["hardware"], numeric=False),
    Col("params", lambda r: str(r["params"]), numeric=False),
    Col("status", lambda r: r["status"], numeric=False),
    Col("reason", lambda r: r["reason"], numeric=False),
]


def render_sweep_summary(plan: SweepPlan, outcome: SweepOutcome, console: Console, max_not_run: int = 10) -> None:
    c = outcome.summary["counts"]
    rate = outcome.computed / outcome.seconds if outcome.seconds > 0 and outcome.computed else 0.0
    console.print(
        f"[bold]sweep[/bold] {plan.scenario.spec.name}: {len(plan.points)} points "
        f"({outcome.computed} run in {outcome.seconds:.1f} s, {rate:.1f} points/s; {outcome.cached} from cache); "
        f"{c['ok']} ok, {c['infeasible']} infeasible, {c['invalid']} invalid"
    )
    print_table(console, "highest weighted step gain per profile over the swept points (loses everywhere: keep "
                         "the baseline)", BEST_COLUMNS,
                outcome.summary["best"], keys=2)
    not_run = outcome.summary["not_run"]
    if not_run:
        shown = not_run[:max_not_run]
        if len(not_run) > max_not_run:
            shown = [*shown, {"point": "", "hardware": "", "params": "", "status": "",
                              "reason": f"{len(not_run) - max_not_run} more in sweep.json"}]
        print_table(console, f"{len(not_run)} point{'s' if len(not_run) > 1 else ''} did not run", NOT_RUN_COLUMNS, shown)
