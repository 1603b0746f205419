"""Op kinds sort, scan and unique (a plugin, sim/ops/): CUB's device-wide algorithms as PyTorch runs them,
priced as memory-bound sweeps.

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
from typing import Literal

from pydantic import Field

from sim.costmodel import KernelCost
from sim.costmodel.elementwise import io_bytes, numel_of, streaming_cost
from sim.errors import InfeasibleError
from sim.graph import DTYPE_BYTES, Graph, Op
from sim.hardware import Hardware
from sim.ops import OpKind, define
from sim.schema.workload import Expr, OpBase


class SortScanOp(OpBase):
    """Device-wide sort (radix), scan (prefix sum) and unique (on sorted input) over `numel` elements, as
    PyTorch runs them through CUB (torch.sort, cumsum, unique, embedding backward): memory-bound sweeps
    over the data, how many from the profile's `primitives` estimates. reads[0] holds the keys; other
    reads are values carried along (sort's indices)."""

    kind: Literal["sort", "scan", "unique"]
    numel: Expr | None = None
    key_bits: Expr | None = Field(
        default=None, description="sort: key bits that vary (default: the key dtype's; PyTorch sorts embedding"
        " indices on ceil(log2(num_embeddings)) bits)")


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


define(OpKind(
    spec=SortScanOp,
    cost=primitive_cost,
    examples={
        "sort": "{name: sort_ids, kind: sort, numel: tokens, key_bits: 17, reads: [ids, pos], "
                "writes: [ids_sorted, perm]}",
        "scan": "{name: offsets, kind: scan, numel: tokens, reads: [counts], writes: [offs]}",
        "unique": "{name: uniq_ids, kind: unique, numel: tokens, reads: [ids_sorted], writes: [uniq]}",
    },
))  # no trace rule: CUB's sort/scan kernels are recognised as reductions by the built-in rules
