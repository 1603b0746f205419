"""Hardware profiles at run time: SI floats converted once from the file, and the occupancy calculator."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

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


# Units a profile key names (its last word) → the SI factor its values are multiplied by, once, on load.
UNIT_SCALE = {"mhz": 1e6, "gbps": 1e9, "tflops": 1e12, "us": 1e-6, "ns": 1e-9}


def from_profile(path: str, *, unit: str | None = None, default: Any = MISSING,
                 default_factory: Any = MISSING) -> Any:
    """A `Hardware` field read from the profile file at `path` (attribute names, dots between sections):
    a number's `value` (a mapping of numbers: each one's) in SI units — scaled by the unit the key names
    (`clock_mhz` → Hz, `fixed_us` → s; `unit` when the key's last word is not its unit), an `int` field
    truncated as the file's whole number; a section that is absent gives None (a mapping: empty)."""
    key = path.rsplit(".", 1)[-1]
    scale = UNIT_SCALE.get(unit if unit is not None else key.rsplit("_", 1)[-1], 1.0)
    meta = {"profile": path, "scale": scale}
    if default_factory is not MISSING:
        return field(metadata=meta, default_factory=default_factory)
    if default is not MISSING:
        return field(metadata=meta, default=default)
    return field(metadata=meta)


def derived(fn: Callable[[HardwareProfileFile], Any], *, default: Any = MISSING, default_factory: Any = MISSING) -> Any:
    """A `Hardware` field computed from the whole profile file by `fn` (tables, nested sections)."""
    meta = {"derive": fn}
    if default_factory is not MISSING:
        return field(metadata=meta, default_factory=default_factory)
    if default is not MISSING:
        return field(metadata=meta, default=default)
    return field(metadata=meta)


def _op_costs(f: HardwareProfileFile) -> dict[str, tuple[float, float, float]]:
    return {n: (c.fp32, c.sfu, c.int) for n, c in f.compute.op_costs.items()}


def _gemm_tile_choices(f: HardwareProfileFile) -> tuple[tuple[int, int], ...]:
    return tuple((int(tm), int(tn)) for tm, tn in f.gemm.tile_choices or ())


def _gemm_correction(f: HardwareProfileFile) -> tuple[tuple[int, int, int, str, float], ...]:
    return tuple((p.m, p.n, p.k, p.dtype, p.ratio) for p in f.gemm.correction)


def _trace_clock_us(f: HardwareProfileFile) -> dict[str, float]:  # kept in µs (sim.costmodel.trace_host)
    tp = f.host.trace_profiler
    return {name: q.value for name, q in (tp.clock_us.items() if tp else ())}


def _host_clock_level(f: HardwareProfileFile) -> tuple[float, float] | None:
    lvl = f.host.clock_level
    return (lvl.exponent, lvl.reference_us) if lvl is not None and lvl.apply else None


def _framework_op_level(f: HardwareProfileFile) -> float:
    lvl = f.host.framework_op_level
    return lvl.value if lvl is not None and lvl.apply else 1.0


def _framework_op_speed_level(f: HardwareProfileFile) -> tuple[float, float] | None:
    lvl = f.host.framework_op_speed_level
    return (lvl.value, lvl.exponent) if lvl is not None and lvl.apply else None


def _framework_op_table_s(f: HardwareProfileFile) -> dict[str, tuple[float | None, float | None]]:
    """The table's prices in s; those without autograd recording times host.framework_op_level where it applies."""
    us = UNIT_SCALE["us"]
    level = _framework_op_level(f)
    return {name: (None if c.us is None else c.us * level * us, None if c.grad_us is None else c.grad_us * us)
            for name, c in f.host.framework_ops.items()}


def _missing_framework_op_scale(f: HardwareProfileFile) -> float:
    m = f.host.missing_framework_ops
    return m.ratio if m is not None and m.apply else 1.0


def _missing_op_class_s(f: HardwareProfileFile) -> dict[str, float]:
    return {cls: c.value * UNIT_SCALE["us"] for cls, c in f.host.missing_framework_op_classes.items() if c.apply}


def _framework_op_per_tensor_s(f: HardwareProfileFile) -> dict[str, tuple[int, float]]:
    level = _framework_op_level(f)  # a foreach op's per-tensor share of its `us` moves with it
    return {name: (c.tensors, c.per_tensor_us * level * UNIT_SCALE["us"]) for name, c in f.host.framework_ops.items()
            if c.tensors is not None and c.per_tensor_us is not None}


def _libraries(f: HardwareProfileFile) -> dict[str, dict[str, float]]:
    return {lib: {kind: q.value for kind, q in kinds.items()} for lib, kinds in f.libraries.items()}


def _attention_backends(f: HardwareProfileFile) -> dict[str, tuple[float, float, float, int]]:
    ns = UNIT_SCALE["ns"]
    return {name: (b.tc_efficiency.value, b.score_ns_fwd.value * ns, b.score_ns_bwd.value * ns,
                   int(b.causal_key_tile.value))
            for name, b in f.efficiency.attention_backends.items()}


def _compiled_training_s(f: HardwareProfileFile, key: str) -> float:
    """One `host.compiled_training` number in s (0 when the profile has no such section)."""
    ct = f.host.compiled_training
    return 0.0 if ct is None else getattr(ct, key).value * UNIT_SCALE["us"]


def _compiled_in_context_s(f: HardwareProfileFile) -> tuple[float, float, float] | None:
    c = f.host.compiled_in_context
    us = UNIT_SCALE["us"]
    return None if c is None else (c.call_us.value * us, c.grad_call_us.value * us, c.backward_call_us.value * us)


def _compiled_kernel_in_context_s(f: HardwareProfileFile) -> float | None:
    c = f.host.compiled_in_context
    k = c.kernel_us if c is not None else None
    return k.value * UNIT_SCALE["us"] if k is not None and k.apply else None


def _corrections(f: HardwareProfileFile) -> dict[str, tuple[tuple[tuple[float, ...], float], ...]]:
    return {name: tuple((tuple(p.x), p.ratio) for p in t.points) for name, t in f.corrections.items()}


def _measured(f: HardwareProfileFile) -> bool:
    return any(q.source == "measured" for section in (f.memory, f.kernel, f.host)
               for q in section.__dict__.values() if hasattr(q, "source"))


@dataclass(frozen=True)
class Hardware:
    """A hardware profile in SI units (seconds, bytes, bytes/s, FLOP/s, Hz), derived from the profile
    file's model (`HardwareProfileFile`): each field says where in the file it comes from
    (`from_profile`: a number or a mapping of numbers, converted by the unit its key names; `derived`:
    a table or a section built by a function), and `from_file` reads them all."""

    name: str = from_profile("name")
    gpu: str = from_profile("gpu")
    sm_count: int = from_profile("sm.count")
    clock_hz: float = from_profile("sm.clock_mhz")
    warp_size: int = from_profile("sm.warp_size")
    max_threads_per_sm: int = from_profile("sm.max_threads_per_sm")
    max_warps_per_sm: int = from_profile("sm.max_warps_per_sm")
    max_blocks_per_sm: int = from_profile("sm.max_blocks_per_sm")
    max_threads_per_block: int = from_profile("sm.max_threads_per_block")
    registers_per_sm: int = from_profile("sm.registers_per_sm")
    max_registers_per_thread: int = from_profile("sm.max_registers_per_thread")
    register_alloc_unit: int = from_profile("sm.register_alloc_unit")
    smem_per_sm: int = from_profile("sm.shared_memory_per_sm_bytes")
    smem_per_block_max: int = from_profile("sm.shared_memory_per_block_max_bytes")
    smem_alloc_unit: int = from_profile("sm.shared_memory_alloc_unit_bytes")
    smem_reserved_per_block: int = from_profile("sm.reserved_shared_memory_per_block_bytes")
    schedulers_per_sm: int = from_profile("sm.schedulers_per_sm")
    hbm_capacity: float = from_profile("memory.hbm_capacity_bytes")
    hbm_peak_bps: float = from_profile("memory.hbm_peak_gbps")
    hbm_sustained_bps: float = from_profile("memory.hbm_sustained_gbps")
    mem_latency_s: float = from_profile("memory.latency_ns")
    bw_knee_exponent: float = from_profile("memory.bandwidth_knee_exponent")
    per_sm_max_bps: float = from_profile("memory.per_sm_max_gbps")
    l2_bytes: float = from_profile("memory.l2_bytes")
    l2_bps: float = from_profile("memory.l2_gbps")
    spill_bps: float = from_profile("memory.spill_gbps")
    spill_offchip_bps: float | None = from_profile("memory.spill_offchip_gbps")
    spill_inflight_bytes_per_thread: float | None = from_profile("memory.spill_inflight_bytes_per_thread")
    l1_bytes_per_sm: float = from_profile("memory.l1_bytes_per_sm")
    tensor_flops: dict[str, float] = from_profile("compute.tensor_tflops")
    fp32_lanes_per_sm: float = from_profile("compute.fp32_lanes_per_sm")
    sfu_lanes_per_sm: float = from_profile("compute.sfu_lanes_per_sm")
    int_lanes_per_sm: float = from_profile("compute.int_lanes_per_sm")
    issue_per_scheduler: float = from_profile("compute.issue_per_scheduler")
    warps_to_hide_latency: float = from_profile("compute.warps_to_hide_latency")
    latency_hiding_exponent: float | None = from_profile("compute.latency_hiding_exponent")
    op_costs: dict[str, tuple[float, float, float]] = derived(_op_costs)
    elementwise_instr_per_element: float = from_profile("compute.elementwise_instr_per_element")
    partial_vector_instr: float | None = from_profile("compute.partial_vector_instr")
    thread_instr: float | None = from_profile("compute.thread_instr")
    register_base: float = from_profile("compute.register_base_per_thread")
    registers_per_element: float = from_profile("compute.registers_per_element")
    spill_words_per_excess_register: float = from_profile("compute.spill_words_per_excess_register")
    reduction_step_s: float = from_profile("compute.reduction_step_ns")
    gemm_max_efficiency: float = from_profile("gemm.max_efficiency")
    gemm_tile_m: int = from_profile("gemm.tile_m")
    gemm_tile_n: int = from_profile("gemm.tile_n")
    gemm_k_half: float = from_profile("gemm.k_half_efficiency")
    gemm_misaligned_factor: float = from_profile("gemm.misaligned_factor")
    gemm_correction: tuple[tuple[int, int, int, str, float], ...] = derived(_gemm_correction)
    attention_fwd_eff: float = from_profile("efficiency.attention_fwd")
    attention_bwd_eff: float = from_profile("efficiency.attention_bwd")
    layout_bw_factor: float = from_profile("efficiency.layout_bandwidth_factor")
    kernel_fixed_s: float = from_profile("kernel.fixed_us")
    launch_gap_s: float = from_profile("kernel.launch_gap_us")
    event_overhead_s: float = from_profile("kernel.event_timing_overhead_us")
    launch_latency_s: float = from_profile("kernel.launch_latency_us")
    eager_op_s: float = from_profile("host.eager_op_us")
    eager_op_by_kind_s: dict[str, float] = from_profile("host.eager_op_us_by_kind", unit="us")
    framework_op_s: float = from_profile("host.framework_op_us")
    autograd_node_s: float = from_profile("host.autograd_node_us")
    backward_call_s: float = from_profile("host.backward_call_us")
    launch_s: float = from_profile("host.launch_us")
    compiled_call_s: float = from_profile("host.compiled_call_us")
    triton_launch_s: float = from_profile("host.triton_launch_us")
    compiled_kernel_s: float = from_profile("host.compiled_kernel_us")
    compiled_backward_call_s: float = from_profile("host.compiled_backward_call_us")
    python_function_s: float = from_profile("host.python_function_us")
    module_call_s: float = from_profile("host.module_call_us")
    graph_launch_s: float = from_profile("host.graph_launch_us")
    graph_kernel_s: float = from_profile("host.graph_kernel_us")
    sync_s: float = from_profile("host.sync_us")
    launch_queue_depth: int = from_profile("host.launch_queue_depth")
    nvlink_bps: float = from_profile("links.nvlink_gbps")
    nvlink_latency_s: float = from_profile("links.nvlink_latency_us")
    pcie_bps: float = from_profile("links.pcie_gbps")
    network_bps: float = from_profile("links.network_gbps")
    network_latency_s: float = from_profile("links.network_latency_us")
    comm_efficiency: float = from_profile("links.comm_efficiency")
    library: Library = derived(lambda f: Library.from_section(f.library))
    libraries: dict[str, dict[str, float]] = derived(_libraries, default_factory=dict)
    primitives: dict[str, float] = from_profile("primitives", default_factory=dict)
    gemm_cold_ramp_s: float | None = from_profile("gemm.cold_ramp_us", default=None)
    gemm_cold_stream_bps: float | None = from_profile("gemm.cold_stream_gbps", default=None)
    gemm_misaligned_odd_factor: float | None = from_profile("gemm.misaligned_odd_factor", default=None)
    gemm_tile_choices: tuple[tuple[int, int], ...] = derived(_gemm_tile_choices, default=())
    gemm_small_m_row_step: float | None = from_profile("gemm.small_m_row_step", default=None)
    gemm_small_m_tile_n: float | None = from_profile("gemm.small_m_tile_n", default=None)
    gemm_small_m_min_k_slice: float | None = from_profile("gemm.small_m_min_k_slice", default=None)
    gemm_thin_fill_s: float | None = from_profile("gemm.thin_fill_us", default=None)
    gemm_thin_sm_stream_bps: float | None = from_profile("gemm.thin_sm_stream_gbps", default=None)
    gemm_thin_split_reduce_s: float | None = from_profile("gemm.thin_split_reduce_us", default=None)
    gemm_thin_l2_stream_bps: float | None = from_profile("gemm.thin_l2_stream_gbps", default=None)
    spill_l1_partial: bool = derived(lambda f: bool(f.memory.spill_l1_partial), default=False)
    spill_traffic_from_accesses: bool = derived(lambda f: bool(f.memory.spill_traffic_from_accesses), default=False)
    spill_l1_reuse: bool = derived(lambda f: bool(f.memory.spill_l1_reuse), default=False)
    spill_offchip_traffic_ratio: float | None = from_profile("memory.spill_offchip_traffic_ratio", default=None)
    l2_dirty_writeback_bps: float | None = from_profile("memory.l2_dirty_writeback_gbps", default=None)
    memcpy_clean_fixed_s: float | None = from_profile("kernel.memcpy_clean_fixed_us", default=None)
    reduce_kernel: dict[str, float] = from_profile("reduce_kernel", default_factory=dict)
    softmax_kernel: dict[str, float] = from_profile("softmax_kernel", default_factory=dict)
    layer_norm_kernel: dict[str, float] = from_profile("layer_norm_kernel", default_factory=dict)
    # backend -> (tensor-core efficiency, s per score element per SM forward, backward, causal key tile)
    attention_backends: dict[str, tuple[float, float, float, int]] = derived(_attention_backends, default_factory=dict)
    attention_default_backend: str = from_profile("efficiency.attention_default_backend", default="flash")
    profiler_event_s: dict[str, float] = from_profile("host.profiler_event_us", default_factory=dict)
    # the profiler's cost per event in real steps at the reference host speed, by configuration, and the
    # reference ops' median traced duration at that speed (us): sim.costmodel.trace_host
    trace_profiler_event_s: dict[str, float] = from_profile("host.trace_profiler.event_us", default_factory=dict)
    # DDP's host work per step beyond the listed ops (None: not measured)
    ddp_forward_s: float | None = from_profile("host.ddp.forward_us", default=None)
    # the Reducer's host work per synchronized gradient (None: not measured)
    ddp_hook_s: float | None = from_profile("host.ddp.hook_us", default=None)
    trace_kernel_record_s: dict[str, float] = from_profile("host.trace_profiler.kernel_record_us",
                                                           default_factory=dict)
    trace_clock_us: dict[str, float] = derived(_trace_clock_us, default_factory=dict)
    # the host clock (us per op of a fixed tight loop) at the reference host speed (host.clock_us; None: not
    # measured): a step timed beside a clock of c us ran at host speed c / host_clock_us (sim.validate.host)
    host_clock_us: float | None = derived(lambda f: f.host.clock_us.value if f.host.clock_us else None, default=None)
    # the level-aware relation (host.clock_level, applied): a clock of c us is host speed (c / reference) ** exponent;
    # None: c / host_clock_us (sim.costmodel.host.speed_at_clock)
    host_clock_level: tuple[float, float] | None = derived(_host_clock_level, default=None)
    # the factor on the table's prices without autograd recording (host.framework_op_level where applied, else 1)
    framework_op_level: float = derived(_framework_op_level, default=1.0)
    # (L0, exponent) of host.framework_op_speed_level where applied: a step priced at host speed s pays the table's
    # prices without autograd recording times L0 * s ** exponent (sim.costmodel.host.at_host_speed); None: not
    framework_op_speed_level: tuple[float, float] | None = derived(_framework_op_speed_level, default=None)
    # framework op -> (host s per call without autograd recording, times framework_op_level; with it or None)
    framework_op_table_s: dict[str, tuple[float | None, float | None]] = derived(_framework_op_table_s,
                                                                                 default_factory=dict)
    # a framework op the table lacks costs its tight-loop price times this (host.missing_framework_ops.ratio where
    # that section says apply, else 1.0: the tight-loop price)
    missing_framework_op_scale: float = derived(_missing_framework_op_scale, default=1.0)
    # op class (sim.costmodel.host.framework_op_class) -> host s per call, launch included, of a framework op the table
    # lacks, called without autograd recording (host.missing_framework_op_classes, the applied classes only)
    missing_op_class_s: dict[str, float] = derived(_missing_op_class_s, default_factory=dict)
    # foreach op -> (tensors per call the table's cost was measured at, host s per tensor)
    framework_op_per_tensor_s: dict[str, tuple[int, float]] = derived(_framework_op_per_tensor_s,
                                                                      default_factory=dict)
    # a compiled graph called with autograd recording, beyond compiled_call_s / compiled_backward_call_s:
    # forward per call, forward per tensor it takes, backward per tensor (host.compiled_training; 0 without)
    compiled_grad_call_s: float = derived(lambda f: _compiled_training_s(f, "grad_call_us"), default=0.0)
    compiled_grad_input_s: float = derived(lambda f: _compiled_training_s(f, "grad_input_us"), default=0.0)
    compiled_backward_input_s: float = derived(lambda f: _compiled_training_s(f, "backward_input_us"), default=0.0)
    # compiled calls in real steps (host.compiled_in_context): forward, its autograd extra, backward; None without
    compiled_in_context_s: tuple[float, float, float] | None = derived(_compiled_in_context_s, default=None)
    # host s per kernel a compiled no-grad forward launches in a real step (host.compiled_in_context.kernel_us,
    # applied); None: the tight-loop prices
    compiled_kernel_in_context_s: float | None = derived(_compiled_kernel_in_context_s, default=None)
    corrections: dict[str, tuple[tuple[tuple[float, ...], float], ...]] = derived(_corrections, default_factory=dict)
    sustained_clock_hz: float | None = from_profile("power.sustained_clock_mhz", default=None)
    source_file: str = ""
    measured: bool = derived(_measured, default=False)
    # None: the profile has no topology section (see `fabric`)
    topology: Topology | None = derived(lambda f: _topology(f.topology), default=None)

    @property
    def fabric(self) -> Topology:
        """The topology for collectives: the profile's, or one 8-GPU node (sim.topology.default_topology)."""
        return self.topology if self.topology is not None else default_topology(self.nvlink_bps)

    @classmethod
    def from_file(cls, f: HardwareProfileFile, source_file: str = "") -> Hardware:
        """The run-time profile of a profile file: every field as it declares (`from_profile`, `derived`)."""
        values: dict[str, Any] = {"source_file": source_file}
        for fld in fields(cls):
            if "profile" in fld.metadata:
                values[fld.name] = _read(f, fld)
            elif "derive" in fld.metadata:
                values[fld.name] = fld.metadata["derive"](f)
        return cls(**values)


def _read(f: HardwareProfileFile, fld: Field[Any]) -> Any:
    """One `from_profile` field's value (see there)."""
    node: Any = f
    for part in fld.metadata["profile"].split("."):
        node = getattr(node, part) if node is not None else None
    scale = fld.metadata["scale"]
    if isinstance(node, dict):
        return {k: _si(q, scale) for k, q in node.items()}
    if node is None:
        return {} if str(fld.type).startswith("dict") else None
    value = _si(node, scale)
    return int(value) if fld.type == "int" else value


def _si(q: Any, scale: float) -> Any:
    """A number's value (a Quantity's, or a plain one) times `scale`; plain strings as they are."""
    value = q.value if hasattr(q, "value") else q
    return value * scale if scale != 1.0 else value


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
                                           c.host_us * 1e-6) for name, c in sorted(t.collective_fits.items())),
                    sms_lost_per_channel=(t.sms_lost_per_channel.value if t.sms_lost_per_channel is not None else None),
                    collective_start_s=(t.collective_start_us.value * 1e-6 if t.collective_start_us is not None else 0.0),
                    release_loss_units=(t.release_loss_units.value if t.release_loss_units is not None else None))


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
