"""The engine's exact outputs on graphs the goldens do not cover, held against a committed record.

tests/fixtures/engine_outputs.json was written (`python -m tests.test_engine_outputs --write`) from the
engine as it was before issue 23's speed work; every case must give the same intervals and metrics,
bit for bit (a sha256 over every interval's repr, plus readable totals). Cases: many streams in flight
(16 and 256: the metrics' grouped sums), a one-deep launch queue with free host, the benchmark's
eager layer stack, compiled and CUDA-graph regions mixed with eager ops on two streams, and four ranks
with pairwise and all-rank collectives, a straggler and compute beside the collectives.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from sim.costmodel import KernelCost
from sim.costmodel.host import host_costs
from sim.costmodel.pricing import price
from sim.engine import simulate, simulate_ranks
from sim.graph import Graph, Op, Tensor
from sim.hardware import Hardware, load_profile
from sim.metrics import comm_metrics, step_metrics
from sim.trace import Trace

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "fixtures" / "engine_outputs.json"
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_engine import streams_graph, synthetic_graph  # noqa: E402

US = 1e-6


def _digest(trace: Trace) -> dict[str, Any]:
    h = hashlib.sha256()
    for iv in trace.intervals:
        h.update(repr((iv.track, iv.name, iv.cat, iv.start_s, iv.end_s, iv.op, sorted(iv.args.items()))).encode())
    m = step_metrics(trace)
    cm = comm_metrics(trace)
    return {"end_s": repr(trace.end_s), "intervals": len(trace.intervals), "sha256": h.hexdigest(),
            "breakdown_s": {k: repr(v) for k, v in m.breakdown_s.items()}, "dominant": m.dominant,
            "host_busy_s": repr(m.host_busy_s), "comm_s": repr(cm.comm_s), "exposed_s": repr(cm.exposed_s)}


def _one(graph: Graph, hw: Hardware) -> list[Trace]:
    return [simulate(graph, price(graph, hw), host_costs(hw))]


def _modes(hw: Hardware) -> list[Trace]:
    g = synthetic_graph(400)
    ops = []
    for i, op in enumerate(g.ops):
        layer = i // 10
        if layer % 3 == 1 and op.stream == 0:
            op = dataclasses.replace(op, mode="compiled", region=f"c{layer}")
        elif layer % 3 == 2 and op.stream == 0:
            op = dataclasses.replace(op, mode="cuda_graph", region=f"g{layer}")
        ops.append(op)
    g = dataclasses.replace(g, ops=tuple(ops))
    return _one(g, hw)


def _cost(us: float, category: str, sm: float, bw: float, fixed_us: float = 2.0) -> KernelCost:
    t = us * US
    return KernelCost(time_s=t, compute_s=t if category == "compute" else 0.0,
                      memory_s=t if category == "memory" else 0.0, fixed_s=fixed_us * US, limiter=category,
                      category=category, hbm_bytes=1e6, bw_demand=bw, sm_demand=sm)


def _comm(transfer_us: float, latency_us: float = 5.0, sm: float = 0.1, bw: float = 0.3) -> KernelCost:
    t = (2.0 + latency_us + transfer_us) * US
    return KernelCost(time_s=t, compute_s=0.0, memory_s=t - 2 * US, fixed_s=2 * US, limiter="link", category="comm",
                      hbm_bytes=0.0, bw_demand=bw, sm_demand=sm, detail=MappingProxyType(
                          {"latency_s": latency_us * US, "transfer_s": transfer_us * US, "intra_share": 0.5,
                           "net_share": 0.25, "algorithm": "ring", "protocol": "simple", "channels": 4}))


def _ranks(hw: Hardware) -> list[Trace]:
    ops: list[Op] = []
    costs: list[KernelCost | None] = []
    for layer in range(12):
        ops.append(Op(name=f"gemm{layer}", kind="gemm", reads=("a",), writes=(f"b{layer}",), stream=0))
        costs.append(_cost(40 + 7 * (layer % 4), "compute", 1.0 if layer % 5 == 0 else 0.6, 0.3))
        ops.append(Op(name=f"ew{layer}", kind="elementwise", reads=(f"b{layer}",), writes=(f"c{layer}",), stream=0))
        costs.append(_cost(9, "memory", 0.4, 0.9))
        ops.append(Op(name=f"ar{layer}", kind="collective", reads=(f"c{layer}",), writes=(f"g{layer}",), stream=1,
                      attrs=MappingProxyType({"collective": "all_reduce", "bytes": 1.0})))
        costs.append(_comm(25 + 3 * layer))
        if layer % 4 == 3:
            ops.append(Op(name=f"sync{layer}", kind="sync", reads=(), writes=()))
            costs.append(None)
    tensors = {t: Tensor(t, (1024,), "bf16") for o in ops for t in o.reads + o.writes}
    g = Graph("ranks4", "training", MappingProxyType({}), MappingProxyType(tensors), tuple(ops))

    def members(rank: int, name: str) -> tuple[int, ...] | None:
        if not name.startswith("ar"):
            return None
        if int(name[2:]) % 2:  # odd layers: all four ranks; even: pairs
            return (0, 1, 2, 3)
        return (0, 1) if rank < 2 else (2, 3)

    groups = [[members(r, o.name) for o in ops] for r in range(4)]
    return simulate_ranks([g] * 4, [costs] * 4, [host_costs(hw)] * 4, groups, [0, 0, 1, 1],
                          [0.0, 0.0, 30 * US, 0.0])


def cases() -> dict[str, Callable[[], list[Trace]]]:
    h200 = load_profile("h200-sxm")
    deep1 = dataclasses.replace(h200, launch_queue_depth=1, eager_op_s=0.0, launch_s=0.0)
    return {
        "streams_16": lambda: _one(streams_graph(16, 800), h200),
        "streams_256": lambda: _one(streams_graph(256, 2048), h200),
        "synthetic_2000": lambda: _one(synthetic_graph(2000), h200),
        "queue_depth_1_free_host": lambda: _one(synthetic_graph(300), deep1),
        "compiled_and_cuda_graph": lambda: _modes(h200),
        "ranks_4": lambda: _ranks(h200),
    }


def produce() -> dict[str, list[dict[str, Any]]]:
    return {name: [_digest(t) for t in make()] for name, make in cases().items()}


@pytest.mark.parametrize("name", list(cases()))
def test_engine_outputs_match_the_record(name: str) -> None:
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    assert [_digest(t) for t in cases()[name]()] == record[name]


@pytest.mark.parametrize("name", list(cases()))
def test_a_finished_simulation_leaves_no_cyclic_garbage(name: str) -> None:
    """Reference counting frees a finished simulation (events, processes, streams, ranks): the
    collector finds nothing (simpy's own Environment would leave a cycle per simulation, and each
    stream's last wait another; a sweep runs thousands)."""
    make = cases()[name]
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        traces = make()
        assert traces
        del traces
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()


if __name__ == "__main__":
    if "--write" in sys.argv:
        RECORD.write_text(json.dumps(produce(), indent=1) + "\n", encoding="utf-8")
    else:
        print(json.dumps(produce(), indent=1))
