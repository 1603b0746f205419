"""The fit of SMs lost per NCCL channel from the harness's sm_share cells (sim.calibrate.comm_sm_share)
and the wave rule it feeds (sim.costmodel.collective.rounds_beside)."""

from __future__ import annotations

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
