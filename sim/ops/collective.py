"""Op kind collective (a plugin, sim/ops/): an NCCL collective (all-reduce, all-gather, reduce-scatter,
all-to-all, broadcast, send/recv) among the ranks of a group of the workload's parallel layout.

The cost function is the cost model's (`sim.costmodel.collective.collective_cost`: NCCL's algorithm and
protocol choice over the profile's links and topology, alpha-beta per hop, the channels' SMs); the
engine's ranks rendezvous at it. This file lists the kind in every layer: its workload keys, the
kernel names an imported trace shows for it, and the sizes PyTorch records for its calls.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from sim.costmodel.collective import collective_cost
from sim.ingest.kineto import CpuOp
from sim.ingest.shapes import Inferred
from sim.ops import OpKind, define
from sim.schema.workload import Expr, OpBase


class CollectiveOp(OpBase):
    kind: Literal["collective"]
    collective: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]
    bytes: Expr = Field(description="the nccl-tests size: the whole buffer (all-gather's output, reduce-scatter's input)")
    ranks: Expr | None = Field(
        default=None, description="ranks in the group; default: the size of `group` in the workload's `parallel` layout (1 without one)")
    group: Literal["world", "data", "tensor", "pipeline"] = Field(
        default="world", description="which ranks meet in this collective (the workload's `parallel` layout)")
    channels: Expr | None = Field(default=None, description="NCCL channels (one CTA each); default: the profile's topology")
    algorithm: Literal["auto", "ring", "tree", "nvls"] = "auto"
    protocol: Literal["auto", "ll", "ll128", "simple"] = "auto"


COLLECTIVES = {"allreduce": "all_reduce", "all_reduce": "all_reduce", "allgather": "all_gather",
               "all_gather": "all_gather", "_allgather_base": "all_gather", "all_gather_into_tensor": "all_gather",
               "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
               "reduce_scatter_tensor": "reduce_scatter", "all_to_all": "all_to_all", "alltoall": "all_to_all",
               "alltoall_base": "all_to_all", "broadcast": "broadcast", "send": "send_recv", "recv": "send_recv"}
COMM_DTYPE_BYTES = {"Float": 4, "BFloat16": 2, "Half": 2, "Double": 8, "Long": 8, "Int": 4, "Byte": 1, "Char": 1}


def collective_fields(op: CpuOp) -> dict[str, Any] | None:
    """NCCL arguments that PyTorch records on `record_param_comms` / `nccl:*` ops."""
    a = op.args
    name = str(a.get("Collective name", "")).lower()
    kind = COLLECTIVES.get(name)
    nelems = a.get("In msg nelems") or a.get("In msg size")
    ranks = a.get("Group size")
    esize = COMM_DTYPE_BYTES.get(str(a.get("dtype", "")), None)
    if kind is None or not isinstance(nelems, int) or not isinstance(ranks, int) or ranks < 2 or esize is None:
        return None
    nbytes = nelems * esize
    if kind == "all_gather":
        nbytes = max(nbytes, int(a.get("Out msg nelems", 0) or 0) * esize)
    return {"kind": "collective", "collective": kind, "bytes": nbytes, "ranks": ranks}


def collective_shapes(op: CpuOp, prefix: str, kernel_name: str) -> Inferred | None:
    """The collective a CPU op records (kind, bytes, group size); None when it records none (an enclosing op may)."""
    fields = collective_fields(op)
    return Inferred(fields) if fields is not None else None


define(OpKind(
    spec=CollectiveOp,
    cost=collective_cost,
    examples={"collective": "{name: grad_sync, kind: collective, collective: all_reduce, bytes: 2 * hidden * ffn, "
                            "group: data, stream: 1}"},
    family=("collective", r"nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv"),
    shape_rule=collective_shapes,
    # family_after None: tried first (an NCCL kernel that says reduce is a collective)
))
