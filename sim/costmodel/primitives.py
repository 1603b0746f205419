"""Sort, scan and unique: CUB's device-wide algorithms as PyTorch runs them, priced as memory-bound sweeps.

No measurement yet: each is a number of HBM sweeps over its data, from the profile's
`primitives` estimates (never a silent zero: a profile without them cannot price these ops).
- sort (LSD radix sort, CUB onesweep): one histogram sweep over the keys, then one sweep per
  digit of `radix_digit_bits` over the key bits that vary; each reads and writes keys and values.
  Kernels: the histogram plus one per digit.
- scan (prefix sum, decoupled look-back): `scan_passes` reads of the input, one write.
- unique on sorted input (select + run-length): `unique_passes` reads, one write of the output.
Each kernel after the first adds the profile's fixed per-kernel cost.
"""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

from sim.costmodel import KernelCost, register
from sim.costmodel.elementwise import io_bytes, numel_of, streaming_cost
from sim.errors import InfeasibleError
from sim.graph import DTYPE_BYTES, Graph, Op
from sim.hardware import Hardware

KEYS = {"sort": ("radix_digit_bits",), "scan": ("scan_passes",), "unique": ("unique_passes",)}


def _estimate(hw: Hardware, op: Op, key: str) -> float:
    value = hw.primitives.get(key)
    if value is None:
        raise InfeasibleError(f"op '{op.name}' ({op.kind}): hardware profile '{hw.name}' has no primitives.{key}"
                              " estimate to price it")
    return value


def _sweeps(op: Op, graph: Graph, hw: Hardware) -> tuple[float, float, int, int]:
    """(bytes read, bytes written, sweeps over the data, kernels)."""
    r, w = io_bytes(op, graph)
    if op.kind == "sort":
        keys = graph.tensors[op.reads[0]] if op.reads else None
        key_bytes = DTYPE_BYTES[keys.dtype] if keys is not None else 4
        bits = float(op.attrs.get("key_bits", key_bytes * 8))
        digits = max(1, math.ceil(bits / _estimate(hw, op, "radix_digit_bits")))
        numel = numel_of(op, graph)
        return numel * key_bytes + digits * r, digits * w, digits + 1, digits + 1
    passes = max(1, round(_estimate(hw, op, KEYS[op.kind][0])))
    return passes * r, w, passes, 1 if op.kind == "scan" else passes


def primitive_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    bytes_read, bytes_written, sweeps, kernels = _sweeps(op, graph, hw)
    numel = numel_of(op, graph)
    cost = streaming_cost(op, graph, hw, numel=numel * sweeps, bytes_read=bytes_read, bytes_written=bytes_written,
                          inflight_per_elem=max(1.0, bytes_read / (numel * sweeps)), math_ops={}, category="memory")
    extra = (kernels - 1) * hw.kernel_fixed_s
    detail = dict(cost.detail)
    detail.update(sweeps=sweeps, kernels=kernels, source="estimate")
    return dataclasses.replace(cost, time_s=cost.time_s + extra, fixed_s=cost.fixed_s + extra,
                               detail=MappingProxyType(detail))


for _kind in KEYS:
    register(_kind)(primitive_cost)
