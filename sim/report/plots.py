"""Plots (matplotlib, no pyplot, rendered by Agg) from run results, sweep records and Traces.

Every figure function returns the Figure and the number of data series it drew; the
`write_*` functions save PNGs and a sidecar `plots.json` listing each file with its kind
and series count (what tests check, rather than pixels).
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from sim.metrics import TERMS
from sim.outputs import write_json_atomic
from sim.trace import HOST_TRACK, Trace

TERM_COLORS = {"compute": "#4C72B0", "memory": "#DD8452", "launch": "#C44E52", "comm": "#8172B3",
               "layout": "#937860", "idle": "#BBBBBB"}
CATEGORY_COLORS = {**TERM_COLORS, "dispatch": "#C44E52", "compiled_call": "#E17C7E", "graph_launch": "#55A868",
                   "host": "#64B5CD", "sync": "#999999", "blocked": "#EEEEEE"}
PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974",
           "#64B5CD"]
DPI = 100


@dataclass(frozen=True)
class PlotInfo:
    file: str  # relative to the plots folder
    kind: str
    title: str
    series: int


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f}%"


def breakdown_figure(hw: dict[str, Any]) -> tuple[Figure, int]:
    """Per variant: stacked bars of the breakdown terms per bucket (one series per term and variant)."""
    variants = hw["variants"]
    fig = Figure(figsize=(9, 2.2 * len(variants) + 0.6), dpi=DPI, layout="constrained")
    # one y-scale for every variant: panels are compared with each other
    axes = fig.subplots(len(variants), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    series = 0
    for ax, v in zip(axes, variants, strict=True):
        names = [b["name"] for b in v["buckets"]]
        bottom = [0.0] * len(names)
        for term in TERMS:
            vals = [b["breakdown_us"][term] for b in v["buckets"]]
            ax.bar(names, vals, bottom=bottom, color=TERM_COLORS[term], label=term)
            bottom = [a + b for a, b in zip(bottom, vals, strict=True)]
            series += 1
        ax.set_ylabel("µs")
        ax.set_title(f"{v['name']}: weighted {v['weighted_time_us']:.1f} µs", fontsize=9, loc="left")
    axes[0].legend(ncols=len(TERMS), fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.15))
    axes[-1].tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.suptitle(f"{hw['name']}: step time breakdown per bucket", fontsize=10)
    return fig, series


def gain_figure(hw: dict[str, Any]) -> tuple[Figure, int]:
    """Per-bucket step gain vs baseline, one bar series per variant; hatched bars took the fallback path."""
    variants = [v for v in hw["variants"] if v["name"] != "baseline"]
    fig = Figure(figsize=(9, 3.6), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    if not variants:
        ax.text(0.5, 0.5, "no variants", ha="center", va="center", transform=ax.transAxes)
        return fig, 0
    names = [b["name"] for b in variants[0]["buckets"]]
    width = 0.8 / len(variants)
    for k, v in enumerate(variants):
        xs = [i + (k - (len(variants) - 1) / 2) * width for i in range(len(names))]
        gains = [b["gain_vs_baseline"] * 100 for b in v["buckets"]]
        hatches = ["//" if "fallback" in b["path"].split("+") else "" for b in v["buckets"]]
        label = (f"{v['name']} (step {_pct(v['gain_vs_baseline'])}, coverage {v['coverage'] * 100:.0f}%, "
                 f"fallback {v['fallback_rate'] * 100:.0f}%)")
        bars = ax.bar(xs, gains, width=width, color=PALETTE[k % len(PALETTE)], label=label, edgecolor="black",
                      linewidth=0.4)
        for bar, hatch in zip(bars, hatches, strict=True):
            bar.set_hatch(hatch)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(names)), names, rotation=30, fontsize=8)
    ax.set_ylabel("step gain vs baseline (%)")
    ax.set_title(f"{hw['name']}: gain per bucket (hatched: fallback path)", fontsize=10)
    fig.legend(fontsize=7, loc="outside lower center", ncols=2)
    return fig, len(variants)


MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p"]


def micro_vs_step_figure(result: dict[str, Any]) -> tuple[Figure, int]:
    """Kernel-only (microbenchmark) gain vs end-to-end step gain: a colour per profile, a marker per variant.

    No text is written next to the points (variants at nearly the same gains would print their names
    over each other): the legend, outside the axes, names the profiles' colours and the variants' markers."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig = Figure(figsize=(7.5, 5), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    names = list(dict.fromkeys(v["name"] for hw in result["hardware"] for v in hw["variants"]
                               if v["name"] != "baseline" and v["micro"]["gain"] is not None))
    marker = {name: MARKERS[i % len(MARKERS)] for i, name in enumerate(names)}
    series = 0
    lo, hi = 0.0, 0.0
    shown: list[int] = []
    for k, hw in enumerate(result["hardware"]):
        pts = [(v["micro"]["gain"] * 100, v["gain_vs_baseline"] * 100, v["name"]) for v in hw["variants"]
               if v["name"] in marker]
        if not pts:
            continue
        for x, y, name in pts:
            ax.scatter([x], [y], color=PALETTE[k % len(PALETTE)], marker=marker[name], s=36, alpha=0.85)
            lo, hi = min(lo, x, y), max(hi, x, y)
        shown.append(k)
        series += 1
    pad = (hi - lo) * 0.1 + 1
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="grey", linestyle=":", linewidth=1)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_xlabel("kernel-only gain (%) — the microbenchmark")
    ax.set_ylabel("step gain (%) — end to end")
    ax.set_title("microbenchmark vs step (dotted: equal)", fontsize=10)
    if series:
        handles: list[Any] = [Patch(color=PALETTE[k % len(PALETTE)], label=result["hardware"][k]["name"])
                              for k in shown]
        handles += [Line2D([], [], color="#555555", marker=marker[n], linestyle="", label=n) for n in names]
        fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="profile (colour), variant (marker)",
                   title_fontsize=8)
    return fig, series


def timeline_figure(traces: Sequence[tuple[str, Trace]]) -> tuple[Figure, int]:
    """Gantt view of one bucket: host thread and streams per trace; one series per category drawn."""
    fig = Figure(figsize=(11, 1.0 + 1.1 * sum(1 + len(_streams(t)) for _, t in traces) * 0.5), dpi=DPI,
                 layout="constrained")
    axes = fig.subplots(len(traces), 1, sharex=True, squeeze=False)[:, 0]
    seen: dict[str, Any] = {}
    for ax, (label, trace) in zip(axes, traces, strict=True):
        tracks = [HOST_TRACK, *_streams(trace)]
        for row, track in enumerate(tracks):
            by_cat: dict[str, list[tuple[float, float]]] = {}
            for iv in trace.intervals:
                if iv.track == track:
                    by_cat.setdefault(iv.cat, []).append((iv.start_s * 1e6, max(iv.duration_s * 1e6, 1e-3)))
            for cat, spans in by_cat.items():
                coll = ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=CATEGORY_COLORS.get(cat, "#777777"),
                                      edgecolor="none" if track == HOST_TRACK else "white", linewidth=0.4)
                seen.setdefault(cat, coll)
            if track != HOST_TRACK:  # kernel names on the spans wide enough to hold them
                for iv in trace.intervals:
                    if iv.track == track and iv.duration_s >= 0.04 * trace.end_s:
                        ax.text((iv.start_s + iv.duration_s / 2) * 1e6, row, iv.name, fontsize=6, ha="center",
                                va="center", clip_on=True, color="white")
        ax.set_yticks(range(len(tracks)), tracks, fontsize=8)
        ax.set_ylim(len(tracks) - 0.5, -0.5)
        ax.set_title(f"{label}: {trace.end_s * 1e6:.1f} µs", fontsize=9, loc="left")
    axes[-1].set_xlabel("time (µs)")
    fig.legend(list(seen.values()), list(seen), fontsize=7, ncols=min(len(seen), 8), loc="outside lower center")
    return fig, len(seen)


def _streams(trace: Trace) -> list[str]:
    return sorted({iv.track for iv in trace.intervals if iv.track != HOST_TRACK})


# -- sweeps -------------------------------------------------------------------------------------------
def _variant_gain(rec: dict[str, Any], variant: str) -> float | None:
    for hw in rec["result"]["hardware"]:
        for v in hw["variants"]:
            if v["name"] == variant:
                return float(v["gain_vs_baseline"])
    return None


def sweep_param_figure(records: Sequence[dict[str, Any]], axes: dict[str, list[Any]], param: str,
                       variants: Sequence[str]) -> tuple[Figure, int]:
    """Step gain vs one swept parameter: a subplot per variant, a line per profile (and per combination of
    the other parameter axes when there are at most 6; otherwise those stay at their first value)."""
    others = [k for k in axes if k not in ("hardware", param)]
    combos = list(itertools.product(*(axes[k] for k in others)))
    if len(combos) > 6:
        combos = [tuple(axes[k][0] for k in others)]
    ok = [r for r in records if r.get("status") == "ok"]
    fig = Figure(figsize=(7, 2.8 * len(variants) + 0.5), dpi=DPI, layout="constrained")
    subplots = fig.subplots(len(variants), 1, sharex=True, squeeze=False)[:, 0]
    series = 0
    for ax, variant in zip(subplots, variants, strict=True):
        k = 0
        for profile in axes["hardware"]:
            for combo in combos:
                fixed = dict(zip(others, combo, strict=True))
                pts = sorted(
                    (r["params"][param], g * 100)
                    for r in ok
                    if r["hardware"] == profile and all(r["params"][o] == val for o, val in fixed.items())
                    and (g := _variant_gain(r, variant)) is not None
                )
                if not pts:
                    continue
                label = profile + "".join(f", {o}={val}" for o, val in fixed.items())
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                        color=PALETTE[k % len(PALETTE)], label=label)
                k += 1
                series += 1
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_ylabel("step gain (%)")
        ax.set_title(variant, fontsize=9, loc="left")
        if k:
            ax.legend(fontsize=7)
    values = [v for v in axes[param] if isinstance(v, int | float)]
    if values and min(values) > 0 and max(values) / min(values) >= 16:
        subplots[-1].set_xscale("log", base=2)  # block sizes, elements per thread: powers of two
    subplots[-1].set_xlabel(param)
    fig.suptitle(f"step gain vs {param}", fontsize=10)
    return fig, series


def sweep_heatmap_figure(records: Sequence[dict[str, Any]], profiles: Sequence[str],
                         variants: Sequence[str]) -> tuple[Figure, int]:
    """Profile × variant: the highest step gain over the swept points (blank: no feasible point). A
    negative cell is a variant that loses at every point: it is labelled so, never called best."""
    ok = [r for r in records if r.get("status") == "ok"]
    grid: list[list[float]] = []
    for profile in profiles:
        row = []
        for variant in variants:
            gains = [g for r in ok if r["hardware"] == profile and (g := _variant_gain(r, variant)) is not None]
            row.append(max(gains) * 100 if gains else float("nan"))
        grid.append(row)
    fig = Figure(figsize=(1.6 + 1.3 * len(variants), 1.2 + 0.6 * len(profiles)), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    finite = [abs(x) for row in grid for x in row if x == x]
    lim = max(finite + [1.0])
    image = ax.imshow(grid, cmap="RdYlGn", vmin=-lim, vmax=lim, aspect="auto")
    for i, row in enumerate(grid):
        for j, val in enumerate(row):
            text = "—" if val != val else f"{val:+.1f}%" + ("\nloses everywhere" if val < 0 else "")
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(variants)), variants, rotation=20, fontsize=8)
    ax.set_yticks(range(len(profiles)), profiles, fontsize=8)
    fig.colorbar(image, ax=ax, label="highest step gain (%)")
    ax.set_title("highest step gain over the sweep (negative: no swept point wins)", fontsize=10)
    return fig, len(profiles) * len(variants)


# -- writing ------------------------------------------------------------------------------------------
def _save(fig: Figure, out_dir: Path, name: str, kind: str, title: str, series: int) -> PlotInfo:
    from sim.outputs import write_bytes_atomic

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    write_bytes_atomic(out_dir / name, buf.getvalue())  # checked like every output (inputs, read-only, OS errors)
    return PlotInfo(file=name, kind=kind, title=title, series=series)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def write_run_plots(result: dict[str, Any], traces: dict[tuple[str, str, int], Trace], out_dir: Path,
                    timeline_bucket: int | None = None) -> list[PlotInfo]:
    """The run's plots: per profile breakdown and gain, micro vs step, and a timeline of one bucket."""
    infos = []
    for hw in result["hardware"]:
        slug = _slug(hw["name"])
        fig, n = breakdown_figure(hw)
        infos.append(_save(fig, out_dir, f"breakdown_{slug}.png", "breakdown", f"{hw['name']}: breakdown", n))
        fig, n = gain_figure(hw)
        infos.append(_save(fig, out_dir, f"gain_{slug}.png", "gain", f"{hw['name']}: gain per bucket", n))
    fig, n = micro_vs_step_figure(result)
    infos.append(_save(fig, out_dir, "micro_vs_step.png", "micro_vs_step", "microbenchmark vs step gain", n))
    if traces:
        first_hw = result["hardware"][0]
        if timeline_bucket is None:
            weights = [b["weight"] for b in first_hw["variants"][0]["buckets"]]
            timeline_bucket = max(range(len(weights)), key=lambda i: (weights[i], -i))
        bucket_name = first_hw["variants"][0]["buckets"][timeline_bucket]["name"]
        chosen = [(v["name"], traces[(first_hw["name"], v["name"], timeline_bucket)]) for v in first_hw["variants"]
                  if (first_hw["name"], v["name"], timeline_bucket) in traces]
        if chosen:
            fig, n = timeline_figure(chosen)
            fig.suptitle(f"{first_hw['name']}, bucket {bucket_name}: host and streams", fontsize=10)
            infos.append(_save(fig, out_dir, "timeline.png", "timeline", f"timeline of bucket {bucket_name}", n))
    write_json_atomic(out_dir / "plots.json", {"plots": [asdict(i) for i in infos]})
    return infos


def write_sweep_plots(records: Sequence[dict[str, Any]], axes: dict[str, list[Any]], variants: Sequence[str],
                      out_dir: Path) -> list[PlotInfo]:
    """The sweep's plots: gain vs each parameter axis with more than one value, and the profile × variant map."""
    infos = []
    for param, values in axes.items():
        if param == "hardware" or len(values) < 2 or not variants:
            continue
        if not all(isinstance(v, int | float) for v in values):
            continue
        fig, n = sweep_param_figure(records, axes, param, variants)
        infos.append(_save(fig, out_dir, f"gain_vs_{_slug(param)}.png", "gain_vs_param", f"step gain vs {param}", n))
    if variants:
        fig, n = sweep_heatmap_figure(records, axes["hardware"], variants)
        infos.append(_save(fig, out_dir, "heatmap.png", "heatmap", "profile × variant best step gain", n))
    write_json_atomic(out_dir / "plots.json", {"plots": [asdict(i) for i in infos]})
    return infos
