"""Topology at run time (SI units) and rank placement: which node a rank is on, which ranks
form a data/tensor/pipeline group, how many nodes a group spans."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ReferenceBusBw:
    """A published or measured nccl-tests bus bandwidth (the profile's `topology.reference_busbw`)."""

    collective: str
    ranks: int
    nodes: int
    bytes: float
    busbw_bps: float
    source: str
    ref: str
    algorithm: str | None = None


@dataclass(frozen=True)
class Topology:
    """Nodes of `gpus_per_node` GPUs; link rates come from the profile's `links` section."""

    gpus_per_node: int
    nodes: int
    intra_node: str  # nvswitch | nvlink | pcie
    nics_per_node: int
    network_efficiency: float
    nvls_busbw_bps: float  # 0: no NVLink SHARP
    channels: int
    channel_bps: float
    reference_busbw: tuple[ReferenceBusBw, ...] = ()
    # measured per collective: (name, ((bytes, bus bytes/s), ...) ascending, host seconds per call)
    collective_fits: tuple[tuple[str, tuple[tuple[float, float], ...], float], ...] = ()
    declared: bool = True  # False: the default for a profile without a topology section
    # SMs a kernel beside a resident collective cannot use per channel; None: SMs shared as a fluid
    sms_lost_per_channel: float | None = None
    # how long after its stream reaches it a collective's CTAs start (0: at once)
    collective_start_s: float = 0.0
    # a GEMM started beside a resident collective loses this many of its units' time x min(how long the
    # collective stays / its time alone, 1) (sim.kernelcost.release_loss); None: not priced so
    release_loss_units: float | None = None

    def collective_host_s(self, collective: str) -> float | None:
        for name, _pts, host in self.collective_fits:
            if name == collective:
                return host
        return None

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def nodes_spanned(self, members: tuple[int, ...]) -> int:
        return len({self.node_of(r) for r in members})


def default_topology(nvlink_bps: float) -> Topology:
    """A profile without `topology`: one HGX-like node of 8 GPUs, one NIC per GPU, no NVLS.

    NB: the structure of the common 8-GPU server; a profile meant for multi-rank runs should
    say its own (hardware_profiles/h200-hgx8.yaml).
    """
    return Topology(gpus_per_node=8, nodes=1, intra_node="nvswitch" if nvlink_bps > 0 else "pcie", nics_per_node=8,
                    network_efficiency=0.94, nvls_busbw_bps=0.0, channels=16, channel_bps=40e9, declared=False)


@dataclass(frozen=True)
class Layout:
    """Ranks = tensor × data × pipeline, tensor fastest (Megatron order): rank r has tensor index
    r % tensor, data index (r // tensor) % data, pipeline index r // (tensor × data)."""

    ranks: int
    data: int
    tensor: int = 1
    pipeline: int = 1

    def __post_init__(self) -> None:
        if self.data * self.tensor * self.pipeline != self.ranks:
            raise ValueError(f"data × tensor × pipeline = {self.data * self.tensor * self.pipeline}, not ranks = {self.ranks}")

    def coords(self, rank: int) -> tuple[int, int, int]:
        return rank % self.tensor, (rank // self.tensor) % self.data, rank // (self.tensor * self.data)

    def members(self, rank: int, group: str) -> tuple[int, ...]:
        """The ranks of `rank`'s group: world, data, tensor or pipeline."""
        if group == "world":
            return tuple(range(self.ranks))
        t, d, p = self.coords(rank)
        if group == "tensor":
            return tuple(p * self.tensor * self.data + d * self.tensor + i for i in range(self.tensor))
        if group == "data":
            return tuple(p * self.tensor * self.data + i * self.tensor + t for i in range(self.data))
        if group == "pipeline":
            return tuple(i * self.tensor * self.data + d * self.tensor + t for i in range(self.pipeline))
        raise ValueError(f"unknown group {group!r} (expected world, data, tensor or pipeline)")


def nodes_for(ranks: int, topo: Topology) -> int:
    """Nodes spanned by `ranks` consecutive ranks placed node by node."""
    return max(1, math.ceil(ranks / topo.gpus_per_node))
