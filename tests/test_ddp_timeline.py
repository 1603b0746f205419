"""Where DDP's exposed communication goes (sim.calibrate.ddp_timeline): the profiled step's split and
the per-rank clocks' summary, on hand-made timelines and on the committed ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sim.calibrate.ddp_timeline import kernel_breakdown, main, rank_summary, report_lines

ROOT = Path(__file__).resolve().parents[1]


def _k(name: str, start: float, dur: float) -> dict[str, Any]:
    return {"name": name, "start_us": start, "dur_us": dur}


def test_breakdown_prices_a_kernel_beside_an_all_reduce_against_its_own_runs_alone() -> None:
    tl = [_k("gemm", 0, 100), _k("gemm", 100, 100),  # alone: 100 us
          _k("ncclDevKernel_AllReduce", 210, 80), _k("gemm", 205, 160),  # beside the all-reduce: +60 us
          _k("gemm", 400, 100),  # 35 us idle before it
          _k("ncclDevKernel_AllReduce", 500, 50), _k("Memcpy DtoD (Device -> Device)", 520, 40)]
    b = kernel_breakdown(tl)
    assert b is not None
    assert b.allreduce_kernels == 2 and b.allreduce_busy_us == 130
    assert b.beside_allreduce_loss_us == 60 and b.beside_allreduce_unpriced_us == 40  # the copy has no reference
    assert b.backward_idle_us == 35  # 365..400 (counted from the first all-reduce, to the last compute kernel)
    assert b.tail_us == 560 - 500 and b.step_us == 560
    assert kernel_breakdown([_k("gemm", 0, 10)]) is None


def _step(ready: float, device: float, buckets: list[tuple[int, float, float]] | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"host_ready_us": ready, "host_call_us": ready + 1, "host_return_us": ready + 50,
                         "host_synced_us": ready + device, "device_us": device}
    if buckets is not None:
        s["buckets"] = [{"index": i, "bytes": 1, "host_in_us": ready + h, "host_out_us": ready + h + 20,
                         "device_ready_us": d} for i, h, d in buckets]
    return s


def test_rank_summary_reads_skew_and_bucket_costs_from_both_ranks_clocks() -> None:
    rank0 = {"rank": 0, "steps": {"ddp": [_step(0, 1100)], "ddp_hook": [_step(0, 1150, [(0, 100, 300), (1, 200, 600)])],
                                  "no_sync": [_step(0, 1000)]}}
    rank1 = {"rank": 1, "steps": {"ddp": [_step(30, 1070)], "ddp_hook": [_step(30, 1120, [(0, 100, 300), (1, 200, 640)])],
                                  "no_sync": [_step(30, 1000)]}}
    s = rank_summary({"ranks": [rank0, rank1]})
    assert s.exposed_us == [100, 70] and s.exposed_hook_us == [150, 120]
    assert s.start_skew_us == 30 and s.buckets == 2 and s.hook_host_us == 20
    assert s.ready_skew_us == (30 + 70) / 2 and s.ready_skew_max_us == 70
    assert s.device_lag_us == 300  # median of 200, 400, 200, 440


def test_committed_timelines_split_and_the_command_reads_them(capsys: Any) -> None:
    doc = json.loads((ROOT / "validation" / "h200x2" / "machine_H" / "comm.json").read_text())
    lines = [ln for ln in report_lines(doc) if " races: " not in ln]
    assert len(lines) == 6 and all("all-reduce kernels" in ln for ln in lines)
    assert sum(" races: " in ln for ln in report_lines(doc)) == 6  # every profiled step has bucket copies
    assert main([str(ROOT / "validation" / "h200x2" / "machine_H" / "comm.json")]) == 0
    assert main([str(ROOT / "no_such.json")]) == 2
    assert "error: " in capsys.readouterr().err


def test_all_reduce_kernels_of_both_ranks_meet_on_the_host_clock() -> None:
    from sim.calibrate.ddp_timeline import allreduce_skew

    def prof(host: float, ts0: float, starts: list[float]) -> dict[str, Any]:
        ev = [{"name": "ks_step", "cat": "user_annotation", "ts_us": ts0, "dur_us": 900.0},
              {"name": "ncclDevKernel_AllReduce", "cat": "kernel", "ts_us": ts0 - 50, "dur_us": 5.0}]  # the barrier's
        ev += [{"name": "ncclDevKernel_AllReduce_Sum_bf16", "cat": "kernel", "ts_us": ts0 + s, "dur_us": 40.0}
               for s in starts]
        return {"ks_step_host_us": host, "events": ev}

    rec = {"ranks": [{"profile": prof(1000.0, 7.0, [100, 300])}, {"profile": prof(1020.0, 5000.0, [90, 310])}]}
    k = allreduce_skew(rec)
    assert k is not None and k.kernels == 2
    assert k.start_spread_us == [10.0, 30.0]  # 1100 vs 1110, 1300 vs 1330
    assert k.step_start_spread_us == 20.0 and k.duration_us == [[40.0, 40.0], [40.0, 40.0]]
    assert allreduce_skew({"ranks": [{"profile": None}]}) is None


def test_races_say_which_of_the_all_reduce_and_the_next_kernel_started_first() -> None:
    from sim.calibrate.ddp_timeline import collective_races, race_summary

    copy = "vectorized_elementwise_kernel<8, at::native::AUnaryFunctor<c10::BFloat16>>"
    tl = [_k("gemm_wgrad", 0, 100), _k(copy, 100, 10),  # bucket 0 ready at 110
          _k("ncclDevKernel_AllReduce_Sum_bf16", 112, 50), _k("gelu_backward", 113, 60),  # the all-reduce first
          _k(copy, 180, 10),  # bucket 1 ready at 190
          _k("Memset (Device)", 191, 1), _k("nvjet_gemm", 194, 100),  # memset skipped: the GEMM at +4 us
          _k("ncclDevKernel_AllReduce_Sum_bf16", 290, 50),  # ... the all-reduce after it
          _k(copy, 400, 10), _k("ncclDevKernel_AllReduce_Sum_bf16", 412, 50),  # bucket 2: next kernel 80 us later
          _k("nvjet_gemm", 490, 100),
          _k("ncclDevKernel_AllReduce_Sum_bf16", 600, 50)]  # its input copy is bucket 2's: no race of its own
    races = collective_races(tl)
    assert [(r.allreduce_gap_us, r.next_gap_us, r.allreduce_first, r.contested) for r in races[:3]] == [
        (2, 3, True, True), (100, 4, False, True), (2, 80, True, False)]
    assert races[1].next_name == "nvjet_gemm"
    assert race_summary(races[:3]) == (2, 1, 1)
    assert collective_races([_k("ncclDevKernel_AllReduce", 0, 10), _k("gemm", 5, 10)]) == []  # no bucket copy


def test_committed_profiles_hold_the_races_the_engine_decides_the_other_way() -> None:
    """On the committed two-GPU profiles most contested races go to the compute stream's kernel (the
    engine starts a collective first when both are ready at once: docs/communication.md)."""
    from sim.calibrate.ddp_timeline import collective_races, profile_timelines, race_summary

    races = []
    for rel in ("calibration/h200x2/comm/w3/comm.json", "validation/h200x2/machine_H/comm.json",
                "calibration/h200x2/comm/ranks/comm.json"):
        for rec in json.loads((ROOT / rel).read_text())["records"]:
            for tl in profile_timelines(rec):
                races += collective_races(tl)
    n, first, _ = race_summary(races)
    assert n >= 100 and first < n / 2


def test_the_later_ranks_kernel_is_each_all_reduces_shortest() -> None:
    from sim.calibrate.ddp_timeline import AllReduceSkew

    k = AllReduceSkew(2, [40.0, 5.0], [[180.0, 150.0], [140.0, 152.0]], 10.0)
    assert k.later_rank_us() == [140.0, 150.0]
