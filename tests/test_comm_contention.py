"""The contention benchmark and DDP step of the two-GPU harness, replayed in the engine
(sim.calibrate.comm_contention), and their validation rows against the committed measurements."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.calibrate.comm_contention import (
    CALIBRATED_DDP,
    cell_workload,
    ddp_buckets,
    ddp_exposed_us,
    ddp_workload,
    simulate_cell,
)
from sim.calibrate.comm_fit import ddp_listed_host_us, fit_ddp_host, load_comm
from sim.costmodel.host import host_op_s
from sim.errors import InputError
from sim.hardware import load_profile
from sim.validate.comm import contention_quantities, contention_rows, ddp_rows

ROOT = Path(__file__).resolve().parents[1]
COMM = ROOT / "calibration" / "h200x2" / "comm"
MIB = 1 << 20


def test_ddp_buckets_close_at_one_mib_first_then_at_the_cap() -> None:
    params = [("b2", 8 * 1024), ("w2", 30 * MIB), ("b1", 4 * 1024), ("w1", 10 * MIB), ("b0", 4 * 1024),
              ("w0", 10 * MIB), ("x", 6 * MIB)]
    # first bucket: 8 KiB + 30 MiB >= 1 MiB; then 25 MiB: 4 KiB + 10 + 4 KiB + 10 + 6 MiB >= 25 MiB
    assert ddp_buckets(params, 25) == [["b2", "w2"], ["b1", "w1", "b0", "w0", "x"]]
    assert ddp_buckets(params, 5) == [["b2", "w2"], ["b1", "w1"], ["b0", "w0"], ["x"]]


def test_ddp_workload_issues_each_bucket_once_its_last_gradient_is_in() -> None:
    wl = ddp_workload(1024, 4096, 2, 5, 2048)
    ops = [o.name for o in wl.build({"ranks": 2}).ops]
    # each weight (8 MiB) closes a bucket with the bias before it; block 1's grads come first
    assert [n for n in ops if n.endswith("allreduce")] == [f"bucket{k}_allreduce" for k in range(4)]
    assert ops.index("bucket0_allreduce") == ops.index("bucket_in_w2_1") + 1
    assert ops.index("bucket1_allreduce") < ops.index("fc2_dgrad_0")
    views = [o.name for o in ddp_workload(1024, 4096, 2, 5, 2048, gradient_as_bucket_view=True).build({"ranks": 2}).ops]
    assert not any(n.startswith("bucket_in") or n.startswith("bucket_out") for n in views)
    nosync = [o.name for o in ddp_workload(1024, 4096, 2, 5, 2048, sync=False).build({"ranks": 2}).ops]
    assert not any(n.startswith("bucket") for n in nosync)


def test_ddp_exposes_communication_and_fewer_copies_expose_less() -> None:
    hw = load_profile("h200-nvl2")
    with_comm, without = ddp_exposed_us(hw, 2048, 8192, 1, 25, 4096)
    view_comm, view_without = ddp_exposed_us(hw, 2048, 8192, 1, 25, 4096, gradient_as_bucket_view=True)
    assert with_comm > without and view_without == pytest.approx(without)
    assert 0 < view_comm - view_without < with_comm - without


def test_ddp_host_work_is_the_profiles_per_step_and_per_gradient_cost() -> None:
    hw = load_profile("h200-nvl2")
    assert hw.ddp_forward_s is not None and hw.ddp_hook_s is not None
    sync, nosync = (ddp_workload(1024, 4096, 2, 5, 2048, sync=s).build({"ranks": 2}) for s in (True, False))
    for graph in (sync, nosync):  # a share after each of the model's 19 kernels (6 forward, 13 backward), both modes
        shares = [host_op_s(o, hw) for o in graph.ops if o.name.startswith("ddp_step_share_")]
        assert len(shares) == 19 and sum(shares) == pytest.approx(hw.ddp_forward_s)
    hooks = [o for o in sync.ops if o.name.startswith("ddp_hook_")]
    assert len(hooks) == 8 and not any(o.name.startswith("ddp_hook_") for o in nosync.ops)
    assert host_op_s(hooks[0], hw) == pytest.approx(hw.ddp_hook_s)
    # each hook runs before its gradient's bucket copy
    names = [o.name for o in sync.ops]
    assert names.index("ddp_hook_w2_1") + 1 == names.index("bucket_in_w2_1")


def test_a_profile_without_ddp_host_costs_cannot_price_ddp_hooks() -> None:
    hw = load_profile("h200-measured")
    assert hw.ddp_forward_s is None
    op = next(o for o in ddp_workload(1024, 4096, 1, 5, 2048).build({"ranks": 2}).ops if o.name.startswith("ddp_hook_"))
    with pytest.raises(InputError, match="host.ddp"):
        host_op_s(op, hw)


def test_ddp_host_fit_is_the_calibrated_steps_host_less_the_listed_ops() -> None:
    doc = load_comm(COMM / "B" / "comm.json")
    base = load_profile("h200-measured")
    fit = fit_ddp_host(doc, base, 50.0, CALIBRATED_DDP)
    assert fit is not None
    fwd_us, hook_us, n = fit
    assert n == 3  # the three 2-rank steps of run B; world-1 steps and other workloads are not used
    rec = next(r for r in doc["records"] if r.get("bench") == "ddp_step" and r["world_size"] == 2 and r["tokens"] == 4096)
    listed_nosync, _ = ddp_listed_host_us(4096, 16384, 1, 25, 4096, sync=False, hw=base, collective_host_us=50.0)
    assert fwd_us == pytest.approx(rec["cpu_enqueue_no_comm_us"] - listed_nosync)  # 4096 tokens is the median
    assert fit_ddp_host(doc, base, 50.0, set()) is None
    assert 0 < hook_us < fwd_us


def test_a_cell_on_a_phase_knife_edge_is_the_mean_over_the_load_calls_spread() -> None:
    # GEMM 4096x16384x4096 (778 us a call alone) vs 256 MiB all-reduces (949 us): whether each
    # all-reduce waits for a whole GEMM flips with a 2 % change of the GEMM's call
    hw = load_profile("h200-nvl2")
    load = {"m": 4096, "n": 16384, "k": 4096}
    runs = [simulate_cell(hw, load, 256 * MIB, 12, 10, 778.0 * f, 949.0).comm_slowdown for f in (0.98, 1.0)]
    assert runs[0] > 1.2 and runs[1] < 1.05
    averaged = simulate_cell(hw, load, 256 * MIB, 12, 10, 778.0, 949.0, phase_spread=0.02)
    assert runs[1] < averaged.comm_slowdown < runs[0]
    assert simulate_cell(hw, load, 256 * MIB, 12, 10, 778.0, 949.0, phase_spread=0.0) == \
        simulate_cell(hw, load, 256 * MIB, 12, 10, 778.0, 949.0)


def test_cell_issues_the_harness_calls_interleaved() -> None:
    names = [o.name for o in cell_workload({"m": 256, "n": 256, "k": 256}, 4 * MIB, 2, 3).build({"ranks": 2}).ops]
    assert names == ["ar0", "load0", "ar1", "load1", "ar2"]


def test_a_one_wave_gemm_does_not_hold_an_all_reduce_back_like_a_filling_one() -> None:
    # 2048^3 bf16: 128 tiles of 128 x 256 on 132 SMs (not filling); 8192^3: 2048 tiles (16 waves)
    hw = load_profile("h200-nvl2")
    small = simulate_cell(hw, {"m": 2048, "n": 2048, "k": 2048}, 32 * MIB, 200, 40)
    big = simulate_cell(hw, {"m": 8192, "n": 8192, "k": 8192}, 32 * MIB, 4, 40)
    assert big.comm_slowdown > small.comm_slowdown


def test_contention_cells_the_rule_was_chosen_on_are_within_ten_points() -> None:
    # issue 20's goal on GEMM 8192 and a 1 GiB copy vs 256 MiB all-reduces (runs B, r2, w3): the engine's
    # rule has no fitted constant, but these cells are where it was chosen ("calibrated").
    rows = contention_rows(COMM, split="calibrated")
    assert len(rows) >= 12 and {r.regime for r in rows} == {"device"}
    for r in rows:
        assert abs(r.error_pp) <= 10.0, r
    q = contention_quantities(rows)["comm_contention/device_bound/calibrated"]
    assert q["max_abs_pp"] <= 10.0


def test_ddp_rows_cover_every_committed_two_rank_step() -> None:
    rows = ddp_rows(COMM)
    assert len(rows) >= 9
    assert {r.split for r in rows if "4096->16384 x1, bucket 25 MB, " in r.label and "views" not in r.label} == {
        "calibrated"}
    assert {r.split for r in rows if "[r2]" in r.label or "[r3]" in r.label or "x4" in r.label} == {"unseen"}
    assert all(r.predicted_us > 0 for r in rows)


def test_a_machine_held_out_by_machine_has_its_own_splits() -> None:
    # machine H (validation/h200x2/machine_H): read by no fit; the calibrated cells and DDP workload are
    # split heldout_machine_fitcfg there, every other one heldout_machine; run B's records stay as they were
    from sim.validate.comm import HELDOUT_MACHINE, HELDOUT_MACHINE_FIT_CONFIG, heldout_machine_runs

    runs = [(m, doc) for m, doc in heldout_machine_runs(ROOT) if m == "H"]
    rows = ddp_rows(COMM, runs=runs)
    assert len(rows) == 10 and all(r.run == "H" for r in rows)
    fit = [r for r in rows if r.split == HELDOUT_MACHINE_FIT_CONFIG]
    assert [r.label for r in fit] == ["DDP MLP 4096->16384 x1, bucket 25 MB, 4096 tokens [H]"]
    assert {r.split for r in rows} == {HELDOUT_MACHINE, HELDOUT_MACHINE_FIT_CONFIG}
    cells = contention_rows(COMM, runs=[(m, {"records": [r for r in doc["records"] if r.get("bench") == "contention"]})
                                        for m, doc in runs])
    assert cells and {r.split for r in cells} == {HELDOUT_MACHINE_FIT_CONFIG}  # the calibrated cells' bench
    assert heldout_machine_runs(ROOT / "nothing") == []


def test_a_later_machine_and_its_repeat_run_have_splits_of_their_own() -> None:
    # machine P (validation/h200x2/machine_P) and its repeat run two minutes later (repeat/comm.json, run
    # "Pr"): split heldout_machine_p(_fitcfg), so they never move machine H's groups
    from sim.validate.comm import HELDOUT_MACHINE, heldout_machine_runs, machine_of

    runs = heldout_machine_runs(ROOT)
    assert [m for m, _ in runs] == ["H", "P", "Pr"]
    assert [machine_of(m) for m, _ in runs] == ["H", "P", "P"]
    p_runs = [(m, doc) for m, doc in runs if m != "H"]
    rows = ddp_rows(COMM, runs=p_runs)
    assert len(rows) == 20 and {r.run for r in rows} == {"P", "Pr"}
    assert {r.split for r in rows if "4096->16384 x1, bucket 25 MB, 4096" in r.label} == {"heldout_machine_p_fitcfg"}
    assert {r.split for r in rows} == {"heldout_machine_p", "heldout_machine_p_fitcfg"}
    assert HELDOUT_MACHINE not in {r.split for r in rows}


def test_held_out_machines_all_reduces_alone_are_the_cells_median_per_call() -> None:
    from sim.calibrate.comm_fit import predict_call_us
    from sim.validate.comm import heldout_collective_rows

    doc = {"records": [
        {"bench": "contention_grid", "world_size": 2, "allreduce_bytes": 32 * MIB, "allreduce_calls": 10,
         "comm_alone_us": us} for us in (1400.0, 1500.0, 2000.0)] + [
        {"bench": "contention", "world_size": 2, "allreduce_bytes": 4 * MIB, "allreduce_calls": 4, "comm_alone_us": 160.0},
        {"bench": "contention_grid", "world_size": 2, "allreduce_bytes": 4 * MIB, "skipped": "budget"},
        {"bench": "ddp_variant", "world_size": 2, "allreduce_bytes": 4 * MIB}]}
    rows = heldout_collective_rows([("P", doc), ("Pr", doc)])
    assert [(r.run, r.bytes, r.measured_us) for r in rows] == [
        ("P", 4 * MIB, 40.0), ("P", 32 * MIB, 150.0), ("Pr", 4 * MIB, 40.0), ("Pr", 32 * MIB, 150.0)]
    # 4 MiB is a size the collective fit used (FIT_SIZES): the machine's fit-config split
    assert [r.split for r in rows[:2]] == ["heldout_machine_p_fitcfg", "heldout_machine_p"]
    hw = load_profile("h200-nvl2")
    assert rows[1].predicted_us == predict_call_us("all_reduce", 32 * MIB, 2, hw)[0]
    # H keeps the first held-out machine's split names
    assert heldout_collective_rows([("H", doc)])[1].split == "heldout_machine"
