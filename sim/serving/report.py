"""Serving results for people: terminal tables (rich) and the latency–throughput plot (matplotlib, Agg).

Both read the `kernelsim.serve/v1` result only, never a simulation.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from rich.console import Console
from rich.table import Table

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860"]


def _ms(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _share(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def render_serve(result: dict[str, Any], console: Console) -> None:
    """Per hardware profile: one row per variant × rate, the max rate per variant, and the comparison."""
    b = result["batching"]
    console.print(f"[bold]scenario[/bold] {result['scenario']}  [bold]workload[/bold] {result['workload']}"
                  f" (prefill: {result['prefill_workload'] or 'not modeled'})  [bold]batching[/bold] {b['policy']}"
                  f" max_batch {b['max_batch']} token_budget {b['token_budget']} prefill {b['prefill']}")
    for hw in result["hardware"]:
        t = Table(title=f"{hw['name']} ({hw['gpu']}) — latency in ms (p50 / p99)", title_justify="left")
        for col in ("variant", "rate/s", "achieved/s", "tokens/s", "TTFT", "TPOT", "E2E", "GPU busy",
                    "mean batch", "padded rows", "uncaptured"):
            t.add_column(col, justify="left" if col == "variant" else "right")
        for v in hw["variants"]:
            for i, p in enumerate(v["points"]):
                t.add_row(
                    v["name"] if i == 0 else "",
                    "log" if p["offered_rate_per_s"] is None else f"{p['offered_rate_per_s']:g}",
                    _ms(p["achieved_rate_per_s"]),
                    f"{p['throughput_tokens_per_s']:.0f}",
                    f"{_ms(p['ttft_ms']['p50'])} / {_ms(p['ttft_ms']['p99'])}",
                    f"{_ms(p['tpot_ms']['p50'], 2)} / {_ms(p['tpot_ms']['p99'], 2)}",  # TPOT is under a ms
                    f"{_ms(p['e2e_ms']['p50'])} / {_ms(p['e2e_ms']['p99'])}",
                    _share(p["gpu_busy_share"]),
                    "—" if p["mean_decode_batch"] is None else f"{p['mean_decode_batch']:.1f}",
                    _share(p["padded_row_share"]),
                    _share(p["uncaptured_decode_step_share"]),
                )
        console.print(t)
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
