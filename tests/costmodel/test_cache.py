"""sim.costmodel.cache and pricing: what a cost signature tells apart, a run's CostCache keyed by
profile, and measured ops priced from their trace."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from sim.costmodel.cache import CostCache, cost_signature
from sim.costmodel.pricing import price
from sim.graph import Graph, Op, Tensor
from sim.hardware import Hardware


def graph_of(*ops: Op) -> Graph:
    tensors = {n: Tensor(n, (1024, 1024), "bf16") for n in ("a", "b", "c")}
    return Graph(name="g", kind="training", params=MappingProxyType({}), tensors=MappingProxyType(tensors), ops=ops)


def ew(name: str, reads: tuple[str, ...], writes: tuple[str, ...], **attrs: object) -> Op:
    return Op(name=name, kind="elementwise", reads=reads, writes=writes, attrs=MappingProxyType(attrs))


def test_signature_tells_reads_from_writes() -> None:
    one, two = ew("x", ("a",), ("b",)), ew("y", ("a", "b"), ())
    g = graph_of(one, two)
    assert cost_signature(one, g) != cost_signature(two, g)
    assert cost_signature(one, g) == cost_signature(ew("z", ("b",), ("c",)), g)  # same shapes, another name


def test_cache_prices_a_signature_once_per_profile(testgpu: Hardware) -> None:
    g = graph_of(ew("x", ("a",), ("b",)), ew("y", ("b",), ("c",)))
    cache = CostCache()
    first = price(g, testgpu, cache=cache)
    assert len(cache) == 1 and first[0] == first[1]
    slower = dataclasses.replace(testgpu, hbm_sustained_bps=testgpu.hbm_sustained_bps / 2)
    second = price(g, slower, cache=cache)
    assert len(cache) == 2 and second[0].time_s > first[0].time_s  # type: ignore[union-attr]


def test_measured_ops_take_their_trace_time(testgpu: Hardware) -> None:
    measured = ew("k", ("a",), ("b",), measured_us=12.5, device_gap_us=1.5, family="gemm")
    g = graph_of(measured)
    cost = price(g, testgpu, measured=True)[0]
    assert cost is not None
    assert (cost.time_s, cost.fixed_s, cost.category, cost.limiter) == (pytest.approx(14e-6), pytest.approx(1.5e-6),
                                                                         "compute", "measured")
    assert price(g, testgpu)[0] != cost  # without `measured`, the cost model prices it
