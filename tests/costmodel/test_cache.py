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


def test_interned_signatures_number_equal_signatures_alike(testgpu: Hardware) -> None:
    """CostCache numbers each distinct cost_signature once (equal signatures in other graphs, one
    number); a graph's memo gives every op the number of its own signature; past max_entries the
    numbers start afresh, and prices stay right."""
    one, two = ew("x", ("a",), ("b",)), ew("y", ("a", "b"), ())
    g, h = graph_of(one, two), graph_of(ew("z", ("b",), ("c",)), ew("w", ("a",), ("c",), alpha=2))
    cache = CostCache()
    gm, hm = cache.signatures_of(g), cache.signatures_of(h)
    ids_g = [cache.signature_id(i, gm) for i in range(2)]
    ids_h = [cache.signature_id(i, hm) for i in range(2)]
    assert ids_g[0] == ids_h[0] and len({*ids_g, *ids_h}) == 3
    assert [cache.signature(s) for s in ids_g] == [cost_signature(o, g) for o in g.ops]
    assert cache.op_signatures(h) == [cost_signature(o, h) for o in h.ops]
    small = CostCache(max_entries=2)
    for _ in range(3):
        assert price(h, testgpu, cache=small) == price(h, testgpu) and price(g, testgpu, cache=small) == price(g, testgpu)


def test_by_object_keeps_its_objects() -> None:
    """ByObject finds a value by its object's id and holds the object, so a freed object's id taken by
    another never answers for it."""
    from sim.costmodel.cache import ByObject

    made: list[object] = []
    memo: ByObject[object, int] = ByObject(lambda o: made.append(o) or len(made), max_entries=1000)
    for _ in range(300):  # without the objects held, CPython would reuse freed ids
        assert memo(object()) == len(made)
    assert len(made) == 300
    kept = object()
    assert memo(kept) == memo(kept) == 301
