"""Render `kernelsim advise` results (schema kernelsim.advice/v1) as plain-language text and tables.

Written for a reviewer to paste into a design doc: one section per hardware profile with
where the time goes, the hot kernels, one sentence per variant, and the recommended plan
with its acceptance criteria.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from sim.validate.bands import fmt_gain


def _partial(v: Mapping[str, Any]) -> bool:
    """The decision takes the variant in some buckets only (its band is then the by-bucket gain's)."""
    takes = [b["take"] for b in v["buckets"]]
    return any(takes) and not all(takes)


_DECISION_LABEL = {
    "fuse": "FUSE", "specialize": "SPECIALIZE", "dispatch_by_bucket": "DISPATCH BY BUCKET",
    "use_library": "USE LIBRARY", "adopt": "ADOPT", "keep_library": "KEEP LIBRARY", "dont_write": "DON'T WRITE",
}


def _pct(x: float | None, signed: bool = True) -> str:
    if x is None:
        return "—"
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def _x(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def _us(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _slack(s: Mapping[str, Any]) -> str:
    if not s["reachable"]:
        return "unreachable"
    text = f"{s['speedup']:.2f}×"
    if s["simulated_gain_at_speedup"] is not None:
        text += f" (sim {_pct(s['simulated_gain_at_speedup'])})"
    return text


def render_advice(advice: Mapping[str, Any], console: Console) -> None:
    console.print(f"[bold]kernelsim advise[/bold] · scenario {advice['scenario']} · workload {advice['workload']} "
                  f"({advice['kind']}) · minimum worthwhile gain {_pct(advice['min_gain'], False)}")
    if advice["alternative_distributions"]:
        console.print("alternative distributions checked: " + ", ".join(advice["alternative_distributions"]))
    for hw in advice["hardware"]:
        _render_hardware(hw, console)


def _render_hardware(hw: Mapping[str, Any], console: Console) -> None:
    console.print()
    console.rule(f"{hw['name']} ({hw['gpu']}; {'measured' if hw['measured'] else 'datasheet/estimates'})")
    base = hw["baseline"]
    terms = sorted(base["breakdown_share"].items(), key=lambda kv: -kv[1])
    parts = ", ".join(f"{t} {_pct(v, False)}" for t, v in terms if v >= 0.0005)
    console.print(f"[bold]Where the time goes[/bold] (baseline, weighted step {base['weighted_time_us']:.1f} µs): "
                  f"{parts}; dominant: [bold]{base['dominant']}[/bold].")
    doms: dict[str, list[str]] = {}
    for b in base["buckets"]:
        doms.setdefault(b["dominant"], []).append(b["name"])
    if len(doms) > 1:
        console.print("Dominant term per bucket: " + "; ".join(f"{d} in {', '.join(n)}" for d, n in doms.items()) + ".")
    t = Table(title="Hot kernels (baseline): limiter, distance to roofline, speed-up needed for a step gain",
              title_justify="left")
    for col in ("kernel", "kind", "share", "exposed", "limiter", "roofline µs", "headroom", "vs attainable",
                "for +1% step", "for +5% step"):
        t.add_column(col, justify="left" if col in ("kernel", "kind", "limiter") else "right")
    for k in hw["hot_kernels"]:
        t.add_row(k["name"], k["kind"], _pct(k["share"], False), _pct(k["exposed_share"], False), k["limiter"],
                  _us(k["roofline_us"]), _x(k["headroom"]), _x(k["attainable_headroom"]),
                  _slack(k["slack"][0]), _slack(k["slack"][1]))
    console.print(t)
    console.print("share: kernel time alone / step; exposed: time it runs alone on the critical path / step "
                  "(overlapped or hidden behind host dispatch counts for nothing); headroom: time / roofline at peak; "
                  "speed-ups by Amdahl on the exposed share, checked by simulation (sim).")
    if not hw["variants"]:
        console.print("No variants in the scenario: nothing to decide.")
        return
    d = Table(title="Decisions", title_justify="left")
    for col in ("variant", "changes", "decision", "step gain", "by bucket", "kernel-only", "coverage", "fallback",
                "hotspot (exposed)"):
        d.add_column(col, justify="left" if col in ("variant", "changes", "decision") else "right")
    for v in hw["variants"]:
        f = v["figures"]
        label = _DECISION_LABEL[v["decision"]] + (" (within error: measure first)" if v.get("within_error") else "")
        band = v.get("gain_interval")
        d.add_row(v["name"], "+".join(v["changes"]), label, fmt_gain(f["step_gain"], None if _partial(v) else band),
                  fmt_gain(f["dispatched_gain"], band) if _partial(v) else _pct(f["dispatched_gain"]), _pct(f["micro_gain"]), _pct(f["coverage"], False),
                  _pct(f["fallback_rate"], False),
                  f"{_pct(f['hotspot_share'], False)} ({_pct(f['hotspot_exposed_share'], False)})")
    console.print(d)
    console.print("step gain: weighted end-to-end gain taking the variant everywhere; by bucket: taking it only where it "
                  "wins; \\[90 % band of the gain the decision acts on, from validated errors]; kernel-only: the "
                  "microbenchmark view (replaced kernels vs new kernels).")
    for v in hw["variants"]:
        console.print(f"• {v['summary']}", highlight=False)
    rec = hw["recommendation"]
    console.print()
    if rec["variant"] is None:
        console.print(f"[bold]Recommendation on {hw['name']}:[/bold] {rec['text']}.", highlight=False)
        return
    console.print(f"[bold]Recommendation on {hw['name']}:[/bold] {rec['text']}", highlight=False)
    acc = rec["acceptance"]
    a = Table(title=f"Acceptance criteria ({acc['variant']}): check after building", title_justify="left")
    for col in ("bucket", "weight", "path", "expected µs", "baseline µs", "gain"):
        a.add_column(col, justify="left" if col in ("bucket", "path") else "right")
    for r in acc["buckets"]:
        a.add_row(r["name"], f"{r['weight']:.2f}", r["path"] if r["path"] == "baseline" else f"{r['path']} ({r['variant_path']})",
                  _us(r["expected_time_us"]), _us(r["baseline_time_us"]), _pct(r["expected_gain"]))
    a.add_row("weighted", "", "", _us(acc["weighted_time_us"]), _us(acc["baseline_weighted_time_us"]),
              _pct(acc["gain_vs_baseline"]))
    console.print(a)
    c = acc["checks"]
    console.print(f"Accept when, measured end to end: step gain ≥ {_pct(c['step_gain_at_least'])}, no bucket below "
                  f"{_pct(c['bucket_gain_at_least'])}, coverage ≥ {_pct(c['coverage_at_least'], False)}, fallback rate ≤ "
                  f"{_pct(c['fallback_rate_at_most'], False)}.", highlight=False)
