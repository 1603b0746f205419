"""Terminal tables (rich) for run results."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from sim.report.metrics import TERMS


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f}%"


def render_run(result: dict[str, Any], console: Console) -> None:
    """Per hardware profile: variant × bucket table, then the weighted summary."""
    console.print(f"[bold]scenario[/bold] {result['scenario']}  [bold]workload[/bold] {result['workload']}")
    for hw in result["hardware"]:
        src = "measured" if hw["measured"] else "datasheet/estimates"
        t = Table(title=f"{hw['name']} ({hw['gpu']}; {src}) — per bucket", title_justify="left")
        for col in ("variant", "bucket", "weight", "time µs", "gain"):
            t.add_column(col, justify="right" if col not in ("variant", "bucket") else "left")
        for term in TERMS:
            t.add_column(term, justify="right")
        for col in ("dominant", "kernels", "HBM MB", "path"):
            t.add_column(col, justify="right" if col in ("kernels", "HBM MB") else "left")
        for v in hw["variants"]:
            for i, b in enumerate(v["buckets"]):
                t.add_row(
                    v["name"] if i == 0 else "",
                    b["name"],
                    f"{b['weight']:.2f}",
                    f"{b['time_us']:.1f}",
                    "" if v["name"] == "baseline" else _pct(b["gain_vs_baseline"]),
                    *[f"{b['breakdown_us'][term]:.1f}" for term in TERMS],
                    b["dominant"],
                    str(b["kernels"]),
                    f"{b['hbm_bytes'] / 1e6:.1f}",
                    b["path"],
                )
            t.add_section()
        console.print(t)
        s = Table(title=f"{hw['name']} — weighted over the bucket distribution", title_justify="left")
        for col in ("variant", "weighted µs", "step gain", "kernel-only gain", "coverage", "fallback", "worst bucket"):
            s.add_column(col, justify="left" if col in ("variant", "worst bucket") else "right")
        for v in hw["variants"]:
            base = v["name"] == "baseline"
            s.add_row(
                v["name"],
                f"{v['weighted_time_us']:.1f}",
                "" if base else _pct(v["gain_vs_baseline"]),
                "" if base else _pct(v["micro"]["gain"]),
                "" if base else f"{v['coverage'] * 100:.0f}%",
                "" if base else f"{v['fallback_rate'] * 100:.0f}%",
                "" if base else f"{v['tail']['worst_bucket']} ({_pct(v['tail']['worst_gain'])})",
            )
        console.print(s)
        _render_comm(hw, console)


def _render_comm(hw: dict[str, Any], console: Console) -> None:
    """Exposed communication per variant × bucket, when the run has collectives (the buckets' `comm` blocks)."""
    rows = [(v, b) for v in hw["variants"] for b in v["buckets"] if "comm" in b]
    if not rows:
        return
    t = Table(title=f"{hw['name']} — communication (critical rank)", title_justify="left")
    for col in ("variant", "bucket", "ranks", "time µs", "comm µs", "exposed µs", "hidden µs", "wait µs",
                "exposed share", "collectives (algorithm/protocol)"):
        t.add_column(col, justify="left" if col in ("variant", "bucket", "collectives (algorithm/protocol)") else "right")
    last = None
    for v, b in rows:
        c = b["comm"]
        kinds = sorted({f"{x.get('algorithm', '—')}/{x.get('protocol', '—')}" for x in c["collectives"]})
        t.add_row("" if v["name"] == last else v["name"], b["name"], str(c["ranks"]), f"{b['time_us']:.1f}",
                  f"{c['comm_time_us']:.1f}", f"{c['exposed_comm_us']:.1f}", f"{c['hidden_comm_us']:.1f}",
                  f"{c['rendezvous_wait_us']:.1f}", f"{c['exposed_comm_us'] / b['time_us'] * 100:.1f}%",
                  f"{len(c['collectives'])} ({', '.join(kinds)})")
        last = v["name"]
    console.print(t)
