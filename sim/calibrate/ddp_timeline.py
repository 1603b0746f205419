"""Where DDP's exposed communication goes, read from the two-GPU harness's timelines (issue 20).

Two sources, both written by sim.calibrate.gpu.comm:
- `timeline_rank0` of a `ddp_variant` record: rank 0's kernels of one profiled step (name, stream,
  start, duration). `kernel_breakdown` splits the step into the all-reduce kernels, the time the
  compute kernels lose while an all-reduce kernel runs beside them (each against the median of the
  same kernel with no all-reduce beside it in that step), the compute stream's idle time during the
  backward (the host not keeping up), and the tail after the last compute kernel.
- a `ddp_ranks` record: every rank's clocks (one host clock for both processes). `rank_summary`
  gives per rank the device step with and without communication, the skew of the step starts
  (barrier exits), DDP's host time per bucket hook, and how far apart the ranks' buckets become ready
  on the device (the time the earlier rank's all-reduce waits for its peer).

Pure functions of the recorded data (no torch, no simpy): `python -m sim.calibrate.ddp_timeline FILE`
prints both tables for a comm.json."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _is_nccl(name: str) -> bool:
    return "nccl" in name.lower()


@dataclass(frozen=True)
class KernelBreakdown:
    """One profiled DDP step of rank 0, in us."""

    step_us: float  # first kernel start to last kernel end
    allreduce_kernels: int
    allreduce_busy_us: float  # the all-reduce kernels' summed durations (transfer and waiting for the peer)
    beside_allreduce_loss_us: float  # compute kernels' time beyond their median without an all-reduce beside
    beside_allreduce_unpriced_us: float  # compute kernels that always ran beside an all-reduce (no reference)
    backward_idle_us: float  # compute stream idle from the first all-reduce to the last compute kernel
    tail_us: float  # from the last compute kernel (bucket copies back excluded) to the step's end


def _overlap(start: float, end: float, spans: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)


def kernel_breakdown(timeline: list[dict[str, Any]]) -> KernelBreakdown | None:
    """Split rank 0's profiled DDP step (a `timeline_rank0`); None without an all-reduce kernel."""
    nccl = [(e["start_us"], e["start_us"] + e["dur_us"]) for e in timeline if _is_nccl(e["name"])]
    comp = [e for e in timeline if not _is_nccl(e["name"])]
    if not nccl or not comp:
        return None
    alone: dict[str, list[float]] = defaultdict(list)
    for e in comp:
        if _overlap(e["start_us"], e["start_us"] + e["dur_us"], nccl) == 0.0:
            alone[e["name"]].append(e["dur_us"])
    loss = unpriced = 0.0
    for e in comp:
        if _overlap(e["start_us"], e["start_us"] + e["dur_us"], nccl) > 0.0:
            if alone[e["name"]]:
                loss += e["dur_us"] - statistics.median(alone[e["name"]])
            else:
                unpriced += e["dur_us"]
    end = max(e["start_us"] + e["dur_us"] for e in timeline)
    last_comp = max(e["start_us"] + e["dur_us"] for e in comp if "Memcpy DtoD" not in e["name"])
    first_ar = min(a for a, _ in nccl)
    busy, cur = 0.0, None
    for e in sorted(comp, key=lambda x: x["start_us"]):
        s, t = max(e["start_us"], first_ar), e["start_us"] + e["dur_us"]
        if t <= first_ar or s >= last_comp:
            continue
        t = min(t, last_comp)
        if cur is None or s > cur[1]:
            if cur is not None:
                busy += cur[1] - cur[0]
            cur = [s, t]
        else:
            cur[1] = max(cur[1], t)
    if cur is not None:
        busy += cur[1] - cur[0]
    return KernelBreakdown(end - min(e["start_us"] for e in timeline), len(nccl), sum(b - a for a, b in nccl),
                           loss, unpriced, max(0.0, last_comp - first_ar - busy), end - last_comp)


# A bucket's all-reduce "races" the compute stream's next kernel when that kernel starts within this
# long of the bucket's last gradient copy: it was queued already (the host is ahead), so both became
# ready together; a later start means the host had not launched it yet (no race).
RACE_WINDOW_US = 10.0


@dataclass(frozen=True)
class CollectiveRace:
    """A bucket all-reduce against the compute stream's next kernel, both ready when the bucket's last
    gradient copy (DDP's scaled copy into the bucket, an AUnaryFunctor kernel) ends, in us from its end."""

    allreduce_gap_us: float  # the all-reduce kernel's start
    next_gap_us: float  # the compute stream's next kernel's start (memsets skipped)
    next_name: str
    allreduce_first: bool

    @property
    def contested(self) -> bool:
        return self.next_gap_us <= RACE_WINDOW_US


def _is_bucket_copy(name: str) -> bool:
    return "AUnaryFunctor" in name


def collective_races(timeline: list[dict[str, Any]]) -> list[CollectiveRace]:
    """Every all-reduce kernel of one rank's profiled DDP step (kernels with name, start_us, dur_us)
    whose input is a bucket copy: which of it and the compute stream's next kernel started first.
    All-reduces with no bucket copy before them (gradients as bucket views) are left out."""
    ordered = sorted(timeline, key=lambda e: e["start_us"])
    comp = [e for e in ordered if not _is_nccl(e["name"])]
    out = []
    for ar in ordered:
        if not _is_nccl(ar["name"]):
            continue
        copies = [e for e in comp if _is_bucket_copy(e["name"]) and e["start_us"] < ar["start_us"]]
        if not copies:
            continue
        ready = copies[-1]["start_us"] + copies[-1]["dur_us"]
        nxt = next((e for e in comp if e["start_us"] >= ready - 1e-6 and "Memset" not in e["name"]), None)
        if nxt is None:
            continue
        out.append(CollectiveRace(ar["start_us"] - ready, nxt["start_us"] - ready, nxt["name"],
                                  ar["start_us"] < nxt["start_us"]))
    return out


def profile_timelines(rec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The profiled step's kernels (name, start_us, dur_us) of every rank: a `ddp_variant` record's
    `timeline_rank0`, or each rank's profile of a `ddp_ranks` record."""
    if rec.get("timeline_rank0"):
        return [rec["timeline_rank0"]]
    out = []
    for r in rec.get("ranks") or []:
        prof = r.get("profile")
        if prof:
            out.append([{"name": e["name"], "start_us": e["ts_us"], "dur_us": e["dur_us"]} for e in prof["events"]
                        if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")])
    return out


def race_summary(races: list[CollectiveRace]) -> tuple[int, int, int]:
    """(contested races, of them the all-reduce first, uncontested all-reduces)."""
    contested = [r for r in races if r.contested]
    return len(contested), sum(r.allreduce_first for r in contested), len(races) - len(contested)


@dataclass(frozen=True)
class RankSummary:
    """A `ddp_ranks` record (two or more ranks), in us."""

    step_us: dict[str, list[float]]  # mode -> per rank, median device time of the step
    exposed_us: list[float]  # per rank: ddp - no_sync
    exposed_hook_us: list[float]  # per rank: DDP with the timestamping hook - no_sync
    start_skew_us: float  # median over steps of the latest minus the earliest rank's barrier exit
    hook_host_us: float  # median host time of one bucket hook (DDP's all-reduce hook, entry to return)
    buckets: int
    ready_skew_us: float  # median over buckets and steps of the spread of the ranks' device ready times
    ready_skew_max_us: float
    device_lag_us: float  # median over buckets of device ready - host hook entry (> 0: the host is ahead)


def rank_summary(rec: dict[str, Any]) -> RankSummary:
    """Summarize a `ddp_ranks` record: per-rank step times, start skew, bucket hook cost and skew."""
    ranks = rec["ranks"]
    med = statistics.median
    modes = list(ranks[0]["steps"])
    step = {m: [med(s["device_us"] for s in r["steps"][m]) for r in ranks] for m in modes}
    exposed = [a - b for a, b in zip(step["ddp"], step["no_sync"], strict=True)]
    exposed_hook = [a - b for a, b in zip(step["ddp_hook"], step["no_sync"], strict=True)]
    skews = []
    for m in modes:
        for i in range(len(ranks[0]["steps"][m])):
            t = [r["steps"][m][i]["host_ready_us"] for r in ranks]
            skews.append(max(t) - min(t))
    hook_host, ready_spread, lag = [], [], []
    n_buckets = 0
    for i in range(len(ranks[0]["steps"]["ddp_hook"])):
        per_rank = [r["steps"]["ddp_hook"][i] for r in ranks]
        by_index = [{b["index"]: b for b in s.get("buckets") or []} for s in per_rank]
        n_buckets = max(n_buckets, len(by_index[0]))
        for s, bi in zip(per_rank, by_index, strict=True):
            for b in bi.values():
                hook_host.append(b["host_out_us"] - b["host_in_us"])
                lag.append(b["device_ready_us"] - (b["host_in_us"] - s["host_ready_us"]))
        for k in by_index[0]:
            if all(k in bi for bi in by_index):
                # the device start is the barrier exit (the GPU is idle, the start event is recorded next)
                ready = [s["host_ready_us"] + bi[k]["device_ready_us"] for s, bi in zip(per_rank, by_index, strict=True)]
                ready_spread.append(max(ready) - min(ready))
    return RankSummary(step, exposed, exposed_hook, med(skews), med(hook_host) if hook_host else 0.0, n_buckets,
                       med(ready_spread) if ready_spread else 0.0, max(ready_spread) if ready_spread else 0.0,
                       med(lag) if lag else 0.0)


@dataclass(frozen=True)
class AllReduceSkew:
    """The profiled step's all-reduce kernels of every rank on one clock, in us."""

    kernels: int  # all-reduce kernels per rank (the fewest of any rank)
    start_spread_us: list[float]  # per all-reduce: latest minus earliest rank's kernel start
    duration_us: list[list[float]]  # per rank, per all-reduce: the kernel's duration
    step_start_spread_us: float  # the ranks' `ks_step` annotations (the step's start on the host)

    def later_rank_us(self) -> list[float]:
        """Per all-reduce, the shortest rank's kernel: the rank that started it last waits for no peer,
        so its duration is the collective's own time there (transfer, and whatever slows it beside)."""
        return [min(d[i] for d in self.duration_us) for i in range(self.kernels)]


def allreduce_skew(rec: dict[str, Any]) -> AllReduceSkew | None:
    """Match the k-th all-reduce kernel of every rank's profiled step (a `ddp_ranks` record), on the
    host clock: the profiler's times shifted so that each rank's `ks_step` annotation sits at the host
    clock read just before it. None when a rank has no profile."""
    per_rank, marks = [], []
    for r in rec["ranks"]:
        prof = r.get("profile")
        if not prof:
            return None
        mark = next((e for e in prof["events"] if e["name"] == "ks_step" and e["cat"] == "user_annotation"), None)
        if mark is None:
            return None
        shift = prof["ks_step_host_us"] - mark["ts_us"]
        marks.append(prof["ks_step_host_us"])
        per_rank.append([(e["ts_us"] + shift, e["dur_us"]) for e in prof["events"]
                         if e["cat"] == "kernel" and _is_nccl(e["name"]) and e["ts_us"] >= mark["ts_us"]])
    n = min(len(k) for k in per_rank)
    spread = [max(k[i][0] for k in per_rank) - min(k[i][0] for k in per_rank) for i in range(n)]
    return AllReduceSkew(n, spread, [[d for _, d in k[:n]] for k in per_rank], max(marks) - min(marks))


def _label(rec: dict[str, Any]) -> str:
    return (f"{rec.get('variant', 'ddp')} T={rec['tokens']}")


def report_lines(doc: dict[str, Any]) -> list[str]:
    """Both tables for one comm.json document."""
    lines = []
    for rec in doc.get("records") or []:
        if rec.get("bench") == "ddp_variant" and rec.get("timeline_rank0"):
            b = kernel_breakdown(rec["timeline_rank0"])
            if b is not None:
                lines.append(f"{_label(rec)}: exposed {rec['exposed_comm_us']:.0f} us (median steps); profiled step "
                             f"{b.step_us:.0f} us: {b.allreduce_kernels} all-reduce kernels {b.allreduce_busy_us:.0f} us, "
                             f"compute lost beside them {b.beside_allreduce_loss_us:.0f} us (+{b.beside_allreduce_unpriced_us:.0f}"
                             f" us with no reference), backward idle {b.backward_idle_us:.0f} us, tail {b.tail_us:.0f} us")
        races = [r for tl in profile_timelines(rec) for r in collective_races(tl)]
        if races:
            n, first, free = race_summary(races)
            lines.append(f"  {_label(rec)} races: the compute stream's next kernel started within {RACE_WINDOW_US:g} us "
                         f"of the bucket copy {n} times, the all-reduce first in {first}; {free} uncontested")
        if rec.get("bench") == "ddp_ranks" and rec.get("ranks"):
            s = rank_summary(rec)
            lines.append(f"{_label(rec)} per rank: exposed {[round(x) for x in s.exposed_us]} us (with the hook "
                         f"{[round(x) for x in s.exposed_hook_us]}), step {[round(x) for x in s.step_us['ddp']]} vs no_sync "
                         f"{[round(x) for x in s.step_us['no_sync']]}; start skew {s.start_skew_us:.0f} us; {s.buckets} "
                         f"buckets, hook {s.hook_host_us:.0f} us host each, ready skew {s.ready_skew_us:.0f} us "
                         f"(max {s.ready_skew_max_us:.0f}), device behind host by {s.device_lag_us:.0f} us")
            k = allreduce_skew(rec)
            if k is not None and k.kernels:
                lines.append(f"  profiled step: start spread {k.step_start_spread_us:.0f} us; {k.kernels} all-reduce kernels, "
                             f"start spread median {statistics.median(k.start_spread_us):.0f} us (max "
                             f"{max(k.start_spread_us):.0f}); summed kernel time per rank "
                             f"{[round(sum(d)) for d in k.duration_us]} us; each all-reduce's shortest rank kernel (the later "
                             f"to start: no wait for its peer) median {statistics.median(k.later_rank_us()):.0f} us")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="comm.json files of sim.calibrate.gpu.comm")
    ns = ap.parse_args(argv)
    races: list[CollectiveRace] = []
    for path in ns.files:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"error: {path}: cannot read a comm.json ({exc})", file=sys.stderr)
            return 2
        print(f"== {path}")
        for line in report_lines(doc):
            print(line)
        races.extend(r for rec in doc.get("records") or [] for tl in profile_timelines(rec) for r in collective_races(tl))
    if races:
        n, first, free = race_summary(races)
        print(f"all files: {n} contested races, the all-reduce first in {first}; {free} uncontested")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
