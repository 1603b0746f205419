"""Serving results for people: terminal tables (rich) and the latency–throughput plot (matplotlib, Agg).

Both read the `kernelsim.serve/v1` result only, never a simulation.
"""

from __future__ import annotations

import io
import itertools
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from rich.console import Console

from sim.report.tables import Col, print_table

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860"]


def _ms(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _share(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def _p50_p99(key: str, digits: int = 1) -> Col:
    header = key.split("_")[0].upper()
    return Col(header, lambda r: f"{_ms(r[1][key]['p50'], digits)} / {_ms(r[1][key]['p99'], digits)}")


#: One row per variant × offered rate (row: (variant, point, first point of the variant?)).
SERVE_COLUMNS: list[Col] = [
    Col("variant", lambda r: r[0]["name"] if r[2] else "", numeric=False),
    Col("rate/s", lambda r: "log" if r[1]["offered_rate_per_s"] is None else f"{r[1]['offered_rate_per_s']:g}"),
    Col("achieved/s", lambda r: _ms(r[1]["achieved_rate_per_s"])),
    Col("tokens/s", lambda r: f"{r[1]['throughput_tokens_per_s']:.0f}"),
    _p50_p99("ttft_ms"),
    _p50_p99("tpot_ms", 2),  # TPOT is under a ms: hundredths
    _p50_p99("e2e_ms"),
    Col("GPU busy", lambda r: _share(r[1]["gpu_busy_share"])),
    Col("mean batch", lambda r: "—" if r[1]["mean_decode_batch"] is None else f"{r[1]['mean_decode_batch']:.1f}"),
    Col("padded rows", lambda r: _share(r[1]["padded_row_share"])),
    Col("uncaptured", lambda r: _share(r[1]["uncaptured_decode_step_share"])),
]


def render_serve(result: dict[str, Any], console: Console) -> None:
    """Per hardware profile: one row per variant × rate, the max rate per variant, and the comparison."""
    b = result["batching"]
    console.print(f"[bold]scenario[/bold] {result['scenario']}  [bold]workload[/bold] {result['workload']}"
                  f" (prefill: {result['prefill_workload'] or 'not modeled'})  [bold]batching[/bold] {b['policy']}"
                  f" max_batch {b['max_batch']} token_budget {b['token_budget']} prefill {b['prefill']}")
    for hw in result["hardware"]:
        rows = [(v, p, i == 0) for v in hw["variants"] for i, p in enumerate(v["points"])]
        sections = list(itertools.accumulate(len(v["points"]) for v in hw["variants"]))
        print_table(console, f"{hw['name']} ({hw['gpu']}) — latency in ms (p50 / p99)", SERVE_COLUMNS, rows,
                    sections=[s - 1 for s in sections[:-1]])
        if result["p99_target_ms"] is not None:
            for v in hw["variants"]:
                mr = v["max_rate"] or {}
                rate = mr.get("rate_per_s")
                txt = "—" if rate is None else f"{rate:.1f} requests/s"
                note = f" ({mr['note']})" if mr.get("note") else ""
                console.print(f"max rate with p99 {result['target_metric']} <= {result['p99_target_ms']:g} ms, "
                              f"{v['name']}: {txt}{note}")
        for row in hw["comparison"]:
            if "sentence" in row:
                band = (row.get("e2e_interval") or {}).get("p50")
                note = "" if band is None else (f" (E2E p50 gain 90 % band [{band[0] * 100:+.1f}, {band[1] * 100:+.1f}] %, "
                                                 "from the validated step-gain errors)")
                console.print(row["sentence"] + note, highlight=False)


def latency_throughput_figure(hw: dict[str, Any], target_ms: float | None) -> Figure:
    """E2E p50 (solid) and p99 (dashed) latency against output throughput, one colour per variant."""
    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    for i, v in enumerate(hw["variants"]):
        pts = sorted((p for p in v["points"] if p["throughput_tokens_per_s"]), key=lambda p: p["offered_rate_per_s"] or 0)
        x = [p["throughput_tokens_per_s"] / 1e3 for p in pts]
        color = PALETTE[i % len(PALETTE)]
        ax.plot(x, [p["e2e_ms"]["p50"] for p in pts], "o-", color=color, label=f"{v['name']} p50", markersize=3)
        ax.plot(x, [p["e2e_ms"]["p99"] for p in pts], "s--", color=color, label=f"{v['name']} p99", markersize=3)
    if target_ms is not None:
        ax.axhline(target_ms, color="#999999", linewidth=0.8, linestyle=":", label=f"p99 target {target_ms:g} ms")
    ax.set_yscale("log")
    ax.set_xlabel("output throughput (k tokens/s)")
    ax.set_ylabel("end-to-end latency (ms)")
    ax.set_title(f"latency vs throughput — {hw['name']}", fontsize=10)
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def write_serve_plots(result: dict[str, Any], out_dir: Path) -> list[Path]:
    """One PNG per hardware profile, `serving_latency_throughput_<profile>.png`, each written atomically."""
    from sim.outputs import write_bytes_atomic

    files = []
    for hw in result["hardware"]:
        slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in hw["name"])
        name = f"serving_latency_throughput_{slug}.png"
        buf = io.BytesIO()
        latency_throughput_figure(hw, result["p99_target_ms"]).savefig(buf, format="png")
        write_bytes_atomic(out_dir / name, buf.getvalue())
        files.append(out_dir / name)
    return files
