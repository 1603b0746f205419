"""Calibration microbenchmarks on a CUDA GPU: one raw JSON file per group.

    python3 -m sim.calibrate.gpu.micro --mode {smoke,quick,full} --out DIR [--groups a,b]
        [--budget-s SECONDS] [--pack ARCHIVE.tar.gz]

Each group writes DIR/<group>.json = {"meta", "group", "mode", "status", "records", "errors"};
the file is rewritten after every record, so a run cut short leaves valid JSON with
status "running" or "truncated". With --pack, DIR is tarred into ARCHIVE after each group.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import common
from .common import Budget, ResultFile, log

GROUPS = ["copy", "kernel_overhead", "elementwise", "register_sweep", "gemm", "attention",
          "reduction", "layout", "streams"]

# Share of the run's time budget each group may use (soft; a group stops its sweep early).
GROUP_SHARE = {"copy": 0.09, "kernel_overhead": 0.10, "elementwise": 0.15, "register_sweep": 0.16,
               "gemm": 0.17, "attention": 0.10, "reduction": 0.07, "layout": 0.05, "streams": 0.06}

BENCH_ARGS = {
    "smoke": {"warmup_ms": 1.0, "rep_ms": 3.0, "min_reps": 3, "max_reps": 5},
    "quick": {"warmup_ms": 5.0, "rep_ms": 15.0, "min_reps": 5, "max_reps": 25},
    "full": {"warmup_ms": 10.0, "rep_ms": 50.0, "min_reps": 10, "max_reps": 100},
}


@dataclass
class Ctx:
    mode: str
    budget: Budget
    rf: ResultFile

    @property
    def smoke(self) -> bool:
        return self.mode == "smoke"

    def pick(self, smoke: Any, quick: Any, full: Any) -> Any:
        return {"smoke": smoke, "quick": quick, "full": full}[self.mode]

    def bench(self, fn: Callable[[int], Any], **kw: Any) -> dict[str, Any]:
        args = dict(BENCH_ARGS[self.mode])
        args.update(kw)
        return common.bench(fn, **args)

    def out_of_time(self) -> bool:
        if self.budget.expired():
            if self.rf.doc.get("truncated") is not True:
                self.rf.doc["truncated"] = True
                log(f"[{self.rf.doc['group']}] time budget reached, stopping this group early")
            return True
        return False

    def record(self, rec: dict[str, Any]) -> None:
        self.rf.add(rec)

    def attempt(self, where: str, fn: Callable[[], Any]) -> Any:
        """Run one measurement; an exception is recorded and the sweep goes on."""
        return common.guarded(self.rf, where, fn)


def _registry() -> dict[str, Callable[[Ctx], None]]:
    from . import groups_compute, groups_memory, groups_overhead

    return {
        "copy": groups_memory.run_copy,
        "elementwise": groups_memory.run_elementwise,
        "register_sweep": groups_memory.run_register_sweep,
        "reduction": groups_memory.run_reduction,
        "layout": groups_memory.run_layout,
        "kernel_overhead": groups_overhead.run_kernel_overhead,
        "streams": groups_overhead.run_streams,
        "gemm": groups_compute.run_gemm,
        "attention": groups_compute.run_attention,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python3 -m sim.calibrate.gpu.micro", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["smoke", "quick", "full"], default="quick")
    ap.add_argument("--out", required=True, help="folder for <group>.json files")
    ap.add_argument("--groups", default=",".join(GROUPS), help="comma-separated subset of: " + ",".join(GROUPS))
    ap.add_argument("--budget-s", type=float, default=None, help="wall-clock budget for all groups")
    ap.add_argument("--pack", default=None, help="tar.gz the out folder here after each group")
    ns = ap.parse_args(argv)
    groups = [g.strip() for g in ns.groups.split(",") if g.strip()]
    bad = [g for g in groups if g not in GROUPS]
    if bad:
        ap.error(f"unknown group(s) {bad}; known: {GROUPS}")
    ns.group_list = groups
    return ns


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("micro: no CUDA device visible", file=sys.stderr)
        return 2
    os.makedirs(ns.out, exist_ok=True)
    t_start = time.time()
    budget = Budget(t_start + ns.budget_s if ns.budget_s else None)
    meta = common.collect_meta({"mode": ns.mode})
    log(f"micro mode={ns.mode} groups={ns.group_list} gpu={meta.get('gpu_name')} "
        f"sm={meta.get('sm_count')} l2={meta.get('l2_bytes')} smi={meta.get('nvidia_smi')}")

    def pack() -> None:
        if ns.pack:
            common.pack_dir(ns.out, ns.pack)

    meta["warmup_s"] = common.warm_gpu(0.2 if ns.mode == "smoke" else 1.5)
    meta["nvidia_smi_after_warmup"] = common._nvidia_smi_query()
    reg = _registry()
    share_total = sum(GROUP_SHARE[g] for g in ns.group_list)
    summary = []
    for gi, g in enumerate(ns.group_list):
        remaining_share = sum(GROUP_SHARE[x] for x in ns.group_list[gi:])
        if ns.budget_s:
            left = budget.deadline - time.time()
            budget.start_group(left * GROUP_SHARE[g] / remaining_share)
        else:
            budget.start_group(float("inf"))
        rf = ResultFile(os.path.join(ns.out, f"{g}.json"), g, meta, on_flush=pack)
        rf.doc["mode"] = ns.mode
        ctx = Ctx(ns.mode, budget, rf)
        t0 = time.time()
        log(f"group {g} start (soft budget {budget.left():.0f} s)")
        status = "complete"
        try:
            reg[g](ctx)
        except Exception as exc:  # noqa: BLE001
            rf.error(f"group {g}", exc)
            status = "failed"
        if status == "complete" and rf.doc.get("truncated"):
            status = "truncated"
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        rf.close(status)
        dt = time.time() - t0
        summary.append((g, status, len(rf.doc["records"]), len(rf.doc["errors"]), dt))
        log(f"group {g} {status}: {len(rf.doc['records'])} records, {len(rf.doc['errors'])} errors, {dt:.1f} s")
    log(f"micro total wall {time.time() - t_start:.1f} s (share_total {share_total:.2f})")
    for row in summary:
        g, st, nrec, nerr, dt = row
        print(f"SUMMARY {g:<16} {st:<10} records={nrec:4d} errors={nerr:3d} wall_s={dt:.1f}", flush=True)
    pack()
    return 0


if __name__ == "__main__":
    sys.exit(main())
