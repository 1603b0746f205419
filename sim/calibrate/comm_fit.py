"""Turn a raw `comm.json` (sim.calibrate.gpu.comm) into profile entries and a model comparison.

No GPU, no torch. Three things:
- `busbw_points`: measured nccl-tests bus bandwidths as `topology.reference_busbw` entries
  (`source: measured`, `measured_on`, `date`, `raw`), by default the largest measured size of
  each (collective, ranks): the bandwidth plateau the model's link figures stand for;
  `reference_busbw_yaml` renders them as the profile's flow-style YAML list.
- `compare`: the comm model (sim.costmodel.nccl through the profile's topology) against every
  measured collective of two or more ranks: time and bus bandwidth per size, relative error.
  NVLink multicast is off where the raw file says so (the harness always sets
  NCCL_NVLS_ENABLE=0), so the model's all-reduce then chooses between ring and tree only.
- `contention_rows` / `ddp_rows`: the contention and DDP-overlap records, flattened for a table.
- `nvl2_profile_yaml`: the two-GPU overlay profile (hardware_profiles/h200-nvl2.yaml) built as a
  document and written by sim.calibrate.profile_yaml (`--write-nvl2 FILE`), never as text.

    python3 -m sim.calibrate.comm_fit RAW.json [--profile h200-hgx8] [--all-sizes] [--raw-ref PATH]

prints the YAML block and the tables; without --write-nvl2 it writes nothing (paste the block into the profile's
`topology.reference_busbw`; tests/test_comm.py then holds the model to it).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sim.calibrate.profile_yaml import dump_profile
from sim.costmodel.nccl import busbw_factor, plan_collective
from sim.errors import InputError
from sim.schema.hardware import BusBwPoint

MIB = 1 << 20


def _load_group(path: Path, group: str, what: str) -> dict[str, Any]:
    """Read a harness file of `group`; anything but `{"group": group, "records": [...]}` is an input error
    (`what` names the file kind in the message)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {what} data: {exc}", file=str(path)) from None
    if not isinstance(doc, dict) or doc.get("group") != group or not isinstance(doc.get("records"), list):
        raise InputError(f"not a {what} file", file=str(path),
                         expected=f"an object with group '{group}' and a 'records' list")
    return doc


def load_comm(path: Path) -> dict[str, Any]:
    """Read a raw comm file; anything but `{"group": "comm", "records": [...]}` is an input error."""
    return _load_group(path, "comm", "raw comm")


def _measured_on(meta: dict[str, Any]) -> str:
    gpu = meta.get("gpu_name") or (meta.get("nvidia_smi") or {}).get("name") or "unknown GPU"
    n = meta.get("visible_gpus")
    return f"{gpu} x{n} (one host)" if n else str(gpu)


def _nvls_off(meta: dict[str, Any]) -> bool:
    return str((meta.get("env") or {}).get("NCCL_NVLS_ENABLE", "1")) == "0"


def collective_records(doc: dict[str, Any], min_ranks: int = 2) -> list[dict[str, Any]]:
    """Measured collective records of at least `min_ranks` ranks (skipped or failed ones left out)."""
    out = []
    for r in doc["records"]:
        if r.get("bench") != "collective" or "skipped" in r or not r.get("time_us"):
            continue
        if int(r.get("world_size", 0)) >= min_ranks:
            out.append(r)
    return out


def busbw_points(doc: dict[str, Any], raw_ref: str, *, all_sizes: bool = False, min_bytes: float = 0) -> list[dict[str, Any]]:
    """`topology.reference_busbw` entries for the measured collectives (ranks >= 2).

    Default: per (collective, ranks) the largest measured size; `all_sizes`: every size of at
    least `min_bytes`. Each entry is validated against the profile schema (BusBwPoint).
    """
    meta = doc.get("meta") or {}
    date = str(meta.get("date_utc", ""))[:10]
    measured_on = _measured_on(meta)
    note = (f"nccl-tests-style busbw, NCCL {meta.get('nccl_version', '?')}, fp32, "
            f"{'NVLS off, ' if _nvls_off(meta) else ''}mean over ranks of the median per-call time "
            f"({meta.get('mode', '?')} run)")
    recs = [r for r in collective_records(doc) if float(r["bytes"]) >= min_bytes and r.get("busbw_gbps", 0) > 0]
    if not all_sizes:
        peak: dict[tuple[str, int], dict[str, Any]] = {}
        for r in recs:
            key = (r["collective"], int(r["world_size"]))
            if key not in peak or r["bytes"] > peak[key]["bytes"]:
                peak[key] = r
        recs = list(peak.values())
    recs.sort(key=lambda r: (r["collective"], int(r["world_size"]), float(r["bytes"])))
    points = []
    for r in recs:
        p = {"collective": r["collective"], "ranks": int(r["world_size"]), "nodes": int(r.get("nodes", 1)),
             "bytes": int(r["bytes"]), "busbw_gbps": round(float(r["busbw_gbps"]), 1), "source": "measured",
             "measured_on": measured_on, "date": date, "raw": raw_ref, "note": note}
        BusBwPoint.model_validate(p)
        points.append(p)
    return points


def reference_busbw_yaml(points: list[dict[str, Any]], indent: int = 4) -> str:
    """The entries as the profile writes them: one flow-style mapping per line."""
    pad = " " * indent
    lines = [pad + "- " + yaml.safe_dump(p, default_flow_style=True, sort_keys=False, width=10**6).strip()
             for p in points]
    return "\n".join(lines) + ("\n" if lines else "")


@dataclass(frozen=True)
class CompareRow:
    collective: str
    ranks: int
    bytes: float
    measured_us: float
    model_us: float
    measured_busbw_gbps: float
    model_busbw_gbps: float
    algorithm: str
    protocol: str

    @property
    def error(self) -> float:
        """Model time / measured time - 1 (positive: the model is slower than the GPU)."""
        return self.model_us / self.measured_us - 1.0


def _model_plan(coll: str, size: float, n: int, hw: Any, nvls_off: bool) -> Any:
    from sim.costmodel.collective import links_of

    links, topo = links_of(hw), hw.fabric
    m = max(1, math.ceil(n / topo.gpus_per_node))
    if coll == "all_reduce" and nvls_off:
        plans = [plan_collective(coll, size, n, m, links, topo, algorithm=a) for a in ("ring", "tree")]
        return min(plans, key=lambda p: p.time_s)
    return plan_collective(coll, size, n, m, links, topo)


def compare(doc: dict[str, Any], hw: Any) -> list[CompareRow]:
    """The model (kernel fixed cost + the NCCL-like plan, as sim.costmodel.collective prices a
    collective) against every measured collective of two or more ranks."""
    nvls_off = _nvls_off(doc.get("meta") or {})
    rows = []
    for r in collective_records(doc):
        n, size, coll = int(r["world_size"]), float(r["bytes"]), str(r["collective"])
        plan = _model_plan(coll, size, n, hw, nvls_off)
        model_s = hw.kernel_fixed_s + plan.time_s
        rows.append(CompareRow(coll, n, size, float(r["time_us"]), model_s * 1e6, float(r["busbw_gbps"]),
                               busbw_factor(coll, n) * size / model_s / 1e9, plan.algorithm, plan.protocol))
    return rows


def summarize(rows: list[CompareRow], min_bytes: float = MIB) -> list[dict[str, Any]]:
    """Per (collective, ranks): median and largest |error| over sizes >= min_bytes, and over all sizes."""
    groups: dict[tuple[str, int], list[CompareRow]] = {}
    for r in rows:
        groups.setdefault((r.collective, r.ranks), []).append(r)
    out = []
    for (coll, n), rs in sorted(groups.items()):
        big = [abs(r.error) for r in rs if r.bytes >= min_bytes]
        every = [abs(r.error) for r in rs]
        out.append({"collective": coll, "ranks": n, "n": len(rs),
                    "median_abs_err_large": statistics.median(big) if big else None,
                    "max_abs_err_large": max(big) if big else None,
                    "median_abs_err_all": statistics.median(every), "max_abs_err_all": max(every)})
    return out


# Per-call all-reduce times below this are close to torch.distributed's host dispatch cost
# (about 20 us per call on the H200 VM, comm_1gpu.json): the stream is host-bound, not busy.
HOST_BOUND_CALL_US = 50.0


def contention_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in doc["records"]:
        if r.get("bench") != "contention" or "skipped" in r:
            continue
        per_call = float(r["comm_alone_us"]) / max(1, int(r["allreduce_calls"]))
        out.append({"ranks": r["world_size"], "load": r["load"], "load_slowdown": r["load_slowdown"],
                    "comm_slowdown": r["comm_slowdown"], "overlap_us": r["overlap_us"],
                    "allreduce_bytes": r["allreduce_bytes"], "allreduce_call_us": per_call,
                    "host_bound": per_call < HOST_BOUND_CALL_US})
    return out


def ddp_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in doc["records"]:
        if r.get("bench") != "ddp_step" or "skipped" in r:
            continue
        out.append({"ranks": r["world_size"], "tokens": r["tokens"], "step_us": r["step_us"],
                    "step_no_comm_us": r["step_no_comm_us"], "exposed_comm_us": r["exposed_comm_us"],
                    "allreduce_all_grads_us": r["allreduce_all_grads_us"], "grad_bytes": r["grad_bytes"],
                    "bucket_cap_mb": r["bucket_cap_mb"]})
    return out


def _fmt_bytes(b: float) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b / k:g} {unit}"
    return f"{b:g} B"


def report(doc: dict[str, Any], hw: Any, raw_ref: str, *, all_sizes: bool = False) -> str:
    """The YAML block and markdown tables (comparison, contention, DDP) as one text."""
    meta = doc.get("meta") or {}
    points = busbw_points(doc, raw_ref, all_sizes=all_sizes)
    parts = [f"# {raw_ref}: {_measured_on(meta)}, NCCL {meta.get('nccl_version', '?')}, "
             f"world sizes {meta.get('world_sizes')}, {meta.get('date_utc', '?')}, status {doc.get('status')}"]
    if points:
        parts += ["", "topology.reference_busbw (measured):", reference_busbw_yaml(points).rstrip()]
    else:
        parts += ["", "no collective of two or more ranks in this file: nothing for topology.reference_busbw "
                  "(one rank only exercises the path)"]
    rows = compare(doc, hw)
    if rows:
        parts += ["", f"model ({hw.name}) vs measured:", "",
                  "| collective | ranks | size | measured us | model us | measured busbw GB/s | model busbw GB/s "
                  "| model algo/proto | error |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
        parts += [f"| {r.collective} | {r.ranks} | {_fmt_bytes(r.bytes)} | {r.measured_us:.1f} | {r.model_us:.1f} | "
                  f"{r.measured_busbw_gbps:.1f} | {r.model_busbw_gbps:.1f} | {r.algorithm}/{r.protocol} | "
                  f"{r.error:+.1%} |" for r in rows]
        parts += ["", "| collective | ranks | n | median abs err >= 1 MiB | max abs err >= 1 MiB | median abs err all |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for s in summarize(rows):
            big = "n/a" if s["median_abs_err_large"] is None else f"{s['median_abs_err_large']:.1%}"
            bigmax = "n/a" if s["max_abs_err_large"] is None else f"{s['max_abs_err_large']:.1%}"
            parts.append(f"| {s['collective']} | {s['ranks']} | {s['n']} | {big} | {bigmax} | "
                         f"{s['median_abs_err_all']:.1%} |")
    cont = contention_rows(doc)
    if cont:
        parts += ["", "| ranks | load | load slowdown | all-reduce slowdown | overlap us | all-reduce per call us | host-bound |",
                  "| ---: | --- | ---: | ---: | ---: | ---: | --- |"]
        parts += [f"| {c['ranks']} | {c['load']} | x{c['load_slowdown']:.3f} | x{c['comm_slowdown']:.3f} | "
                  f"{c['overlap_us']:.0f} | {c['allreduce_call_us']:.1f} | {'yes' if c['host_bound'] else 'no'} |"
                  for c in cont]
    ddp = ddp_rows(doc)
    if ddp:
        parts += ["", "| ranks | tokens | step us | no-comm step us | exposed comm us | all-reduce of all grads us |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        parts += [f"| {d['ranks']} | {d['tokens']} | {d['step_us']:.0f} | {d['step_no_comm_us']:.0f} | "
                  f"{d['exposed_comm_us']:.0f} | {d['allreduce_all_grads_us']:.0f} |" for d in ddp]
    return "\n".join(parts) + "\n"


def _load_release(path: Path) -> dict[str, Any]:
    """Read a gemm_release.json (sim.calibrate.gpu.gemm_release); anything else is an input error."""
    return _load_group(path, "gemm_release", "gemm_release")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw", type=Path, help="comm.json written by python3 -m sim.calibrate.gpu.comm")
    ap.add_argument("--profile", default="h200-hgx8", help="hardware profile whose comm model is compared")
    ap.add_argument("--all-sizes", action="store_true", help="emit every size, not only the largest per collective")
    ap.add_argument("--raw-ref", default=None, help="the path written into each entry's `raw` (default: RAW as given)")
    ap.add_argument("--write-nvl2", type=Path, default=None,
                    help="write the 2-GPU overlay profile fitted from RAW (on --profile) to this file")
    ap.add_argument("--sm-share", type=Path, default=None,
                    help="with --write-nvl2: a comm.json with sm_share records (SMs a GEMM loses per channel)")
    ap.add_argument("--sm-share-ref", default=None, help="the path written into its `raw` (default: as given)")
    ap.add_argument("--release", type=Path, default=None,
                    help="with --write-nvl2: a gemm_release.json (sim.calibrate.gpu.gemm_release): declares "
                         "topology.release_loss_units, fitted on it (the shipped h200-nvl2 does not: rule off)")
    ap.add_argument("--release-ref", default=None, help="the path written into its `raw` (default: as given)")
    ns = ap.parse_args(argv)
    from sim.hardware import load_profile
    from sim.outputs import write_text_atomic

    try:
        return _run(ns, load_profile, write_text_atomic)
    except InputError as exc:  # a user's mistake: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(ns: argparse.Namespace, load_profile: Any, write_text_atomic: Any) -> int:
    doc = load_comm(ns.raw)
    hw = load_profile(ns.profile)
    if ns.write_nvl2 is not None:
        share = None if ns.sm_share is None else (load_comm(ns.sm_share), ns.sm_share_ref or str(ns.sm_share))
        release = None if ns.release is None else (_load_release(ns.release), ns.release_ref or str(ns.release))
        write_text_atomic(ns.write_nvl2, nvl2_profile_yaml(doc, hw, ns.raw_ref or str(ns.raw), base_name=ns.profile,
                                                           share=share, release=release))
        print(f"wrote {ns.write_nvl2}")
        return 0
    print(report(doc, hw, ns.raw_ref or str(ns.raw), all_sizes=ns.all_sizes), end="")
    return 0



# ----------------------------------------------------------------------------- fit (issue 20)

# Sizes the fit may use: nccl-tests sizes in x16 steps (1 KiB, 16 KiB, ... 1 GiB). Every other
# measured size (x4 steps in between) and every size of a repeat run is held out.
FIT_SIZES = tuple(1024 * 16**i for i in range(6))


def _device_floor_s(coll: str, n: int, hw: Any) -> float:
    """Kernel fixed cost + NCCL's base and hop latencies of the Simple ring (no bandwidth term):
    what a device-bound call costs besides the fitted latency and bytes / bandwidth."""
    import dataclasses

    from sim.costmodel.collective import links_of

    topo = dataclasses.replace(hw.fabric, collective_fits=((coll, ((1.0, 1e18),), 0.0),))
    plan = plan_collective(coll, 1.0, n, 1, links_of(hw), topo, algorithm="ring", protocol="simple")
    return float(hw.kernel_fixed_s + plan.latency_s)


def host_call_us(doc: dict[str, Any], ranks: int) -> float | None:
    """Host time per torch.distributed all-reduce call at `ranks` (the `dist_host` stage)."""
    for r in doc["records"]:
        if r.get("bench") == "dist_host" and r.get("call") == "all_reduce" and int(r.get("world_size", 0)) == ranks:
            return float(r["host_us_per_call"])
    return None


def ddp_listed_host_us(hidden: int, ffn: int, layers: int, bucket_cap_mb: float, tokens: int, *, sync: bool,
                       hw: Any, collective_host_us: float) -> tuple[float, int]:
    """(host us of the ops the DDP workload lists, DDP's own per-step and per-hook work left out;
    the gradients whose hooks run) for one DDP step on 2 ranks: each op's dispatch and launch
    summed, a collective at `collective_host_us` (the host thread's work when it never waits)."""
    from sim.calibrate.comm_contention import ddp_workload
    from sim.costmodel.host import eager_dispatch_s, host_op_s

    wl = ddp_workload(hidden, ffn, layers, bucket_cap_mb, tokens, sync=sync)
    graph = wl.build(wl.params_for(wl.buckets()[0]))
    total, hooks = 0.0, 0
    for op in graph.ops:
        if op.kind == "host":
            if op.attrs.get("ddp_hooks") or op.attrs.get("ddp_steps"):
                hooks += int(op.attrs.get("ddp_hooks", 0))
                continue
            total += host_op_s(op, hw)
        elif op.kind == "collective":
            total += collective_host_us * 1e-6 + hw.launch_s
        else:
            total += eager_dispatch_s(op, hw) + hw.launch_s
    return total * 1e6, hooks


def fit_ddp_host(doc: dict[str, Any], hw: Any, collective_host_us: float,
                 workloads: set[tuple[int, int, int, float, bool]]) -> tuple[float, float, int] | None:
    """DDP's own host work (host.ddp) from the 2-rank DDP steps of `workloads` (the calibrated ones):
    the harness's host time per step (until the step's calls return) with and without gradient sync,
    less what the listed ops cost on `hw`. forward_us = median(no-sync host - listed ops); hook_us =
    median((sync host - no-sync host) - (listed sync ops - listed no-sync ops)) / gradients. Returns
    (forward_us, hook_us, steps used), or None without such steps."""
    fwd, hook = [], []
    for r in doc["records"]:
        if r.get("bench") not in ("ddp_step", "ddp_variant") or int(r.get("world_size", 0)) != 2:
            continue
        if r.get("cpu_enqueue_us") is None or r.get("cpu_enqueue_no_comm_us") is None:
            continue
        key = (int(r["hidden"]), int(r["ffn"]), int(r.get("layers", 1)), float(r["bucket_cap_mb"]),
               bool(r.get("gradient_as_bucket_view", False)))
        if key not in workloads or key[4]:
            continue
        listed = {sync: ddp_listed_host_us(*key[:4], int(r["tokens"]), sync=sync, hw=hw,
                                           collective_host_us=collective_host_us) for sync in (True, False)}
        fwd.append(float(r["cpu_enqueue_no_comm_us"]) - listed[False][0])
        extra = float(r["cpu_enqueue_us"]) - float(r["cpu_enqueue_no_comm_us"]) - (listed[True][0] - listed[False][0])
        hook.append(extra / listed[True][1])
    if not fwd:
        return None
    return statistics.median(fwd), statistics.median(hook), len(fwd)


def fit_collectives(doc: dict[str, Any], hw: Any, ranks: int = 2) -> dict[str, dict[str, Any]]:
    """Per collective, from the fit sizes only: the host time of one call (median time of the
    host-bound sizes <= 256 KiB, where the device needs a few us) and the bus bandwidth of the
    bandwidth term, f S / (t - floor), at device-bound sizes (t > 2 x that host time)."""
    by_coll: dict[str, list[tuple[float, float]]] = {}
    for r in collective_records(doc):
        if int(r["world_size"]) == ranks and int(r["bytes"]) in FIT_SIZES:
            by_coll.setdefault(str(r["collective"]), []).append((float(r["bytes"]), float(r["time_us"]) * 1e-6))
    out: dict[str, dict[str, Any]] = {}
    for coll, pts in sorted(by_coll.items()):
        small = [t for s, t in pts if s <= 256 * 1024]
        if not small:
            continue
        host = statistics.median(small)
        f = busbw_factor(coll, ranks)
        floor = _device_floor_s(coll, ranks, hw)
        points = [[int(s), round(f * s / (t - floor) / 1e9, 1)] for s, t in sorted(pts) if t > 2 * host]
        if points:
            out[coll] = {"points": points, "host_us": round(host * 1e6, 2)}
    return out


@dataclass(frozen=True)
class HeldOutRow:
    run: str
    collective: str
    ranks: int
    bytes: int
    measured_us: float
    predicted_us: float
    split: str  # fit | held-out size | repeat run
    host_bound: bool

    @property
    def error(self) -> float:
        return self.predicted_us / self.measured_us - 1.0


def predict_call_us(coll: str, size: float, ranks: int, hw: Any) -> tuple[float, bool]:
    """Per-call time of back-to-back calls (what the harness times): the host's per-call cost or
    the device time, whichever is longer (calls overlap host and device otherwise)."""
    from sim.costmodel.collective import links_of

    plan = plan_collective(coll, size, ranks, 1, links_of(hw), hw.fabric)
    device = (hw.kernel_fixed_s + plan.time_s) * 1e6
    host = hw.fabric.collective_host_s(coll)
    host_us = (host if host is not None else hw.eager_op_by_kind_s.get("collective", hw.eager_op_s)) * 1e6
    return max(device, host_us), host_us >= device


def heldout_rows(runs: dict[str, dict[str, Any]], hw: Any, fit_run: str, ranks: int = 2) -> list[HeldOutRow]:
    """The profile's prediction of every measured collective of every run, labelled by split."""
    rows = []
    for run, doc in runs.items():
        for r in collective_records(doc):
            if int(r["world_size"]) != ranks:
                continue
            size, coll = int(r["bytes"]), str(r["collective"])
            pred, hb = predict_call_us(coll, size, ranks, hw)
            split = ("repeat run" if run != fit_run else "fit" if size in FIT_SIZES else "held-out size")
            rows.append(HeldOutRow(run, coll, ranks, size, float(r["time_us"]), pred, split, hb))
    return rows


def _channel_gbps(doc: dict[str, Any], ranks: int) -> float | None:
    """Bus bandwidth of an all-reduce pinned to one channel (one CTA)."""
    for r in doc["records"]:
        if (r.get("bench") == "channels" and r.get("collective") == "all_reduce" and int(r.get("world_size", 0)) == ranks
                and int(r.get("ctas", 0)) == 1 and r.get("busbw_gbps")):
            return float(r["busbw_gbps"])
    return None


def _coll_channels(doc: dict[str, Any], ranks: int) -> int | None:
    for r in doc["records"]:
        if r.get("bench") == "nccl_init" and int(r.get("world_size", 0)) == ranks and r.get("coll_channels"):
            return int(r["coll_channels"])
    return None


def nvl2_profile_yaml(doc: dict[str, Any], base: Any, raw_ref: str, base_name: str = "h200-measured",
                      name: str = "h200-nvl2", share: tuple[dict[str, Any], str] | None = None,
                      release: tuple[dict[str, Any], str] | None = None) -> str:
    """The two-GPU NVLink profile as an overlay on `base_name`: topology, per-collective fits,
    channel figures and the host cost of a torch.distributed call, all from one raw comm file; with
    `share` (a comm.json with sm_share records, the path written into `raw`), the SMs a GEMM loses per
    NCCL channel (sim.calibrate.comm_sm_share); with `release` (a gemm_release.json and its path), the loss
    of a GEMM started beside a resident collective (sim.calibrate.gemm_release_fit.release_loss_entry)."""
    meta = doc.get("meta") or {}
    date = str(meta.get("date_utc", ""))[:10]
    on = f"{_measured_on(meta)}, NCCL {meta.get('nccl_version', '?')}, NVLS off"

    def measured(value: float, fit: str) -> dict[str, Any]:
        return {"value": value, "source": "measured", "measured_on": on, "date": date, "raw": raw_ref, "fit": fit}
    fits = fit_collectives(doc, base)
    host = host_call_us(doc, 2)
    bcast_pts = fits.get("broadcast", {}).get("points") or []
    ch_gbps = _channel_gbps(doc, 2)
    channels = _coll_channels(doc, 2)
    bcast = bcast_pts[-1][1] if bcast_pts else None
    if host is None or ch_gbps is None or channels is None or bcast is None:
        raise InputError("raw comm file lacks what the 2-GPU profile needs", file=raw_ref,
                         expected="dist_host, channels, nccl_init and broadcast records at world size 2")
    from sim.calibrate.comm_contention import CALIBRATED_DDP

    # the all-reduce's host price as the profile will give it (its collective fit, else the call's)
    ddp = fit_ddp_host(doc, base, float(fits.get("all_reduce", {}).get("host_us", host)), CALIBRATED_DDP)
    header = "\n".join([
        "Two NVIDIA H200 of one host on NVLink 4 through NVSwitch (the workplace's nvidia-h200-x2 kind),",
        "NVLink multicast (NVLS) off. An overlay on the measured single-GPU profile: every number below",
        f"comes from {raw_ref} through `python -m sim.calibrate.comm_fit --write-nvl2` (a test holds it).",
    ])
    fits_fit = "bandwidth term at device-bound x16 sizes; host: median time of calls <= 256 KiB"
    lost: dict[str, Any] = {}
    if share is not None:
        from sim.calibrate.comm_sm_share import fit_lost, share_cells

        share_doc, share_ref = share
        cells = share_cells(share_doc, channels)
        fit = fit_lost(base, cells)
        if fit is None:
            raise InputError("raw comm file has no sm_share cell inside its all-reduce window", file=share_ref,
                             expected="sm_share records at world size 2 (python3 -m sim.calibrate.gpu.comm --stages sm_share)")
        smeta = share_doc.get("meta") or {}
        lost = {"sms_lost_per_channel": {
            "value": fit[0], "source": "measured",
            "measured_on": f"{_measured_on(smeta)}, NCCL {smeta.get('nccl_version', '?')}, NVLS off",
            "date": str(smeta.get("date_utc", ""))[:10], "raw": share_ref,
            "fit": (f"bf16 GEMMs of calibration-split shapes started beside resident all-reduces pinned to 1-16 "
                    f"channels and the default group: the SMs lost per channel whose waves of the GEMM's tiles over "
                    f"the SMs left best match the measured slowdowns (least squares in log, {fit[1]} cells, rms "
                    f"{fit[2]:.3f}; sim.calibrate.comm_sm_share)")}}
    if release is not None:
        from sim.calibrate.gemm_release_fit import release_loss_entry

        entry = release_loss_entry(release[0], release[1], base)
        if entry is None:
            raise InputError("gemm_release file has no cells", file=release[1],
                             expected="gemm_release records (python3 -m sim.calibrate.gpu.gemm_release)")
        lost["release_loss_units"] = entry
    profile: dict[str, Any] = {
        "schema": "kernelsim.hardware/v1",
        "base": str(base_name),
        "name": name,
        "gpu": "NVIDIA H200 SXM x2 (one host, NVLink 4 via NVSwitch)",
        "description": "Two H200 GPUs of one host; collectives fitted on NCCL 2.28 with NVLink SHARP disabled.",
        "host": {**{"eager_op_us_by_kind": {"collective": measured(round(host, 2), (
            "host time per torch.distributed.all_reduce call, 4 KiB, back to back, mean of the ranks (dist_host); "
            "per collective: topology.collective_fits"))}},
                 **({} if ddp is None else {"ddp": {
            "forward_us": measured(round(ddp[0], 1), (
                "host time of a DDP step under no_sync (the harness step until its calls return, median of rank 0) "
                f"less the listed ops priced on {base_name}; median of the {ddp[2]} 2-rank steps of the calibrated "
                "DDP workload (sim.calibrate.comm_contention.CALIBRATED_DDP)")),
            "hook_us": measured(round(ddp[1], 1), (
                "per gradient: (host time with sync - under no_sync) less the listed ops difference (bucket copies, "
                "all-reduce calls), divided by the gradients; median of the same steps"))}})},
        "links": {"comm_efficiency": measured(
            round(bcast / 450.0, 3), "broadcast bus bandwidth at 1 GiB / NVLink 450 GB/s per direction")},
        "topology": {
            "gpus_per_node": measured(2, "NCCL INFO: nRanks 2 nNodes 1 localRanks 2"),
            "nodes": measured(1, "NCCL INFO: nNodes 1"),
            "intra_node": "nvswitch",
            "nics_per_node": measured(0, "NCCL INFO: NET/IB no device found (sockets only)"),
            "network_efficiency": {"value": 0.94, "source": "estimate", "note": "unused: one node, no NICs"},
            "nvls_busbw_gbps": measured(
                0, "NVLink SHARP disabled (NCCL_NVLS_ENABLE=0): NCCL reports 0 NVLS channels"),
            "channels": measured(channels, "NCCL INFO: collective channels at 2 ranks"),
            "channel_gbps": measured(
                round(ch_gbps, 1), "all-reduce bus bandwidth with one CTA (NCCL min=max CTAs 1), 256 MiB"),
            **lost,
            "collective_fits": {
                coll: {"points": [list(pt) for pt in v["points"]], "host_us": v["host_us"], "ranks": 2,
                       "source": "measured", "measured_on": on, "date": date, "raw": raw_ref, "fit": fits_fit}
                for coll, v in sorted(fits.items())},
        },
    }
    return dump_profile(profile, header)


if __name__ == "__main__":
    raise SystemExit(main())
