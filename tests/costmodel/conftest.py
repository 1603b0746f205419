"""Helpers for the cost-family tests: one op in a graph of named tensors, priced on the round-number
test profile (tests/fixtures/profiles/testgpu.yaml: 100 SMs at 1 GHz, 4000 GB/s sustained HBM,
500 ns memory latency, 2 us fixed kernel cost, a hard bandwidth knee), so every expected value in
these tests is worked out by hand from those numbers."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from sim.graph import Graph, LaunchConfig, Op, Tensor


def one_op_graph(kind: str, attrs: Mapping[str, Any], tensors: Mapping[str, tuple[tuple[int, ...], str]] | None = None,
                 reads: tuple[str, ...] = (), writes: tuple[str, ...] = (),
                 launch: LaunchConfig | None = None) -> tuple[Op, Graph]:
    ts = {name: Tensor(name, shape, dtype) for name, (shape, dtype) in dict(tensors or {}).items()}
    op = Op(name="k", kind=kind, reads=reads, writes=writes, launch=launch, attrs=MappingProxyType(dict(attrs)))
    return op, Graph(name="g", kind="training", params=MappingProxyType({}), tensors=MappingProxyType(ts), ops=(op,))
