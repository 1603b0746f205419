"""NCCL-like algorithm and protocol choice with alpha–beta costs over a topology.

For each candidate (algorithm × protocol) the time is
    T = base latency + hops × per-hop latency (+ pipeline fill) + busbw_factor × S / bus bandwidth
and, as NCCL's tuner does (src/graph/tuning.cc), the smallest T wins. S is the nccl-tests
size (the whole buffer: all-gather's output, reduce-scatter's input); the bus-bandwidth
factors are nccl-tests' (2(n−1)/n for all-reduce, (n−1)/n for all-gather, reduce-scatter
and all-to-all, 1 for broadcast and send/recv), so the bus bandwidth here is what nccl-tests
reports as `busbw`.

Candidates (a documented approximation of NCCL 2.18–2.21 on Hopper):
- ring: every collective; 2(n−1) hops for all-reduce (n−1 for all-gather/reduce-scatter),
  of which 2(nodes−1) cross the network; bandwidth min(intra-node link, node's NICs, channels).
- tree (all-reduce only): chain within a node, binary tree across nodes; 2·((p−1)·intra +
  log2(nodes)·inter) hops; NCCL's accounting of 2·S over 0.9 × the ring's bus bandwidth;
  the message moves in chunks, so a pipeline fill of depth−1 chunks is paid.
- nvls (all-reduce within one NVSwitch node that has NVLink SHARP): the profile's NVLS bus
  bandwidth, Simple protocol only.
- protocols: LL (8-byte lines, half data: NCCL counts 1/4 of the bandwidth for all-reduce
  or multi-node, 1/3 otherwise; lowest latency), LL128 (0.92 of the bandwidth), Simple
  (full bandwidth, highest latency).
- all-to-all: one round of concurrent sends: intra-node share over NVLink, the rest over
  the node's NICs; broadcast: a pipelined chain.
Not modeled: CollNet/SHARP in the network switches, NVLS-tree across nodes, PAT, NCCL's
per-size tree correction table and channel-count reduction for small messages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.busbw import busbw_factor  # noqa: F401 - re-exported: the model and the harness share it
from sim.hardware import NcclTuning
from sim.topology import Topology

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
ALGORITHMS = ("ring", "tree", "nvls")
PROTOCOLS = ("ll", "ll128", "simple")

# NB: NCCL's own software constants (src/graph/tuning.cc: the baseLat / hwLat tables, the tree
# and protocol bandwidth factors; the chunk sizes) are the profile's `library.nccl`, carried in
# `Links.nccl`. Tree/Simple's per-hop figure there folds in a 256 kB chunk; here the chunk
# pipeline is explicit, so tree hops use the ring per-hop latencies.


def measured_busbw(topo: Topology, collective: str, size: float) -> float | None:
    """The topology's measured bus bandwidth (bytes/s) of this collective's bandwidth term at `size`: log-log
    interpolation between the measured sizes, the first two's power law below them, the
    largest's plateau above; None when the profile has no fit for it."""
    for name, pts, _host in topo.collective_fits:
        if name != collective:
            continue
        if len(pts) == 1 or size >= pts[-1][0]:
            return pts[-1][1]
        i = 0
        while i < len(pts) - 2 and size > pts[i + 1][0]:
            i += 1
        (s0, b0), (s1, b1) = pts[i], pts[i + 1]
        slope = math.log(b1 / b0) / math.log(s1 / s0)
        return b0 * (max(size, 1.0) / s0) ** slope
    return None


@dataclass(frozen=True)
class Links:
    """Per-GPU, per-direction link rates (bytes/s) and per-hop kinds for one topology."""

    intra_bps: float  # effective (× comm_efficiency) NVLink or PCIe rate of one GPU
    intra_kind: str  # nvlink | pcie
    nic_bps: float  # effective rate of one NIC (× network_efficiency)
    nccl: NcclTuning  # the profile's library.nccl


@dataclass(frozen=True)
class CollectivePlan:
    collective: str
    bytes: float
    ranks: int
    nodes: int
    algorithm: str
    protocol: str
    channels: int
    latency_s: float  # base + hops (paid once, not bandwidth)
    transfer_s: float  # the bandwidth part, including the chunk pipeline fill
    busbw_bps: float  # nccl-tests bus bandwidth of the whole call: factor × S / (latency + transfer)
    intra_share: float  # fraction of each member GPU's link rate the transfer uses
    net_share: float  # fraction of each member node's NIC rate the transfer uses
    hbm_bytes: float  # per rank

    @property
    def time_s(self) -> float:
        return self.latency_s + self.transfer_s


def _ring_steps(collective: str, n: int, m: int) -> tuple[int, int]:
    """(all hops, hops that cross nodes) of a ring; broadcast is a chain of n−1 hops."""
    if collective == "all_reduce":
        return 2 * (n - 1), 2 * (m - 1)
    if collective == "send_recv":
        return 1, 1 if m > 1 else 0
    return n - 1, m - 1


def _candidate(collective: str, size: float, n: int, m: int, algo: str, proto: str, channels: int, links: Links,
               topo: Topology, measured_bus: float | None = None) -> tuple[float, float, float, float] | None:
    """(latency_s, transfer_s, intra_share, net_share) of one algorithm × protocol, or None if it does not apply."""
    p = math.ceil(n / m)
    net_node_bps = min(topo.nics_per_node, p) * links.nic_bps if m > 1 else math.inf
    channel_bps = channels * topo.channel_bps
    ring_bus = min(links.intra_bps, net_node_bps, channel_bps)
    nccl = links.nccl
    if proto == "ll" and not (m > 1 or collective == "all_reduce"):
        proto_bw = nccl.ll_bandwidth_other
    else:
        proto_bw = nccl.protocol_bandwidth[proto]
    intra_hop = nccl.hop_latency_s[links.intra_kind][proto]
    net_hop = nccl.hop_latency_s["net"][proto]
    f = busbw_factor(collective, n)
    if measured_bus is not None and algo != "nvls":
        # NB: a measured bus bandwidth at this size replaces the link estimate for every protocol
        # of the ring family (LL/LL128 keep their fraction of it). Measured within one node only:
        # across nodes the NICs decide.
        ring_bus = min(measured_bus, channel_bps)
    if algo == "nvls":
        if collective != "all_reduce" or m > 1 or topo.nvls_busbw_bps <= 0 or proto != "simple":
            return None
        bus = topo.nvls_busbw_bps * min(1.0, channels / topo.channels)
        lat = nccl.base_latency_s["nvls"][proto] + 2 * intra_hop
        return lat, f * size / bus, 1.0, 0.0
    if algo == "tree":
        if collective != "all_reduce":
            return None
        bus = ring_bus * proto_bw * nccl.tree_bandwidth_factor
        depth = 2 * ((p - 1) + math.ceil(math.log2(m)) if m > 1 else (p - 1))
        hops_s = 2 * ((p - 1) * intra_hop + (math.ceil(math.log2(m)) if m > 1 else 0) * net_hop)
        bw_s = 2 * size / bus  # NCCL's tree accounting: algorithm bandwidth = bus bandwidth / 2
        k = max(1, math.ceil(size / (channels * nccl.chunk_bytes[proto])))
        transfer = bw_s * (k + max(0, depth - 1)) / k
        lat = nccl.base_latency_s["tree"][proto] + hops_s
        return lat, transfer, bus / (2 * links.intra_bps), (bus / (2 * net_node_bps) if m > 1 else 0.0)
    # ring family
    bus = ring_bus * proto_bw
    base = nccl.base_latency_s["ring"][proto]
    if collective == "all_to_all":
        intra_bytes = (p - 1) / n * size
        net_bytes = p * (n - p) / n * size  # per node, over its NICs
        intra_t = intra_bytes / (min(measured_bus or links.intra_bps, channel_bps) * proto_bw)
        net_t = net_bytes / (net_node_bps * proto_bw) if m > 1 else 0.0
        transfer = max(intra_t, net_t)
        lat = base + (net_hop if m > 1 else intra_hop)
        if transfer <= 0:
            return lat, 0.0, 0.0, 0.0
        return (lat, transfer, min(1.0, intra_bytes / transfer / links.intra_bps),
                min(1.0, net_bytes / transfer / net_node_bps) if m > 1 else 0.0)
    if collective == "send_recv":
        link = (measured_bus or links.intra_bps) if m == 1 else links.nic_bps
        bus = min(link, channel_bps) * proto_bw
        hop = net_hop if m > 1 else intra_hop
        return base + hop, size / bus, (bus / links.intra_bps if m == 1 else 0.0), (bus / net_node_bps if m > 1 else 0.0)
    hops, inter = _ring_steps(collective, n, m)
    lat = base + (hops - inter) * intra_hop + inter * net_hop
    if collective == "broadcast":
        k = max(1, math.ceil(size / (channels * nccl.chunk_bytes[proto])))
        transfer = size / bus * (k + hops - 1) / k
    else:
        transfer = f * size / bus
    return lat, transfer, bus / links.intra_bps, (bus / net_node_bps if m > 1 else 0.0)


def plan_collective(collective: str, size: float, n: int, m: int, links: Links, topo: Topology, *,
                    channels: int | None = None, algorithm: str = "auto", protocol: str = "auto") -> CollectivePlan:
    """The fastest (algorithm, protocol) for this call, as NCCL's tuner would choose it.

    `algorithm`/`protocol` other than "auto" force a choice (like NCCL_ALGO / NCCL_PROTO);
    a forced choice that does not apply to this collective raises ValueError.
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r} (expected one of: {', '.join(COLLECTIVES)})")
    if n < 2:
        raise ValueError(f"a collective needs at least 2 ranks, got {n}")
    if m > 1 and topo.nics_per_node <= 0:
        raise ValueError(f"a collective across {m} nodes needs network adapters (topology.nics_per_node is 0)")
    ch = int(channels) if channels is not None else topo.channels
    if ch < 1:
        raise ValueError(f"channels must be >= 1, got {ch}")
    # a topology's measured bus bandwidth at this size (within one node), looked up once
    measured_bus = measured_busbw(topo, collective, size) if m == 1 else None
    algos = ALGORITHMS if algorithm == "auto" else (algorithm,)
    protos = PROTOCOLS if protocol == "auto" else (protocol,)
    best: tuple[float, str, str, tuple[float, float, float, float]] | None = None
    for a in algos:
        for pr in protos:
            c = _candidate(collective, size, n, m, a, pr, ch, links, topo, measured_bus)
            if c is None:
                continue
            t = c[0] + c[1]
            if best is None or t < best[0]:
                best = (t, a, pr, c)
    if best is None:
        raise ValueError(f"algorithm {algorithm!r} / protocol {protocol!r} does not apply to {collective} "
                         f"on {n} ranks over {m} node(s)")
    t, algo, proto, (lat, transfer, intra_share, net_share) = best
    f = busbw_factor(collective, n)
    local = size / n if collective in ("all_gather", "reduce_scatter") else size
    return CollectivePlan(
        collective=collective, bytes=size, ranks=n, nodes=m, algorithm=algo, protocol=proto, channels=ch,
        latency_s=lat, transfer_s=transfer, busbw_bps=f * size / t if t > 0 else 0.0,
        intra_share=min(1.0, intra_share), net_share=min(1.0, net_share), hbm_bytes=2 * f * size + 2 * local,
    )
