"""The fit of SMs lost per NCCL channel from the harness's sm_share cells (sim.calibrate.comm_sm_share)
and the wave rule it feeds (sim.costmodel.collective.rounds_beside)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sim.calibrate.comm_sm_share import ShareCell, fit_lost, gemm_units, modeled, share_cells
from sim.costmodel.collective import rounds_beside
from sim.hardware import load_profile


def test_rounds_beside_costs_a_round_per_left_out_share_not_the_sm_share() -> None:
    assert rounds_beside(128, 132, 132) == pytest.approx(128 / 132)  # one wave, fits: no loss
    assert rounds_beside(128, 132, 108) == 2.0  # 20 CTAs left out: their tiles after the resident ones'
    assert rounds_beside(512, 132, 131) == 5 / 4  # 4 rounds alone; one SM lost costs a round (measured x1.25)
    assert rounds_beside(64, 132, 108) == pytest.approx(64 / 108)  # fits beside too
    assert rounds_beside(0, 132, 108) == 0.0


def _doc(true_lost: float, hw: Any) -> dict[str, Any]:
    """Synthetic sm_share records whose measured slowdowns are the model's at `true_lost`."""
    recs: list[dict[str, Any]] = [{"bench": "sm_share_meta", "world_size": 2, "per_rank": [{
        "allreduce_kernel_default": [{"name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "grid": [24, 1, 1]}]}]}]
    for m, n, k in ((2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192)):
        cells: dict[str, Any] = {"alone": {"per_rank": [{"per_call_us": 100.0, "contained": True}] * 2,
                                           "slowdown_ranks": [1.0, 1.0]}}
        for c in (1, 4, 8, 16, None):
            ctas = 24 if c is None else c
            s = modeled(hw, ShareCell(m, n, k, "all_reduce", ctas, 1.0, True, 100.0), true_lost)
            cells[f"allreduce_{c}"] = {"occupier": "all_reduce", "ctas": c, "slowdown_ranks": [s, s],
                                       "per_rank": [{"per_call_us": 100 * s, "contained": True}] * 2}
        cells["copy"] = {"occupier": "copy", "slowdown_ranks": [1.1, 1.1],
                         "per_rank": [{"per_call_us": 110.0, "contained": True}] * 2}
        recs.append({"bench": "sm_share", "world_size": 2, "load_shape": {"m": m, "n": n, "k": k}, "cells": cells})
    recs.append({"bench": "sm_share", "world_size": 2, "load": "x", "skipped": "budget"})
    return {"records": recs}


@pytest.mark.parametrize("true_lost", [1.0, 2.0])
def test_fit_recovers_the_loss_that_made_the_cells(true_lost: float) -> None:
    hw = load_profile("h200-nvl2")
    cells = share_cells(_doc(true_lost, hw), 16)
    assert len(cells) == 3 * 6
    assert {c.ctas for c in cells if c.occupier == "all_reduce"} == {1, 4, 8, 16, 24}  # default: the kernel's grid
    lost, n, rms = fit_lost(hw, cells) or (0.0, 0, 1.0)
    assert n == 15 and rms == pytest.approx(0.0, abs=1e-12)
    # the loss is a step function of SMs: the fit gives the smallest loss with the same waves
    for c in cells:
        if c.occupier == "all_reduce":
            assert modeled(hw, c, lost) == pytest.approx(c.measured)
    assert abs(lost - true_lost) < 0.5


def test_cells_outside_the_occupier_window_are_not_fitted() -> None:
    hw = load_profile("h200-nvl2")
    cells = [ShareCell(2048, 2048, 2048, "all_reduce", 24, 3.0, False, 50.0)]
    assert fit_lost(hw, cells) is None
    assert gemm_units(hw, 2048, 2048, 2048) >= 128


def _gemm_cost(tiles: int, time_s: float = 1e-3) -> Any:
    from types import MappingProxyType

    from sim.kernelcost import KernelCost

    return KernelCost(time_s, time_s, 0.0, 0.0, "tensor_core", "compute", 0.0, sm_demand=min(1.0, tiles / 132),
                      detail=MappingProxyType({"tiles": tiles, "split_k": 1}))


@pytest.mark.parametrize(("tiles", "taken", "expected"), [
    (512, None, 132 / 108),  # no measured loss: the SMs not held, shared as a fluid
    (512, 48, 7 / 4),  # 4 rounds alone; 48 CTAs x 3.9 tiles left out: 3 more rounds on 84 SMs
    (128, 24, 2.0),  # one wave alone, two beside
    (64, 24, 1.0),  # fits on the SMs left
])
def test_a_gemm_beside_a_held_collective_runs_in_waves_over_the_sms_left(tiles: int, taken: int | None,
                                                                        expected: float) -> None:
    import simpy

    from sim.engine import HoldingGPU

    env = simpy.Environment()
    gpu = HoldingGPU(env)
    gpu.hold(0.0, 24 / 132, None if taken is None else taken / 132, 132)
    done = gpu.run_kernel(1e-3, _gemm_cost(tiles))
    env.run(until=done)
    assert env.now == pytest.approx(1e-3 * expected)


def test_release_beside_counts_the_units_left_when_the_sms_come_back() -> None:
    from sim.kernelcost import release_beside

    # 256 units, 2 per CTA (190 us alone, 95 us a unit), 24 of 132 SMs held until 200 us: 108 CTAs do
    # 216 units by 190 us, the 40 left take one more round: 285 us
    assert release_beside(256, 132, 108, 190e-6, 200e-6) == pytest.approx(285e-6)
    # held throughout: ceil(256 / 108) = 3 rounds (rounds_beside's count)
    assert release_beside(256, 132, 108, 190e-6, math.inf) == pytest.approx(3 * 95e-6)
    assert release_beside(512, 132, 108, 100e-6, math.inf) == pytest.approx(100e-6 * rounds_beside(512, 132, 108))
    # released at once, or nothing left out: as alone
    assert release_beside(256, 132, 108, 190e-6, 0.0) == pytest.approx(190e-6)
    assert release_beside(100, 132, 108, 190e-6, 50e-6) == pytest.approx(190e-6)
    # 480 units (4 a CTA, 25 us each) released at 10 us: the resident CTAs empty the queue by 100 us
    assert release_beside(480, 132, 108, 100e-6, 10e-6) == pytest.approx(100e-6)


def test_a_gemm_started_beside_a_collective_is_repriced_when_it_releases() -> None:
    import simpy

    from sim.engine import HoldingGPU

    env = simpy.Environment()
    gpu = HoldingGPU(env)
    holder = gpu.hold(0.0, 24 / 132, 24 / 132, 132)
    done = gpu.run_kernel(190e-6, _gemm_cost(256))

    def release() -> Any:
        yield env.timeout(200e-6)
        gpu.release(holder)

    env.process(release())
    env.run(until=done)
    assert env.now == pytest.approx(285e-6)  # release_beside(256, 132, 108, 190 us, 200 us)


def test_a_collective_with_a_start_delay_lets_a_kernel_released_with_it_go_first() -> None:
    """Measured in DDP's profiled backward steps: when a bucket's last gradient copy ends and the
    compute stream's next kernel is already queued, that kernel mostly starts before the all-reduce's
    CTAs (sim.calibrate.ddp_timeline.collective_races); the all-reduce then waits for its SMs."""
    from sim.calibrate.comm_contention import ddp_workload
    from sim.costmodel.pricing import price
    from sim.hardware import load_profile, resolve_profile
    from sim.ranks import rank_plan, simulate_parallel

    def first_allreduce_after_gelu(profile: str) -> tuple[float, float]:
        hw = load_profile(profile)
        wl = ddp_workload(2048, 8192, 2, 25, 16384)  # device-bound: the host is ahead
        params = wl.params_for(wl.buckets()[0])
        graph = wl.build(params)
        plan = rank_plan(wl.spec.parallel, params, wl.file)
        assert plan is not None
        trace = simulate_parallel(graph, hw, plan, price, wl.file)[0]
        iv = {graph.ops[iv.op].name: iv for iv in trace.kernels()}
        ar = iv["bucket0_allreduce"]
        alone = trace.costs[ar.op]
        assert alone is not None
        return ar.end_s, iv["gelu_bwd_1"].end_s, alone.time_s

    ar_end, gelu_end, alone = first_allreduce_after_gelu("h200-nvl2")
    assert ar_end < gelu_end + alone - 30e-6  # shipped: the collective starts beside the elementwise backward
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nvl2_start.yaml"
        path.write_text(f"base: {resolve_profile('h200-nvl2')}\nname: nvl2-start\ntopology:\n"
                        "  collective_start_us: {value: 1.5, source: estimate, note: test}\n")
        ar_end, gelu_end, alone = first_allreduce_after_gelu(str(path))
    # its CTAs waited for the elementwise kernel's SMs, then took its time alone (the delay inside it)
    assert ar_end == pytest.approx(gelu_end + alone, rel=0.05)


def test_release_loss_costs_its_units_time_by_how_long_the_holder_stays() -> None:
    from sim.kernelcost import release_loss

    # 512 units on 132 SMs: 4 a CTA, 25 us a unit of 100 us alone; L = 1.5 units when held throughout
    assert release_loss(512, 132, 108, 100e-6, math.inf, 1.5) == pytest.approx(137.5e-6)
    # released at 0.4 T: 0.4 of that loss, whether 24 or 8 SMs are held (measured: the same either way)
    assert release_loss(512, 132, 108, 100e-6, 40e-6, 1.5) == pytest.approx(115e-6)
    assert release_loss(512, 132, 124, 100e-6, 40e-6, 1.5) == pytest.approx(115e-6)
    # released at once, or no CTA left out (the grid fits on the SMs left): as alone
    assert release_loss(512, 132, 108, 100e-6, 0.0, 1.5) == pytest.approx(100e-6)
    assert release_loss(100, 132, 108, 100e-6, math.inf, 1.5) == pytest.approx(100e-6)


def test_a_gemm_started_beside_a_collective_with_a_measured_loss_is_priced_by_it() -> None:
    import simpy

    from sim.engine import HoldingGPU

    env = simpy.Environment()
    gpu = HoldingGPU(env)
    # a collective of 24 channels (its own SM share; no SMs-lost rule) that declares the loss
    holder = gpu.hold(0.0, 24 / 132, None, 132, 1.5)
    done = gpu.run_kernel(100e-6, _gemm_cost(512))

    def release() -> Any:
        yield env.timeout(40e-6)
        gpu.release(holder)

    env.process(release())
    env.run(until=done)
    assert env.now == pytest.approx(115e-6)  # release_loss(512, 132, 108, 100 us, 40 us, 1.5)
    # held throughout: the whole loss, at full rate on the SMs left meanwhile (not the fluid share too)
    env = simpy.Environment()
    gpu = HoldingGPU(env)
    gpu.hold(0.0, 24 / 132, None, 132, 1.5)
    done = gpu.run_kernel(100e-6, _gemm_cost(512))
    env.run(until=done)
    assert env.now == pytest.approx(137.5e-6)
    # without a declared loss the same collective leaves the GEMM the fluid share (the shipped rule)
    env = simpy.Environment()
    gpu = HoldingGPU(env)
    gpu.hold(0.0, 24 / 132)
    done = gpu.run_kernel(100e-6, _gemm_cost(512))
    env.run(until=done)
    assert env.now == pytest.approx(100e-6 * 132 / 108)


def test_the_profile_loss_reaches_the_collectives_cost_only_where_declared() -> None:
    import dataclasses
    import tempfile
    from pathlib import Path

    from sim.calibrate.comm_contention import ddp_workload
    from sim.costmodel.collective import collective_cost
    from sim.hardware import load_profile, resolve_profile

    def allreduce_detail(profile: str) -> Any:
        hw = load_profile(profile)
        wl = ddp_workload(2048, 8192, 2, 25, 4096)
        graph = wl.build(wl.params_for(wl.buckets()[0]))
        op = next(o for o in graph.ops if o.kind == "collective")
        return collective_cost(dataclasses.replace(op, attrs={**op.attrs, "ranks": 2}), graph, hw).detail

    assert "release_loss_units" not in allreduce_detail("h200-nvl2")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nvl2_loss.yaml"
        path.write_text(f"base: {resolve_profile('h200-nvl2')}\nname: nvl2-loss\ntopology:\n"
                        "  release_loss_units: {value: 1.5, source: estimate, note: test}\n")
        d = allreduce_detail(str(path))
    assert d["release_loss_units"] == 1.5 and d["sm_count"] == 132 and "taken_sm" not in d
