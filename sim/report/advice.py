"""Render `kernelsim advise` results (schema kernelsim.advice/v1) as plain-language text and tables.

Written for a reviewer to paste into a design doc: one section per hardware profile with
where the time goes, the hot kernels, one sentence per variant, and the recommended plan
with its acceptance criteria.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from sim.report.tables import Col, print_table
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


def _decision(v: Mapping[str, Any]) -> str:
    return _DECISION_LABEL[v["decision"]] + (" (within error: measure first)" if v.get("within_error") else "")


def _step_gain(v: Mapping[str, Any]) -> str:
    return fmt_gain(v["figures"]["step_gain"], None if _partial(v) else v.get("gain_interval"))


def _by_bucket(v: Mapping[str, Any]) -> str:
    f = v["figures"]
    return fmt_gain(f["dispatched_gain"], v.get("gain_interval")) if _partial(v) else _pct(f["dispatched_gain"])


#: The baseline's hot kernels (row: a `hot_kernels` entry of kernelsim.advice/v1).
HOT_KERNEL_COLUMNS: list[Col] = [
    Col("kernel", lambda k: k["name"], numeric=False),
    Col("kind", lambda k: k["kind"], numeric=False),
    Col("share", lambda k: _pct(k["share"], False)),
    Col("exposed", lambda k: _pct(k["exposed_share"], False)),
    Col("limiter", lambda k: k["limiter"], numeric=False),
    Col("roofline µs", lambda k: _us(k["roofline_us"])),
    Col("headroom", lambda k: _x(k["headroom"])),
    Col("vs attainable", lambda k: _x(k["attainable_headroom"])),
    Col("for +1% step", lambda k: _slack(k["slack"][0])),
    Col("for +5% step", lambda k: _slack(k["slack"][1])),
]

#: One decision per variant (row: a `variants` entry).
DECISION_COLUMNS: list[Col] = [
    Col("variant", lambda v: v["name"], numeric=False),
    Col("changes", lambda v: "+".join(v["changes"]), numeric=False),
    Col("decision", _decision, numeric=False),
    Col("step gain", _step_gain),
    Col("by bucket", _by_bucket),
    Col("kernel-only", lambda v: _pct(v["figures"]["micro_gain"])),
    Col("coverage", lambda v: _pct(v["figures"]["coverage"], False)),
    Col("fallback", lambda v: _pct(v["figures"]["fallback_rate"], False)),
    Col("hotspot (exposed)", lambda v: f"{_pct(v['figures']['hotspot_share'], False)} "
                                       f"({_pct(v['figures']['hotspot_exposed_share'], False)})"),
]

#: The recommended plan per bucket, then the weighted row (row: an `acceptance.buckets` entry).
ACCEPTANCE_COLUMNS: list[Col] = [
    Col("bucket", lambda r: r["name"], numeric=False),
    Col("weight", lambda r: "" if r["weight"] is None else f"{r['weight']:.2f}"),
    Col("path", lambda r: r["path"] if r["path"] in ("baseline", "") else f"{r['path']} ({r['variant_path']})",
        numeric=False),
    Col("expected µs", lambda r: _us(r["expected_time_us"])),
    Col("baseline µs", lambda r: _us(r["baseline_time_us"])),
    Col("gain", lambda r: _pct(r["expected_gain"])),
]


def render_advice(advice: Mapping[str, Any], console: Console) -> None:
    console.print(f"[bold]kernelsim advise[/bold] · scenario {advice['scenario']} · workload {advice['workload']} "
                  f"({advice['kind']}) · minimum worthwhile gain {_pct(advice['min_gain'], False)}")
    if advice["alternative_distributions"]:
        console.print("alternative distributions checked: " + ", ".join(advice["alternative_distributions"]))
    for hw in advice["hardware"]:
        _render_hardware(hw, console)


def _render_hardware(hw: Mapping[str, Any], console: Console) -> None:
    console.print()
    console.rule(escape(f"{hw['name']} ({hw['gpu']}; {'measured' if hw['measured'] else 'datasheet/estimates'})"))
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
    print_table(console, "Hot kernels (baseline): limiter, distance to roofline, speed-up needed for a step gain",
                HOT_KERNEL_COLUMNS, hw["hot_kernels"])
    console.print("share: kernel time alone / step; exposed: time it runs alone on the critical path / step "
                  "(overlapped or hidden behind host dispatch counts for nothing); headroom: time / roofline at peak; "
                  "speed-ups by Amdahl on the exposed share, checked by simulation (sim).")
    if not hw["variants"]:
        console.print("No variants in the scenario: nothing to decide.")
        return
    print_table(console, "Decisions", DECISION_COLUMNS, hw["variants"])
    console.print("step gain: weighted end-to-end gain taking the variant everywhere; by bucket: taking it only where it "
                  "wins; \\[90 % band of the gain the decision acts on, from validated errors]; kernel-only: the "
                  "microbenchmark view (replaced kernels vs new kernels).")
    for v in hw["variants"]:
        console.print(f"• {escape(v['summary'])}", highlight=False)
    rec = hw["recommendation"]
    console.print()
    if rec["variant"] is None:
        console.print(f"[bold]Recommendation on {hw['name']}:[/bold] {escape(rec['text'])}.", highlight=False)
        return
    console.print(f"[bold]Recommendation on {hw['name']}:[/bold] {escape(rec['text'])}", highlight=False)
    acc = rec["acceptance"]
    weighted = {"name": "weighted", "weight": None, "path": "", "expected_time_us": acc["weighted_time_us"],
                "baseline_time_us": acc["baseline_weighted_time_us"], "expected_gain": acc["gain_vs_baseline"]}
    print_table(console, f"Acceptance criteria ({acc['variant']}): check after building", ACCEPTANCE_COLUMNS,
                [*acc["buckets"], weighted], sections=[len(acc["buckets"]) - 1])
    c = acc["checks"]
    console.print(f"Accept when, measured end to end: step gain ≥ {_pct(c['step_gain_at_least'])}, no bucket below "
                  f"{_pct(c['bucket_gain_at_least'])}, coverage ≥ {_pct(c['coverage_at_least'], False)}, fallback rate ≤ "
                  f"{_pct(c['fallback_rate_at_most'], False)}.", highlight=False)
