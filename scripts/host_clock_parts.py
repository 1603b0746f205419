"""Issue 15 (host13): which part of a step's host time follows the host CLOCK, and with what exponent.

For every clocked step with a trace — the calibration runs' own host steps (`calibration/h200/runs/*/host_cold`,
`calibration/h200/wave*/host_cold`: the calibration split) and the held-out machines' steps
(`validation/h200/machine_*/host_context`) — the last traced step is split into host parts, each op by how it was
launched (the same attributes `sim.costmodel.trace_host.model_host` prices by):

- `eager`: kernels of eager framework ops (the table's or a dispatch price), kernel-less ops before them included;
  `eager+python` the two together (the profile folds the Python before a table-priced op into its price);
- `python`: the Python between ops (the importer's gap ops);
- `compiled_call`: the first kernel of a torch.compile region (the wrapper's entry: guards, the call);
- `compiled_kernel`: the other kernels of a compiled region (Triton launcher or an extern op's dispatch);
- `graph`: a CUDA-graph replay call;
- `backward`: kernels and nodes of the autograd engine (training).

Per part: T = the trace's host time less the profiler's cost (replay --mode predict's timeline, `trace_host`) and
M = the profile's price at the reference speed (`model_host`, speed 1, no profiler). The clock c is the one the
machine recorded just before the trace (`host_clock.after`: geometric mean of torch.empty / view / 16-element add,
us per call). log(T / M) = a + e * log(c / c_ref) fitted by least squares over the calibration steps only (c_ref:
host.clock_level's reference_us); e is how the part follows the clock (1: one for one with the clock), exp(a) the
part's level at the reference clock against the profile's price; intervals: bootstrap, runs resampled.
Held-out machines: the per-part residual against that fit (median per machine), and the own-speed error's split into
parts: (M * s - T) / T_total per part, s the step's own speed from its clock (the profile's relation, as validate's own-speed
rows), T the trace's parts — what each part adds to the error at the clock the trace ran at.

    python scripts/host_clock_parts.py [--json OUT.json] [--md OUT.md]

Deterministic (seeded bootstrap). Reads only committed data; writes nothing unless asked."""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTS = ("eager", "python", "compiled_call", "compiled_kernel", "graph", "backward")
HOST_EAGER = "eager+python"  # the profile folds the Python before a table-priced op into the op's price
SHOWN = (HOST_EAGER, "compiled_call", "compiled_kernel")  # the parts the held-out steps have (no training, graph ~0)
LAUNCH_CALLS = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx")
MIN_PART_US = 20.0  # a part shorter than this in a step is left out of its fit (too few events to say)
RESAMPLES = 1000
SEED = 20261202


def calibration_folders() -> list[tuple[str, Path]]:
    base = ROOT / "calibration" / "h200"
    out = [(p.parent.name, p) for p in sorted(base.glob("runs/*/host_cold")) if (p / "host_context.json").is_file()]
    out += [(p.parent.name, p) for p in sorted(base.glob("wave*/host_cold")) if (p / "host_context.json").is_file()]
    return out


def heldout_folders() -> list[tuple[str, Path]]:
    from sim.validate.host import HELDOUT_MACHINE_DIRS

    return [(Path(rel).parent.name.removeprefix("machine_"), ROOT / rel) for rel in HELDOUT_MACHINE_DIRS
            if (ROOT / rel / "host_context.json").is_file()]


def part_of(op: Any, imp: Any, in_region: bool) -> str | None:
    from sim.ingest.build import GRAPH_CALLS, PRIOR_FAMILY

    if imp.family == PRIOR_FAMILY or op.kind == "sync":
        return None
    if op.kind == "host":
        return "python"
    if not op.is_kernel:
        return None
    if imp.launch_api in GRAPH_CALLS:
        return "graph"
    if imp.compiled_call:
        return "compiled_call"
    if in_region:
        return "compiled_kernel"
    if imp.top_is_autograd_node or op.phase == "backward":
        return "backward"
    return "eager"


def step_parts(trace: Path, hw: Any) -> dict[str, Any] | None:
    """Per part of the trace's last step: the trace's host us (profiler removed) and the profile's at speed 1."""
    from sim.costmodel.trace_host import model_host, trace_host
    from sim.errors import InputError
    from sim.ingest import import_trace
    from sim.ingest.build import PRIOR_FAMILY, TRITON_CALLS
    from sim.replay import step_graph

    try:
        imp = import_trace(trace, None)
    except InputError:
        return None
    imp = replace(imp, ops=[o for o in imp.ops if o.family != PRIOR_FAMILY])
    graph = step_graph(imp, trace)
    tt = trace_host(graph, imp, hw)
    raw = trace_host(graph, imp, hw, keep_profiler=True)  # as recorded: is the exponent the profiler removal's?
    mt = model_host(graph, imp, hw, False, 1.0)
    traced = dict.fromkeys(PARTS, 0.0)
    model = dict.fromkeys(PARTS, 0.0)
    recorded = dict.fromkeys(PARTS, 0.0)
    kernels = dict.fromkeys(PARTS, 0)
    in_region = False
    for k, (op, io) in enumerate(zip(graph.ops, imp.ops, strict=True)):
        if op.is_kernel and io.family is not None:
            if io.compiled_call:
                in_region = True
            elif not (io.extern_op or io.launch_api in TRITON_CALLS):
                in_region = False
        part = part_of(op, io, in_region and not io.compiled_call)
        if part is None:
            continue
        t_us = (tt.graph.ops[k].host_s or 0.0) * 1e6
        m_us = (mt.graph.ops[k].host_s or 0.0) * 1e6
        traced[part] += t_us
        model[part] += m_us
        recorded[part] += (raw.graph.ops[k].host_s or 0.0) * 1e6
        kernels[part] += 1 if op.is_kernel else 0
    recorded[HOST_EAGER] = recorded["eager"] + recorded["python"]
    traced[HOST_EAGER] = traced["eager"] + traced["python"]
    model[HOST_EAGER] = model["eager"] + model["python"]
    # the driver's launch path on its own: the median traced runtime launch call (profiled: it carries one event's
    # cost of the profiler)
    calls = [r.end - r.ts for r in imp.events.runtime if r.name in LAUNCH_CALLS]
    return {"traced": traced, "model": model, "recorded": recorded, "kernels": kernels, "launch_call_us": statistics.median(calls) if len(calls) >= 5 else None,
            "launch_calls": len(calls)}


def collect(hw: Any) -> list[dict[str, Any]]:
    from sim.validate.host import host_cases, host_clock_us

    out = []
    for split, folders in (("calibration", calibration_folders()), ("heldout", heldout_folders())):
        for run, folder in folders:
            for c in host_cases(folder):
                clock = c.record.get("host_clock") or {}
                after, before = host_clock_us(clock.get("after", {})), host_clock_us(clock.get("before", {}))
                if after is None or before is None:
                    continue
                parts = step_parts(c.trace, hw)
                if parts is None:
                    continue
                cl = clock.get("clocked") or {}
                pairs = [(float(a), float(b)) for a, b in zip(cl.get("clock_us", []), cl.get("step_us", []), strict=False)
                         if float(a) > 0 and float(b) > 0]
                out.append({"split": split, "run": run, "config": c.config.split("/")[-1], "kind": c.kind,
                            "clocked": pairs,
                            "sync_us": c.measured_us, "clock_after": after, "clock_before": before,
                            "clock_ops_after": {k: float(v) for k, v in clock["after"].items()}, **parts})
    return out


def fit_line(points: list[tuple[str, float, float]], resamples: int = RESAMPLES) -> dict[str, Any] | None:
    """y = a + e x by least squares over (run, x, y); bootstrap with runs resampled (5-95 %)."""
    def ls(pts: list[tuple[str, float, float]]) -> tuple[float, float] | None:
        n = len(pts)
        if n < 3:
            return None
        mx = sum(p[1] for p in pts) / n
        my = sum(p[2] for p in pts) / n
        sxx = sum((p[1] - mx) ** 2 for p in pts)
        if sxx <= 0:
            return None
        e = sum((p[1] - mx) * (p[2] - my) for p in pts) / sxx
        return my - e * mx, e

    base = ls(points)
    if base is None:
        return None
    runs: dict[str, list[tuple[str, float, float]]] = {}
    for p in points:
        runs.setdefault(p[0], []).append(p)
    names = sorted(runs)
    rng = random.Random(SEED)
    es, a0 = [], []
    for _ in range(resamples):
        pts = [p for _ in names for p in runs[rng.choice(names)]]
        r = ls(pts)
        if r is not None:
            a0.append(r[0])
            es.append(r[1])
    es.sort()
    a0.sort()

    def q(v: list[float], f: float) -> float:
        return v[min(len(v) - 1, int(f * len(v)))]
    resid = [p[2] - (base[0] + base[1] * p[1]) for p in points]
    return {"exponent": round(base[1], 3), "exponent_90": [round(q(es, 0.05), 3), round(q(es, 0.95), 3)],
            "level_at_ref": round(math.exp(base[0]), 3), "level_90": [round(math.exp(q(a0, 0.05)), 3),
                                                                        round(math.exp(q(a0, 0.95)), 3)],
            "n": len(points), "runs": len(names), "resid_sd": round(statistics.pstdev(resid), 3)}


def analyse(steps: list[dict[str, Any]], c_ref: float, own_ref: float, own_exp: float) -> dict[str, Any]:
    res: dict[str, Any] = {"c_ref_us": c_ref, "fits": {}, "raw_fits": {}, "heldout": {}, "clock_ops": {}}
    groups = {"forward (decode, inference)": lambda s: s["kind"] in ("decode_eager", "infer_eager", "infer_compiled",
                                                                      "decode_graph"),
              "training": lambda s: s["kind"].startswith("train")}
    cal = [s for s in steps if s["split"] == "calibration"]
    for gname, sel in groups.items():
        for part in PARTS + (HOST_EAGER,):
            pts = [(s["run"], math.log(s["clock_after"] / c_ref), math.log(s["traced"][part] / s["model"][part]))
                   for s in cal if sel(s) and s["traced"][part] >= MIN_PART_US and s["model"][part] > 0]
            f = fit_line(pts)
            if f is not None:
                res["fits"][f"{gname}/{part}"] = f
        # the trace's own time per part against the clock, no model in it (per launch / per step): the raw exponent
        for part in PARTS + (HOST_EAGER, "launch_call") + tuple(f"{p} as recorded" for p in PARTS + (HOST_EAGER,)):
            def val(s: dict[str, Any], part: str = part) -> float | None:
                if part.endswith(" as recorded"):
                    v = s["recorded"][part.removesuffix(" as recorded")]
                else:
                    v = s.get("launch_call_us") if part == "launch_call" else s["traced"][part]
                return v if v is not None and v >= (0.5 if part == "launch_call" else MIN_PART_US) else None
            chosen = [s for s in cal if sel(s) and val(s) is not None]
            pts = [(s["run"], math.log(s["clock_after"] / c_ref), math.log(val(s) or 1.0)) for s in chosen]
            # the same config at different clocks: the slope of log time on log clock within a config
            by_cfg: dict[str, list[tuple[str, float, float]]] = {}
            for s, p in zip(chosen, pts, strict=True):
                by_cfg.setdefault(s["config"], []).append(p)
            centred = []
            for cfg_pts in by_cfg.values():
                if len(cfg_pts) < 3:
                    continue
                mx = sum(p[1] for p in cfg_pts) / len(cfg_pts)
                my = sum(p[2] for p in cfg_pts) / len(cfg_pts)
                centred += [(p[0], p[1] - mx, p[2] - my) for p in cfg_pts]
            f = fit_line(centred)
            if f is not None:
                f.pop("level_at_ref")
                f.pop("level_90")
                res["raw_fits"][f"{gname}/{part}"] = f
    # the timed steps themselves, no trace and no model: each record's forty steps timed right after a short clock,
    # log(step time) on log(its clock) within the record (centred per record), pooled by kind; runs resampled
    for split in ("calibration", "heldout"):
        for kind in sorted({s["kind"] for s in steps}):
            pts = []
            for s in steps:
                if s["split"] != split or s["kind"] != kind or len(s["clocked"]) < 10:
                    continue
                xs = [math.log(a) for a, _ in s["clocked"]]
                ys = [math.log(b) for _, b in s["clocked"]]
                mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
                pts += [(s["run"], x - mx, y - my) for x, y in zip(xs, ys, strict=True)]
            f = fit_line(pts)
            if f is not None:
                res.setdefault("clocked_steps", {})[f"{split}/{kind}"] = {
                    "exponent": f["exponent"], "exponent_90": f["exponent_90"], "n": f["n"], "runs": f["runs"]}
    # per launch inside compiled regions (issue 15 task 3: training regions are priced at tight-loop costs): the trace's
    # host per kernel of the region (profiler removed) and the profile's, median per config over the calibration runs
    for s in cal:
        n = s["kernels"]["compiled_kernel"]
        if n and s["kind"].endswith("_compiled"):
            res.setdefault("compiled_per_launch", {}).setdefault(s["config"], []).append(
                (s["traced"]["compiled_kernel"] / n, s["model"]["compiled_kernel"] / n, s["clock_after"]))
    for cfg, v in list(res.get("compiled_per_launch", {}).items()):
        res["compiled_per_launch"][cfg] = {
            "traced_us": round(statistics.median(x[0] for x in v), 1),
            "traced_range_us": [round(min(x[0] for x in v), 1), round(max(x[0] for x in v), 1)],
            "profile_us": round(statistics.median(x[1] for x in v), 1), "runs": len(v)}
    # the clock's own ops against their geometric mean (the add launches a kernel; the view does not)
    for op in ("empty_us", "view_us", "add_us"):
        pts = [(s["run"], math.log(s["clock_after"] / c_ref), math.log(s["clock_ops_after"][op])) for s in cal
               if s["clock_ops_after"].get(op, 0) > 0]
        f = fit_line(pts)
        if f is not None:
            res["clock_ops"][op] = {"exponent": f["exponent"], "exponent_90": f["exponent_90"], "n": f["n"]}
    # held-out: residual per part against the calibration fit, the own-speed error split into parts, and the host total
    # priced two ways at the clock the trace ran at: the profile's one speed for every part (as validate's own-speed
    # rows) and each part by its own calibration fit (level x (clock / c_ref) ** exponent) — against the trace's own
    for s in [s for s in steps if s["split"] == "heldout"]:
        gname = "training" if s["kind"].startswith("train") else "forward (decode, inference)"
        trace_speed = (s["clock_after"] / own_ref) ** own_exp
        total = sum(s["traced"][p] for p in PARTS)
        row: dict[str, Any] = {"kind": s["kind"], "clock_after": round(s["clock_after"], 2),
                               "clock_before": round(s["clock_before"], 2), "sync_us": s["sync_us"],
                               "traced_host_us": round(total, 1), "parts": {}}
        one_speed = per_part = 0.0
        for part in PARTS + (HOST_EAGER,):
            t, m = s["traced"][part], s["model"][part]
            if t <= 0 and m <= 0:
                continue
            f = res["fits"].get(f"{gname}/{part}")
            resid = None
            if f is not None and t >= MIN_PART_US and m > 0:
                predicted = math.log(f["level_at_ref"]) + f["exponent"] * math.log(s["clock_after"] / c_ref)
                resid = round(math.log(t / m) - predicted, 3)
            row["parts"][part] = {"traced_us": round(t, 1), "model_ref_us": round(m, 1),
                                  "err_at_trace_clock_pct": round(100 * (m * trace_speed - t) / total, 1) if total else None,
                                  "resid_log": resid}
            if part in ("eager", "python"):
                continue
            one_speed += m * trace_speed
            per_part += (m * f["level_at_ref"] * (s["clock_after"] / c_ref) ** f["exponent"] if f is not None
                         else m * trace_speed)
        if total > 0:
            row["one_speed_err_pct"] = round(100 * (one_speed / total - 1), 1)
            row["per_part_err_pct"] = round(100 * (per_part / total - 1), 1)
        res["heldout"].setdefault(s["run"], {})[s["config"]] = row
    return res


PRICED = ("eager", "compiled_call", "compiled_kernel", "graph", "backward")  # the parts model_host prices (x speed)


def part_factor(res: dict[str, Any], kind: str, part: str, clock: float, variant: str) -> float | None:
    """A part's speed at `clock` from the calibration fits: level x (clock / c_ref) ** exponent. `variant`
    "fitted": each part its own fit (eager by the eager+python fit: the profile folds the Python into the price);
    "compiled_as_eager": the compiled parts take the eager+python fit (the timed compiled steps follow the clock as the
    eager ones do, while their traces cannot be placed by the clock). None: no fit (the part keeps the one speed)."""
    if variant == "one_speed":  # every part at clock / host.clock_us: validate's own-speed rows (a check of this path)
        return None
    gname = "training" if kind.startswith("train") else "forward (decode, inference)"
    key = HOST_EAGER if part == "eager" or (variant == "compiled_as_eager" and part.startswith("compiled")) else part
    f = res["fits"].get(f"{gname}/{key}")
    if f is None:
        return None
    return float(f["level_at_ref"] * (clock / res["c_ref_us"]) ** f["exponent"])


def own_speed_check(res: dict[str, Any], hw: Any, variant: str) -> dict[str, Any]:
    """Validate's own-speed rows and gains with each step priced at an effective speed: the profile-priced parts'
    speeds (part_factor at the step's own clock, the geometric mean of before and after, as validate) weighted by
    their reference prices; the tripwires of validation/thresholds.yaml crossed (scripts/host_level_check.py's check) in
    the own-speed row and gain groups.
    An approximation of per-part speeds (each op keeps its share of the step's priced host), not a profile switch."""
    from scripts.host_level_check import tripwires
    from sim.replay import replay
    from sim.validate.core import Row, measured_quantities, summarize
    from sim.validate.host import (
        HOST_TABLE,
        OWN_SPEED,
        _pairs,
        gain_groups,
        host_cases,
        host_clock_us,
        machine_split,
        own_speed_split,
        traced_steps,
    )
    from sim.validate.steps import GainRow

    rows: list[Any] = []
    gains: list[Any] = []
    own_ref = hw.host_clock_us
    for machine, folder in heldout_folders():
        priced, preds = [], {}
        for c in host_cases(folder):
            clock = c.record.get("host_clock") or {}
            before, after = host_clock_us(clock.get("before", {})), host_clock_us(clock.get("after", {}))
            step = res["heldout"].get(machine, {}).get(c.config.split("/")[-1])
            if before is None or after is None or step is None:
                continue
            own = (before * after) ** 0.5
            num = den = 0.0
            for part in PRICED:
                m = step["parts"].get(part, {}).get("model_ref_us", 0.0)
                f = part_factor(res, c.kind, part, own, variant)
                num += m * (f if f is not None else own / own_ref)
                den += m
            speed = num / den if den > 0 else own / own_ref
            pred = float(replay(c.trace, hw, "predict", host="model", idle_start=True,
                                imported=traced_steps(c.trace)[0], host_speed=speed)[0]["predicted_time_us"])
            preds[c.config] = pred
            priced.append(c)
            rows.append(Row(HOST_TABLE, f"{OWN_SPEED}/{c.kind}", f"{machine}/{c.config}",
                            own_speed_split(machine, c.split == "fit"), c.measured_us, pred))
        for eager, var, label in _pairs(priced):
            gains.append(GainRow("host/own_speed", f"{machine}/{eager.config}", f"{label} ({var.split})",
                                 1.0 - var.measured_us / eager.measured_us, 1.0 - preds[var.config] / preds[eager.config],
                                 split=machine_split(machine, False)))
    measured = measured_quantities(summarize(rows))
    for msplit in sorted({g.split for g in gains}):
        for key, grp in gain_groups([g for g in gains if g.split == msplit]).items():
            measured[f"host_gains/{key}/{msplit}"] = {"median_abs_pp": statistics.median(abs(g.error_pp) for g in grp),
                                                      "n": float(len(grp))}
    per: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        per.setdefault(r.label.split("/")[0], {}).setdefault(r.family.split("/")[-1], []).append(100 * r.error)
    for g in gains:
        per.setdefault(g.bucket.split("/")[0], {}).setdefault("compile gain pp", []).append(g.error_pp)
    # only the groups these rows make up (a `host/all/<split>` group pools other rows validate adds: not comparable here)
    crossed = [t for t in tripwires(measured) if t.startswith(("host/host_model_own_speed/", "host_gains/own_speed/"))]
    return {"tripwires_crossed": crossed,
            "per_machine": {m: {k: [round(statistics.median(abs(x) for x in v), 1), round(statistics.median(v), 1)]
                                for k, v in sorted(d.items())} for m, d in sorted(per.items())}}


def tables(res: dict[str, Any]) -> str:
    lines = [f"Clock reference c_ref = {res['c_ref_us']} us (host.clock_level's reference_us).", "",
             "| steps / part | exponent on the clock: trace / profile price (90 %) | level at c_ref | "
             "trace's own time, within a config (90 %) | steps (runs) |",
             "| --- | --- | ---: | --- | ---: |"]
    for key in sorted(set(res["fits"]) | set(res["raw_fits"])):
        f, r = res["fits"].get(key), res["raw_fits"].get(key)
        fe = f"{f['exponent']:+.2f} [{f['exponent_90'][0]:+.2f}, {f['exponent_90'][1]:+.2f}]" if f else "—"
        lv = f"{f['level_at_ref']:.2f}" if f else "—"
        re = f"{r['exponent']:+.2f} [{r['exponent_90'][0]:+.2f}, {r['exponent_90'][1]:+.2f}]" if r else "—"
        n = f"{(f or r)['n']} ({(f or r)['runs']})"
        lines.append(f"| {key} | {fe} | {lv} | {re} | {n} |")
    lines += ["", "| timed steps (40 per record, each right after a short clock) | exponent of step time on its clock "
              "(90 %, runs resampled) | steps (runs) |", "| --- | --- | ---: |"]
    for key, f in sorted(res.get("clocked_steps", {}).items()):
        lines.append(f"| {key} | {f['exponent']:+.2f} [{f['exponent_90'][0]:+.2f}, {f['exponent_90'][1]:+.2f}] | "
                     f"{f['n']} ({f['runs']}) |")
    lines += ["", "| compiled region (calibration runs) | host per launch in the trace, profiler removed: median (range) "
              "| the profile's price per launch | runs |", "| --- | --- | ---: | ---: |"]
    for cfg, f in sorted(res.get("compiled_per_launch", {}).items()):
        lines.append(f"| {cfg} | {f['traced_us']} us ({f['traced_range_us'][0]}-{f['traced_range_us'][1]}) | "
                     f"{f['profile_us']} us | {f['runs']} |")
    lines += ["", "| clock op | exponent on the clock's geometric mean (90 %) | steps |", "| --- | --- | ---: |"]
    for op, f in res["clock_ops"].items():
        lines.append(f"| {op} | {f['exponent']:+.2f} [{f['exponent_90'][0]:+.2f}, {f['exponent_90'][1]:+.2f}] | {f['n']} |")
    lines += ["", "Held-out machines: what each part adds to the own-speed error at the clock the trace ran at "
              "((profile price x own speed - trace) / the trace's host total, median over the machine's steps, %) "
              "and its median log residual against the calibration fit:", "",
              "| machine | steps | clock (median us) | " + " | ".join(SHOWN) + " | residual eager+python / compiled_kernel "
              "| host total at the trace's clock, one speed: signed median / median abs / max abs % | each part its own exponent: same |",
              "| --- | ---: | ---: | " + " | ".join("---:" for _ in SHOWN) + " | --- | --- | --- |"]
    for machine, cfgs in sorted(res["heldout"].items()):
        rows = list(cfgs.values())
        cells = []
        for part in SHOWN:
            v = [r["parts"][part]["err_at_trace_clock_pct"] for r in rows if part in r["parts"]
                 and r["parts"][part]["err_at_trace_clock_pct"] is not None]
            cells.append(f"{statistics.median(v):+.1f}" if v else "—")
        rs = []
        for part in (HOST_EAGER, "compiled_kernel"):
            v = [r["parts"][part]["resid_log"] for r in rows if part in r["parts"] and r["parts"][part]["resid_log"] is not None]
            rs.append(f"{statistics.median(v):+.2f}" if v else "—")
        clock = statistics.median(r["clock_after"] for r in rows)
        errs = []
        for key in ("one_speed_err_pct", "per_part_err_pct"):
            v = [r[key] for r in rows if key in r]
            errs.append(f"{statistics.median(v):+.1f} / {statistics.median(abs(x) for x in v):.1f} / {max(abs(x) for x in v):.1f}"
                        if v else "—")
        lines.append(f"| {machine} | {len(rows)} | {clock:.2f} | " + " | ".join(cells) + f" | {' / '.join(rs)} | "
                     + " | ".join(errs) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--profile", default=str(ROOT / "hardware_profiles" / "h200-measured.yaml"))
    ap.add_argument("--own-speed-check", action="append", default=[], choices=("one_speed", "fitted", "compiled_as_eager"),
                    help="price validate's own-speed rows with per-part speeds (this variant) and list the tripwires crossed")
    args = ap.parse_args()
    import yaml

    from sim.hardware import load_profile
    from sim.validate.host import reference_clock, reference_exponent

    hw = load_profile(args.profile, ROOT, path="--profile")
    doc = yaml.safe_load(Path(args.profile).read_text())
    c_ref = float(doc["host"]["clock_level"]["reference_us"])
    steps = collect(hw)
    res = analyse(steps, c_ref, float(reference_clock(hw) or c_ref), reference_exponent(hw))
    res["steps"] = steps
    text = tables(res)
    for variant in args.own_speed_check:
        chk = own_speed_check(res, hw, variant)
        res.setdefault("own_speed_check", {})[variant] = chk
        text += (f"\n\nOwn-speed rows with per-part speeds ({variant}): {len(chk['tripwires_crossed'])} tripwires crossed\n"
                 + "".join(f"  {t}\n" for t in chk["tripwires_crossed"])
                 + "\n| machine | " + " | ".join(["decode_eager", "infer_eager", "infer_compiled", "compile gain pp"])
                 + " |\n| --- | --- | --- | --- | --- |\n"
                 + "".join(f"| {m} | " + " | ".join(
                     (f"{d[k][0]:.1f} ({d[k][1]:+.1f})" if k in d else "—")
                     for k in ("decode_eager", "infer_eager", "infer_compiled", "compile gain pp")) + " |\n"
                     for m, d in chk["per_machine"].items()))
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    if args.md:
        Path(args.md).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
