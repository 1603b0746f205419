"""Hardware profiles at run time: SI floats converted once from the file, and the occupancy calculator."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from sim.errors import InfeasibleError, InputError
from sim.graph import LaunchConfig
from sim.resources import shipped
from sim.schema.hardware import (
    HardwareProfileFile,
    LibrarySection,
    NcclLibrary,
    ProtocolNumbers,
    TopologySection,
)
from sim.schema.loader import read_yaml, validation_to_input_error
from sim.topology import ReferenceBusBw, Topology, default_topology

PROFILE_DIR_ENV = "KERNELSIM_PROFILES"


@dataclass(frozen=True)
class NcclTuning:
    """NCCL's tuner constants from the profile's `library.nccl` (seconds, bytes); a missing protocol is inf."""

    base_latency_s: dict[str, dict[str, float]]  # algorithm -> protocol -> s
    hop_latency_s: dict[str, dict[str, float]]  # link kind -> protocol -> s
    chunk_bytes: dict[str, float]  # protocol -> bytes per channel and pipeline step
    tree_bandwidth_factor: float
    protocol_bandwidth: dict[str, float]  # protocol -> share of the bus bandwidth (LL: all-reduce or multi-node)
    ll_bandwidth_other: float

    @classmethod
    def from_section(cls, n: NcclLibrary) -> NcclTuning:
        def per_protocol(row: ProtocolNumbers, scale: float = 1.0) -> dict[str, float]:
            return {p: math.inf if v is None else v * scale
                    for p, v in (("ll", row.ll), ("ll128", row.ll128), ("simple", row.simple))}

        return cls(
            base_latency_s={algo: per_protocol(row, 1e-6) for algo, row in n.base_latency_us.items()},
            hop_latency_s={kind: per_protocol(row, 1e-6) for kind, row in n.hop_latency_us.items()},
            chunk_bytes=per_protocol(n.chunk_bytes),
            tree_bandwidth_factor=n.tree_bandwidth_factor.value,
            protocol_bandwidth=per_protocol(n.protocol_bandwidth),
            ll_bandwidth_other=n.ll_bandwidth_other.value,
        )


@dataclass(frozen=True)
class Library:
    """The profile's `library` section: the libraries' launch and work-split heuristics (whole numbers)."""

    attention_query_tile: int
    attention_decode_kv_chunk: int
    attention_decode_blocks_per_sm: int
    elementwise_threads: int
    elementwise_vector_bytes: int
    reduction_threads: int
    reduction_vector_bytes: int
    column_split_rows: int
    column_split_blocks_per_sm: int
    column_split_min_rows: int
    memcpy_launch: LaunchConfig
    nccl: NcclTuning

    @classmethod
    def from_section(cls, lib: LibrarySection) -> Library:
        a, e, r, m = lib.attention, lib.elementwise, lib.reduction, lib.memcpy
        return cls(
            attention_query_tile=int(a.query_tile.value),
            attention_decode_kv_chunk=int(a.decode_kv_chunk.value),
            attention_decode_blocks_per_sm=int(a.decode_blocks_per_sm.value),
            elementwise_threads=int(e.threads_per_block.value),
            elementwise_vector_bytes=int(e.vector_bytes.value),
            reduction_threads=int(r.threads_per_block.value),
            reduction_vector_bytes=int(r.vector_bytes.value),
            column_split_rows=int(r.column_split_rows.value),
            column_split_blocks_per_sm=int(r.column_split_blocks_per_sm.value),
            column_split_min_rows=int(r.column_split_min_rows.value),
            memcpy_launch=LaunchConfig(block=int(m.threads_per_block.value), elems_per_thread=int(m.elems_per_thread.value),
                                       regs_per_thread=int(m.registers_per_thread.value)),
            nccl=NcclTuning.from_section(lib.nccl),
        )


@dataclass(frozen=True)
class Hardware:
    """A hardware profile in SI units (seconds, bytes, bytes/s, FLOP/s, Hz)."""

    name: str
    gpu: str
    sm_count: int
    clock_hz: float
    warp_size: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    registers_per_sm: int
    max_registers_per_thread: int
    register_alloc_unit: int
    smem_per_sm: int
    smem_per_block_max: int
    smem_alloc_unit: int
    smem_reserved_per_block: int
    schedulers_per_sm: int
    hbm_capacity: float
    hbm_peak_bps: float
    hbm_sustained_bps: float
    mem_latency_s: float
    bw_knee_exponent: float
    per_sm_max_bps: float
    l2_bytes: float
    l2_bps: float
    spill_bps: float
    spill_offchip_bps: float | None
    spill_inflight_bytes_per_thread: float | None
    l1_bytes_per_sm: float
    tensor_flops: dict[str, float]
    fp32_lanes_per_sm: float
    sfu_lanes_per_sm: float
    int_lanes_per_sm: float
    issue_per_scheduler: float
    warps_to_hide_latency: float
    latency_hiding_exponent: float | None
    op_costs: dict[str, tuple[float, float, float]]
    elementwise_instr_per_element: float
    partial_vector_instr: float | None
    register_base: float
    registers_per_element: float
    spill_words_per_excess_register: float
    reduction_step_s: float
    gemm_max_efficiency: float
    gemm_tile_m: int
    gemm_tile_n: int
    gemm_k_half: float
    gemm_misaligned_factor: float
    gemm_correction: tuple[tuple[int, int, int, str, float], ...]
    attention_fwd_eff: float
    attention_bwd_eff: float
    layout_bw_factor: float
    kernel_fixed_s: float
    launch_gap_s: float
    event_overhead_s: float
    launch_latency_s: float
    eager_op_s: float
    eager_op_by_kind_s: dict[str, float]
    framework_op_s: float
    autograd_node_s: float
    backward_call_s: float
    launch_s: float
    compiled_call_s: float
    triton_launch_s: float
    compiled_kernel_s: float
    compiled_backward_call_s: float
    python_function_s: float
    module_call_s: float
    graph_launch_s: float
    graph_kernel_s: float
    sync_s: float
    launch_queue_depth: int
    nvlink_bps: float
    nvlink_latency_s: float
    pcie_bps: float
    network_bps: float
    network_latency_s: float
    comm_efficiency: float
    library: Library
    libraries: dict[str, dict[str, float]] = field(default_factory=dict)
    primitives: dict[str, float] = field(default_factory=dict)
    gemm_cold_ramp_s: float | None = None
    memcpy_clean_fixed_s: float | None = None
    reduce_kernel: dict[str, float] = field(default_factory=dict)
    # backend -> (tensor-core efficiency, s per score element per SM forward, backward, causal key tile)
    attention_backends: dict[str, tuple[float, float, float, int]] = field(default_factory=dict)
    attention_default_backend: str = "flash"
    profiler_event_s: dict[str, float] = field(default_factory=dict)
    # the profiler's cost per event in real steps at the reference host speed, by configuration, and the
    # reference ops' median traced duration at that speed (us): sim.costmodel.trace_host
    trace_profiler_event_s: dict[str, float] = field(default_factory=dict)
    ddp_forward_s: float | None = None  # DDP's host work per step beyond the listed ops (None: not measured)
    ddp_hook_s: float | None = None  # the Reducer's host work per synchronized gradient (None: not measured)
    trace_kernel_record_s: dict[str, float] = field(default_factory=dict)
    trace_clock_us: dict[str, float] = field(default_factory=dict)
    # framework op -> (host s per call without autograd recording, with it or None)
    framework_op_table_s: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    # foreach op -> (tensors per call the table's cost was measured at, host s per tensor)
    framework_op_per_tensor_s: dict[str, tuple[int, float]] = field(default_factory=dict)
    corrections: dict[str, tuple[tuple[tuple[float, ...], float], ...]] = field(default_factory=dict)
    sustained_clock_hz: float | None = None
    source_file: str = ""
    measured: bool = field(default=False)
    topology: Topology | None = None  # None: the profile has no topology section (see `fabric`)

    @property
    def fabric(self) -> Topology:
        """The topology for collectives: the profile's, or one 8-GPU node (sim.topology.default_topology)."""
        return self.topology if self.topology is not None else default_topology(self.nvlink_bps)

    @classmethod
    def from_file(cls, f: HardwareProfileFile, source_file: str = "") -> Hardware:
        sm, mem, comp, g, eff, k, h, ln = f.sm, f.memory, f.compute, f.gemm, f.efficiency, f.kernel, f.host, f.links
        us = 1e-6
        return cls(
            name=f.name,
            gpu=f.gpu,
            sm_count=int(sm.count.value),
            clock_hz=sm.clock_mhz.value * 1e6,
            warp_size=int(sm.warp_size.value),
            max_threads_per_sm=int(sm.max_threads_per_sm.value),
            max_warps_per_sm=int(sm.max_warps_per_sm.value),
            max_blocks_per_sm=int(sm.max_blocks_per_sm.value),
            max_threads_per_block=int(sm.max_threads_per_block.value),
            registers_per_sm=int(sm.registers_per_sm.value),
            max_registers_per_thread=int(sm.max_registers_per_thread.value),
            register_alloc_unit=int(sm.register_alloc_unit.value),
            smem_per_sm=int(sm.shared_memory_per_sm_bytes.value),
            smem_per_block_max=int(sm.shared_memory_per_block_max_bytes.value),
            smem_alloc_unit=int(sm.shared_memory_alloc_unit_bytes.value),
            smem_reserved_per_block=int(sm.reserved_shared_memory_per_block_bytes.value),
            schedulers_per_sm=int(sm.schedulers_per_sm.value),
            hbm_capacity=mem.hbm_capacity_bytes.value,
            hbm_peak_bps=mem.hbm_peak_gbps.value * 1e9,
            hbm_sustained_bps=mem.hbm_sustained_gbps.value * 1e9,
            mem_latency_s=mem.latency_ns.value * 1e-9,
            bw_knee_exponent=mem.bandwidth_knee_exponent.value,
            per_sm_max_bps=mem.per_sm_max_gbps.value * 1e9,
            l2_bytes=mem.l2_bytes.value,
            l2_bps=mem.l2_gbps.value * 1e9,
            spill_bps=mem.spill_gbps.value * 1e9,
            spill_offchip_bps=mem.spill_offchip_gbps.value * 1e9 if mem.spill_offchip_gbps is not None else None,
            spill_inflight_bytes_per_thread=(mem.spill_inflight_bytes_per_thread.value
                                             if mem.spill_inflight_bytes_per_thread is not None else None),
            l1_bytes_per_sm=mem.l1_bytes_per_sm.value,
            tensor_flops={d: q.value * 1e12 for d, q in comp.tensor_tflops.items()},
            fp32_lanes_per_sm=comp.fp32_lanes_per_sm.value,
            sfu_lanes_per_sm=comp.sfu_lanes_per_sm.value,
            int_lanes_per_sm=comp.int_lanes_per_sm.value,
            issue_per_scheduler=comp.issue_per_scheduler.value,
            warps_to_hide_latency=comp.warps_to_hide_latency.value,
            latency_hiding_exponent=(comp.latency_hiding_exponent.value
                                     if comp.latency_hiding_exponent is not None else None),
            op_costs={n: (c.fp32, c.sfu, c.int) for n, c in comp.op_costs.items()},
            elementwise_instr_per_element=comp.elementwise_instr_per_element.value,
            partial_vector_instr=comp.partial_vector_instr.value if comp.partial_vector_instr is not None else None,
            register_base=comp.register_base_per_thread.value,
            registers_per_element=comp.registers_per_element.value,
            spill_words_per_excess_register=comp.spill_words_per_excess_register.value,
            reduction_step_s=comp.reduction_step_ns.value * 1e-9,
            gemm_max_efficiency=g.max_efficiency.value,
            gemm_tile_m=int(g.tile_m.value),
            gemm_tile_n=int(g.tile_n.value),
            gemm_k_half=g.k_half_efficiency.value,
            gemm_misaligned_factor=g.misaligned_factor.value,
            gemm_correction=tuple((p.m, p.n, p.k, p.dtype, p.ratio) for p in g.correction),
            attention_fwd_eff=eff.attention_fwd.value,
            attention_bwd_eff=eff.attention_bwd.value,
            layout_bw_factor=eff.layout_bandwidth_factor.value,
            kernel_fixed_s=k.fixed_us.value * us,
            launch_gap_s=k.launch_gap_us.value * us,
            event_overhead_s=k.event_timing_overhead_us.value * us,
            launch_latency_s=k.launch_latency_us.value * us,
            eager_op_s=h.eager_op_us.value * us,
            eager_op_by_kind_s={kind: q.value * us for kind, q in h.eager_op_us_by_kind.items()},
            framework_op_s=h.framework_op_us.value * us,
            autograd_node_s=h.autograd_node_us.value * us,
            backward_call_s=h.backward_call_us.value * us,
            launch_s=h.launch_us.value * us,
            compiled_call_s=h.compiled_call_us.value * us,
            triton_launch_s=h.triton_launch_us.value * us,
            compiled_kernel_s=h.compiled_kernel_us.value * us,
            compiled_backward_call_s=h.compiled_backward_call_us.value * us,
            python_function_s=h.python_function_us.value * us,
            module_call_s=h.module_call_us.value * us,
            graph_launch_s=h.graph_launch_us.value * us,
            graph_kernel_s=h.graph_kernel_us.value * us,
            sync_s=h.sync_us.value * us,
            launch_queue_depth=int(h.launch_queue_depth.value),
            profiler_event_s={cfg: q.value * us for cfg, q in h.profiler_event_us.items()},
            ddp_forward_s=h.ddp.forward_us.value * us if h.ddp is not None else None,
            ddp_hook_s=h.ddp.hook_us.value * us if h.ddp is not None else None,
            trace_profiler_event_s={cfg: q.value * us for cfg, q in
                                    (h.trace_profiler.event_us.items() if h.trace_profiler else ())},
            trace_kernel_record_s={cfg: q.value * us for cfg, q in
                                   (h.trace_profiler.kernel_record_us.items() if h.trace_profiler else ())},
            trace_clock_us={name: q.value for name, q in (h.trace_profiler.clock_us.items() if h.trace_profiler else ())},
            framework_op_table_s={name: (None if c.us is None else c.us * us,
                                         None if c.grad_us is None else c.grad_us * us)
                            for name, c in h.framework_ops.items()},
            framework_op_per_tensor_s={name: (c.tensors, c.per_tensor_us * us) for name, c in h.framework_ops.items()
                                       if c.tensors is not None and c.per_tensor_us is not None},
            nvlink_bps=ln.nvlink_gbps.value * 1e9,
            nvlink_latency_s=ln.nvlink_latency_us.value * us,
            pcie_bps=ln.pcie_gbps.value * 1e9,
            network_bps=ln.network_gbps.value * 1e9,
            network_latency_s=ln.network_latency_us.value * us,
            comm_efficiency=ln.comm_efficiency.value,
            library=Library.from_section(f.library),
            libraries={lib: {kind: q.value for kind, q in kinds.items()} for lib, kinds in f.libraries.items()},
            primitives={name: q.value for name, q in f.primitives.items()},
            reduce_kernel={name: q.value for name, q in f.reduce_kernel.items()},
            gemm_cold_ramp_s=g.cold_ramp_us.value * 1e-6 if g.cold_ramp_us else None,
            memcpy_clean_fixed_s=k.memcpy_clean_fixed_us.value * us if k.memcpy_clean_fixed_us else None,
            attention_backends={name: (b.tc_efficiency.value, b.score_ns_fwd.value * 1e-9, b.score_ns_bwd.value * 1e-9,
                                       int(b.causal_key_tile.value))
                                for name, b in eff.attention_backends.items()},
            attention_default_backend=eff.attention_default_backend,
            corrections={name: tuple((tuple(p.x), p.ratio) for p in t.points) for name, t in f.corrections.items()},
            sustained_clock_hz=f.power.sustained_clock_mhz.value * 1e6 if f.power else None,
            source_file=source_file,
            topology=_topology(f.topology),
            measured=any(
                q.source == "measured"
                for section in (f.memory, f.kernel, f.host)
                for q in section.__dict__.values()
                if hasattr(q, "source")
            ),
        )


def sustained(hw: Hardware) -> Hardware:
    """The profile under sustained load: the SM clock (and with it every tensor-core and ALU rate)
    drops to the measured steady-state clock; memory bandwidth is unaffected."""
    if hw.sustained_clock_hz is None:
        raise InputError(f"hardware profile '{hw.name}' has no power.sustained_clock_mhz (measure it with calibration)")
    scale = hw.sustained_clock_hz / hw.clock_hz
    return replace(hw, name=f"{hw.name}@sustained", clock_hz=hw.sustained_clock_hz,
                   tensor_flops={d: v * scale for d, v in hw.tensor_flops.items()})


@dataclass(frozen=True)
class Occupancy:
    """Residency of one kernel's blocks on an SM, and how its grid fills the GPU."""

    threads_per_block: int
    regs_per_thread: int
    blocks_per_sm: int
    warps_per_sm: int
    limiter: str
    grid: int
    waves: int
    active_sms: int
    spilled_regs_per_thread: int
    occupancy_fraction: float


def occupancy(hw: Hardware, threads_per_block: int, regs_per_thread: int, smem_per_block: int, grid: int) -> Occupancy:
    """CUDA occupancy rules: registers (per-warp allocation granule), shared memory, warps, blocks.

    Registers above the per-thread limit are capped there; the excess is reported as spilled.
    """
    if threads_per_block <= 0 or threads_per_block > hw.max_threads_per_block:
        raise InfeasibleError(
            f"block of {threads_per_block} threads does not fit (1..{hw.max_threads_per_block} on {hw.name})"
        )
    if smem_per_block > hw.smem_per_block_max:
        raise InfeasibleError(
            f"{smem_per_block} bytes of shared memory per block exceed {hw.smem_per_block_max} on {hw.name}"
        )
    spilled = max(0, regs_per_thread - hw.max_registers_per_thread)
    regs = max(1, min(regs_per_thread, hw.max_registers_per_thread))
    warps_per_block = math.ceil(threads_per_block / hw.warp_size)
    regs_per_warp = math.ceil(regs * hw.warp_size / hw.register_alloc_unit) * hw.register_alloc_unit
    # The register file is split among the SM's schedulers and a warp's registers live in its
    # scheduler's part: 200 registers/thread fit 2 warps per part (8 per SM), not 65536 / 6400 = 10.
    # Measured (calibration/h200/raw/register_sweep.json): 198-register configs with 1, 2 and 4 warps
    # per block (10, 10 and 8 warps by the whole-SM count) all take 1463-1485 us at 268M elements.
    warps_by_registers = (hw.registers_per_sm // hw.schedulers_per_sm // regs_per_warp) * hw.schedulers_per_sm
    limits = {
        "warps": hw.max_warps_per_sm // warps_per_block,
        "blocks": hw.max_blocks_per_sm,
        "registers": warps_by_registers // warps_per_block,
    }
    if smem_per_block > 0:
        smem_alloc = math.ceil((smem_per_block + hw.smem_reserved_per_block) / hw.smem_alloc_unit) * hw.smem_alloc_unit
        limits["shared_memory"] = hw.smem_per_sm // smem_alloc
    limiter = min(limits, key=lambda k: (limits[k], k))
    blocks_per_sm = limits[limiter]
    if blocks_per_sm < 1:
        raise InfeasibleError(
            f"a block of {threads_per_block} threads × {regs} registers"
            f" with {smem_per_block} B shared memory fits on no SM of {hw.name} (limited by {limiter})"
        )
    grid = max(1, grid)
    per_wave = hw.sm_count * blocks_per_sm
    waves = math.ceil(grid / per_wave)
    active_sms = min(hw.sm_count, grid)
    return Occupancy(
        threads_per_block=threads_per_block,
        regs_per_thread=regs,
        blocks_per_sm=blocks_per_sm,
        warps_per_sm=blocks_per_sm * warps_per_block,
        limiter=limiter,
        grid=grid,
        waves=waves,
        active_sms=active_sms,
        spilled_regs_per_thread=spilled,
        occupancy_fraction=blocks_per_sm * warps_per_block / hw.max_warps_per_sm,
    )


def profile_dirs() -> list[Path]:
    """Where shipped and user profiles are looked up, in order."""
    dirs = []
    env = os.environ.get(PROFILE_DIR_ENV)
    if env:
        dirs.append(Path(env))
    dirs.append(Path.cwd() / "hardware_profiles")
    dirs.append(shipped("hardware_profiles"))
    seen: list[Path] = []
    for d in dirs:
        if d.resolve() not in [s.resolve() for s in seen]:
            seen.append(d)
    return seen


def list_profiles() -> dict[str, Path]:
    """Profile name (file stem) → path, for every profile in the lookup folders."""
    found: dict[str, Path] = {}
    for d in profile_dirs():
        if d.is_dir():
            for p in sorted(d.glob("*.yaml")):
                found.setdefault(p.stem, p)
    return found


def resolve_profile(ref: str, base: Path | None = None, *, file: str | None = None, path: str | None = None) -> Path:
    """A profile given by name (shipped) or by path (relative to `base`)."""
    cand = Path(ref)
    if cand.suffix in (".yaml", ".yml"):
        p = cand if cand.is_absolute() or base is None else base / cand
        if p.is_file():
            return p
        if cand.is_file():
            return cand
    profiles = list_profiles()
    if ref in profiles:
        return profiles[ref]
    raise InputError(
        "unknown hardware profile",
        file=file,
        path=path,
        value=ref,
        expected="a profile file path or one of: " + ", ".join(sorted(profiles)),
    )


def _topology(t: TopologySection | None) -> Topology | None:
    if t is None:
        return None
    refs = tuple(ReferenceBusBw(collective=p.collective, ranks=p.ranks, nodes=p.nodes, bytes=p.bytes,
                                busbw_bps=p.busbw_gbps * 1e9, source=p.source, ref=p.ref or p.note or "",
                                algorithm=p.algorithm) for p in t.reference_busbw)
    return Topology(gpus_per_node=int(t.gpus_per_node.value), nodes=int(t.nodes.value), intra_node=t.intra_node,
                    nics_per_node=int(t.nics_per_node.value), network_efficiency=t.network_efficiency.value,
                    nvls_busbw_bps=t.nvls_busbw_gbps.value * 1e9, channels=int(t.channels.value),
                    channel_bps=t.channel_gbps.value * 1e9, reference_busbw=refs,
                    collective_fits=tuple((name, tuple((float(b), float(g) * 1e9) for b, g in sorted(c.points)),
                                           c.host_us * 1e-6) for name, c in sorted(t.collective_fits.items())))


def _merge(base: dict, over: dict) -> dict:
    """`over` laid on `base`: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _profile_data(path: Path, seen: tuple[str, ...] = ()) -> dict:
    """A profile's YAML mapping; `base: OTHER` lays this file's keys on OTHER's (a system on a GPU profile)."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError("the file must hold a mapping at the top level", file=str(path), value=type(data).__name__,
                         expected="a YAML mapping")
    base_ref = data.pop("base", None)
    if base_ref is None:
        return data
    if not isinstance(base_ref, str):
        raise InputError("must be a profile name or path", file=str(path), path="base", value=base_ref)
    base_path = resolve_profile(base_ref, path.parent, file=str(path), path="base")
    if str(base_path.resolve()) in seen + (str(path.resolve()),):
        raise InputError("profiles name each other as base (a cycle)", file=str(path), path="base", value=base_ref)
    return _merge(_profile_data(base_path, seen + (str(path.resolve()),)), data)


@lru_cache(maxsize=64)
def _load_cached(path_str: str, mtime: float) -> Hardware:
    path = Path(path_str)
    data = _profile_data(path)
    try:
        f = HardwareProfileFile.model_validate(data)
    except ValidationError as exc:
        err = validation_to_input_error(exc, path_str, data)
        base_ref = (read_yaml(path) or {}).get("base") if isinstance(read_yaml(path), dict) else None
        if base_ref is not None:  # the bad key may come from the base profile
            err = InputError(f"{err.problem} (with the keys of base profile '{base_ref}')", file=err.file,
                             path=err.path, value=err.value, expected=err.expected)
        raise err from None
    return Hardware.from_file(f, source_file=path_str)


def load_profile(ref: str, base: Path | None = None, *, file: str | None = None, path: str | None = None) -> Hardware:
    """Load a hardware profile by name or path (cached by path and modification time)."""
    p = resolve_profile(ref, base, file=file, path=path)
    return _load_cached(str(p.resolve()), p.stat().st_mtime)
