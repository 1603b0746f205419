"""Schema of a hardware profile file: every number carries its provenance.

A number is written `{value: 4800, source: datasheet, ref: "NVIDIA H200 datasheet"}`;
`measured` numbers also name the device and date (and the raw file / fit they came from),
`estimate` numbers say why in `note`. Units are in the key names.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

Source = Literal["datasheet", "measured", "estimate", "published"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Provenance(Strict):
    source: Source
    ref: str | None = None
    note: str | None = None
    measured_on: str | None = None
    date: str | None = None
    raw: str | None = None
    fit: str | None = None
    spread: list[float] | None = Field(
        default=None, description="90 % bootstrap interval [low, high] of a fitted value over its records "
        "(resampled within each benchmark; calibration/README.md)")
    n: int | None = Field(default=None, ge=1, description="records (measurements) the fitted value comes from")

    @model_validator(mode="after")
    def _complete(self) -> Provenance:
        if self.spread is not None and (len(self.spread) != 2 or not self.spread[0] <= self.spread[1]):
            raise ValueError(f"'spread' must be [low, high] with low <= high, got {self.spread}")
        if (self.spread is not None or self.n is not None) and self.source != "measured":
            raise ValueError("'spread' and 'n' belong to measured numbers")
        if self.source == "measured" and not (self.measured_on and self.date):
            raise ValueError("a measured number needs 'measured_on' (device) and 'date'")
        if self.source in ("datasheet", "published") and not self.ref:
            raise ValueError(f"a {self.source} number needs 'ref' (where it was published)")
        if self.source == "estimate" and not self.note:
            raise ValueError("an estimate needs a 'note' saying how it was estimated")
        return self


class Quantity(Provenance):
    value: float

    @field_validator("value")
    @classmethod
    def _finite_non_negative(cls, v: float) -> float:
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError("must be a finite number")
        if v < 0:
            raise ValueError(f"must be >= 0, got {v}")
        return v


class PositiveQuantity(Quantity):
    @field_validator("value")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError(f"must be > 0, got {v}")
        return v


class Count(PositiveQuantity):
    """A whole number of things (SMs, threads, registers, bytes of a granule): 1 <= value <= 2**48."""

    @field_validator("value")
    @classmethod
    def _whole(cls, v: float) -> float:
        if v != int(v) or v > 2**48:
            raise ValueError(f"must be a whole number from 1 to 2**48, got {v}")
        return v


class SMSection(Strict):
    count: Count
    clock_mhz: PositiveQuantity
    warp_size: Count
    max_threads_per_sm: Count
    max_warps_per_sm: Count
    max_blocks_per_sm: Count
    max_threads_per_block: Count
    registers_per_sm: Count
    max_registers_per_thread: Count
    register_alloc_unit: Count = Field(description="registers per warp allocation granule")
    shared_memory_per_sm_bytes: Count
    shared_memory_per_block_max_bytes: Count
    shared_memory_alloc_unit_bytes: Count
    reserved_shared_memory_per_block_bytes: Quantity
    schedulers_per_sm: Count


class MemorySection(Strict):
    hbm_capacity_bytes: PositiveQuantity
    hbm_peak_gbps: PositiveQuantity
    hbm_sustained_gbps: PositiveQuantity = Field(description="best achievable streaming bandwidth (large copies)")
    latency_ns: PositiveQuantity = Field(description="unloaded DRAM latency used in Little's law")
    bandwidth_knee_exponent: PositiveQuantity = Field(
        description="n of the smooth minimum (X^-n + B^-n)^(-1/n) between Little's-law and sustained bandwidth: "
        "queueing makes loaded latency grow as bandwidth nears its ceiling")
    per_sm_max_gbps: PositiveQuantity = Field(description="most one SM can stream")
    l2_bytes: PositiveQuantity
    l2_gbps: PositiveQuantity
    spill_gbps: PositiveQuantity = Field(description="bandwidth of local-memory (spill) traffic that stays in L1")
    spill_offchip_gbps: PositiveQuantity | None = Field(
        default=None, description="ceiling of spill traffic whose footprint overflows L1 (absent: hbm_sustained_gbps)")
    spill_inflight_bytes_per_thread: PositiveQuantity | None = Field(
        default=None, description="spill bytes a thread keeps in flight when its spills overflow L1 (Little's law on "
                                  "the memory latency; absent: no latency limit)")
    l1_bytes_per_sm: PositiveQuantity = Field(description="combined L1/shared-memory capacity per SM")
    spill_l1_partial: bool = Field(
        default=False, description="spill traffic past L1 split by capacity: the lines of every resident thread's "
        "spills and loads in flight compete for l1_bytes_per_sm, a share 1 - C/F of the accesses misses to the "
        "off-chip rate, the rest stays at spill_gbps (off: all traffic at one rate, L1's when the spills fit, else "
        "off-chip)")
    spill_traffic_from_accesses: bool = Field(
        default=False, description="spill traffic counted from the kernel's local-memory accesses (a launch's "
        "spill_traffic_bytes_per_thread: ptxas -v spill stores + spill loads) where it gives them (off: every "
        "spill area stored once and loaded once, 2 × spill_bytes_per_thread)")
    spill_l1_reuse: bool = Field(
        default=False, description="with spill_traffic_from_accesses, a launch that gives its local loads' reload "
        "distances (spill_reload_distances: bytes a thread touched since it last accessed the word) splits its "
        "traffic: a reload whose distance x the SM's resident threads fits in L1 (less the blocks' shared memory) "
        "hits it at spill_gbps, the rest goes off chip (off: one rate for all, by the footprint)")
    l2_dirty_writeback_gbps: PositiveQuantity | None = Field(
        default=None, description="a GEMM or a driver memcpy whose operands stream from HBM through an L2 full of dirty "
        "lines (a written flush just before it: op attribute l2_dirty, set by the measurement cases) first writes back "
        "the lines it evicts: min(its HBM bytes, l2_bytes) at this rate, added to its memory term (PyTorch's sums: "
        "min(bytes read, l2_bytes); absent: not priced)")
    spill_offchip_traffic_ratio: PositiveQuantity | None = Field(
        default=None, description="with spill_traffic_from_accesses, a launch that gives no accesses and whose spills "
        "overflow L1: its local loads + stores per 2 bytes of spill area (1: stored once, loaded once; a compiler "
        "that gave up on registers reloads its spilled words several times; absent: 1)")


class OpCost(Provenance):
    """Instructions per element on each unit for one named operation (erf, rng, fma...)."""

    fp32: float = 0.0
    sfu: float = 0.0
    int: float = 0.0


class ComputeSection(Strict):
    tensor_tflops: dict[str, PositiveQuantity] = Field(description="dense tensor-core peak per dtype")
    fp32_lanes_per_sm: PositiveQuantity = Field(description="FP32 FMA results per clock per SM")
    sfu_lanes_per_sm: PositiveQuantity = Field(description="special-function results per clock per SM")
    int_lanes_per_sm: PositiveQuantity = Field(description="INT32 results per clock per SM")
    issue_per_scheduler: PositiveQuantity = Field(description="warp instructions issued per clock per scheduler")
    warps_to_hide_latency: PositiveQuantity = Field(description="resident warps per scheduler for full issue")
    latency_hiding_exponent: PositiveQuantity | None = Field(
        default=None,
        description="sharpness n of the latency-hiding knee: issue rate = (1 + (W/w)^n)^(-1/n) of the peak with w"
                    " resident warps per scheduler (sim.costmodel.elementwise.latency_hiding); absent: min(1, w/W)")
    op_costs: dict[str, OpCost] = Field(description="instructions per element of each named op, per unit")
    elementwise_instr_per_element: Quantity = Field(description="addressing/load/store/convert instructions per element")
    partial_vector_instr: Quantity | None = Field(
        default=None, description="instructions per vector access (address, load, store) that a thread whose elements fill"
                                  " less than a 16-byte vector pays over fewer elements; absent: none")
    thread_instr: Quantity | None = Field(
        default=None, description="instructions a thread issues once per iteration whatever elements it holds (program"
                                  " id, offsets, masks, pointer and loop setup), spread over its elements: thread_instr"
                                  " / elements per thread per element; when given it replaces partial_vector_instr")
    register_base_per_thread: PositiveQuantity = Field(
        description="registers an elementwise kernel needs besides its per-element values (estimator intercept)")
    registers_per_element: PositiveQuantity = Field(
        description="registers per element a thread holds (estimator slope; fitted on compiled Triton kernels)")
    reduction_step_ns: PositiveQuantity = Field(
        description="one step of a reduction across a row's threads (shuffle or shared memory + barrier)")
    spill_words_per_excess_register: PositiveQuantity = Field(
        description="32-bit words the compiler spills per register the estimate puts past the per-thread limit")


class GemmSection(Strict):
    max_efficiency: PositiveQuantity = Field(description="best fraction of tensor peak a library GEMM reaches")
    tile_m: Count
    tile_n: Count
    k_half_efficiency: PositiveQuantity = Field(description="K at which per-tile efficiency is half its max (prologue/epilogue cost)")
    misaligned_factor: PositiveQuantity = Field(description="throughput factor when a dimension breaks 16-byte alignment")
    misaligned_odd_factor: PositiveQuantity | None = Field(
        default=None, description="throughput factor when a leading dimension is only 2-byte aligned (an odd element"
        " count of a 16-bit dtype: a slower kernel class than 4-/8-byte strides); present, misaligned shapes skip"
        " the Hopper tile's wave and tile quantization; absent: misaligned_factor for every misaligned shape")
    cold_ramp_us: PositiveQuantity | None = Field(
        default=None, description="a GEMM whose operands come from HBM (op attribute l2: cold): time to fill its load"
        " pipeline before the weight stream runs at the sustained HBM rate; absent: cold GEMMs priced as warm ones")
    cold_stream_gbps: PositiveQuantity | None = Field(
        default=None, description="the rate a cold GEMM's operands stream from HBM at once its load pipeline is full"
        " (after cold_ramp_us): a read-only stream of many tensor-memory-accelerator loads, which runs faster than a"
        " copy's read+write stream (memory.hbm_sustained_gbps); fitted jointly with cold_ramp_us when the base"
        " profile carries it; absent: memory.hbm_sustained_gbps")
    tile_choices: list[tuple[int, int]] | None = Field(
        default=None, description="output tiles (M x N) the library's kernels use: a GEMM at least one default"
        " tile_m in M and N runs the one (or tile_m x tile_n) that leaves the least quantized work (fewest tile"
        " rounds x tile area on the SMs); empty: tile_m x tile_n always")
    tile_choices_provenance: Provenance | None = None
    small_m_row_step: Count | None = Field(
        default=None, description="a GEMM with M below tile_m runs the library's thin kernels: one tile of M rounded"
        " up to this many rows (the tensor-core instruction's N granularity, in the library's transposed view) by"
        " small_m_tile_n columns, which sets its tile count, split-K and padded work; absent: tile_m x tile_n")
    small_m_tile_n: Count | None = Field(
        default=None, description="the N side of the thin kernels' tile (with small_m_row_step)")
    small_m_min_k_slice: Count | None = Field(
        default=None, description="the thin kernels split K only into slices at least this deep: split-K = min(SMs //"
        " tiles, K // this) (read from the kernel grids of the calibration's small-M GEMMs; absent: 4 k-tiles of 64)")
    thin_fill_us: PositiveQuantity | None = Field(
        default=None, description="a thin kernel's (M below tile_m) pipeline fill and epilogue around its K loop,"
        " with thin_sm_stream_gbps and thin_l2_stream_gbps (absent, any of the three: no K-loop term)")
    thin_sm_stream_gbps: PositiveQuantity | None = Field(
        default=None, description="the rate one SM's thin-kernel K loop loads its operand tiles from L2 (few tiles"
        " in flight per SM): each wave of work units costs one unit's A and B tile bytes over its K slice at this"
        " rate; the K-loop term (with thin_fill_us) is a floor under the GEMM's body, warm or cold")
    thin_split_reduce_us: PositiveQuantity | None = Field(
        default=None, description="a thin kernel that splits K launches the library's reduction of the partial"
        " outputs as a second kernel: its device time, added to the GEMM's (absent: not priced; the partials' traffic"
        " is in the memory term either way)")
    thin_l2_stream_gbps: PositiveQuantity | None = Field(
        default=None, description="the L2's aggregate rate to the SMs for the thin kernels' operand tiles (every work"
        " unit's tile bytes; the floor when many SMs stream at once)")
    correction: list[GemmPoint] = Field(default_factory=list, description="measured/model ratios from calibration")
    correction_provenance: Provenance | None = None


class GemmPoint(Strict):
    m: int
    n: int
    k: int
    dtype: str
    ratio: float


class CorrectionPoint(Strict):
    x: list[float] = Field(min_length=1)
    ratio: float = Field(gt=0)


class CorrectionTable(Strict):
    """Measured / model time at calibrated points, interpolated in log space near them."""

    dims: list[str] = Field(min_length=1)
    points: list[CorrectionPoint]
    provenance: Provenance


class AttentionBackend(Strict):
    """A fused-attention library's speed: its matmuls run at `tc_efficiency` of the tensor-core
    peak and, in turn with them (not overlapped), every score element of the S = QK^T tiles
    costs a fixed time per SM (the online softmax: exp on the SFU, max/sum/scale on FP32) -
    so a smaller head_dim, with fewer FLOPs per score, runs further from the peak."""

    tc_efficiency: PositiveQuantity
    score_ns_fwd: PositiveQuantity = Field(description="ns per score element per SM in the forward")
    score_ns_bwd: PositiveQuantity = Field(description="ns per score element per SM in the backward")
    causal_key_tile: PositiveQuantity = Field(
        description="keys per tile of the causal kernel (128 queries x this): tiles crossing the diagonal run whole")


class EfficiencySection(Strict):
    attention_fwd: PositiveQuantity
    attention_bwd: PositiveQuantity
    attention_backends: dict[str, AttentionBackend] = Field(
        default_factory=dict,
        description="measured fused-attention backends (cudnn, ...); `attention_fwd/bwd` stay the flash kernels'")
    attention_default_backend: str = Field(
        default="flash", description="the backend SDPA picks when a workload names none (PyTorch's choice on this GPU)")
    layout_bandwidth_factor: PositiveQuantity = Field(description="bandwidth of a transpose relative to a copy")


class KernelSection(Strict):
    fixed_us: Quantity = Field(description="device time of an empty kernel back to back in a stream (its gap included)")
    launch_gap_us: Quantity = Field(description="idle gap between back-to-back kernels of a stream (part of fixed_us)")
    event_timing_overhead_us: Quantity = Field(
        description="what CUDA events around one kernel add to its duration (for comparing with event-timed data)")
    launch_latency_us: Quantity = Field(description="host launch return to earliest kernel start")
    memcpy_clean_fixed_us: Quantity | None = Field(
        default=None, description="fixed_us of the driver's device-to-device memcpy (a copy op with no launch config)"
        " whose operands come from an L2 holding no dirty lines (op attribute l2: cold); the default copy price"
        " keeps the calibration's convention (copies measured after an L2 flush that writes); absent: fixed_us")


class FrameworkOpCost(Provenance):
    """In-context host time of one call of a framework op (its launches and the Python just before
    it included): `us` with no autograd recording (no_grad, inference_mode, backward nodes),
    `grad_us` when its inputs require grad (autograd records a node)."""

    us: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    grad_us: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    calls: int | None = Field(default=None, ge=1, description="calls the medians were taken over")
    tensors: int | None = Field(
        default=None, ge=1, description="a foreach op's tensors per call in the calls the medians were taken over")
    per_tensor_us: float | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="a foreach op's host time per tensor in its lists: a call over n tensors costs "
                    "us + per_tensor_us x (n - tensors)")

    @model_validator(mode="after")
    def _some_cost(self) -> FrameworkOpCost:
        if self.us is None and self.grad_us is None:
            raise ValueError("a framework op cost needs 'us' or 'grad_us'")
        if (self.tensors is None) != (self.per_tensor_us is None):
            raise ValueError("'tensors' and 'per_tensor_us' go together (the per-tensor cost needs its reference count)")
        for cost in (self.us, self.grad_us):
            if cost is not None and self.tensors is not None and self.per_tensor_us is not None \
                    and self.per_tensor_us * self.tensors > cost:
                raise ValueError(f"per_tensor_us x tensors ({self.per_tensor_us * self.tensors:g}) exceeds the "
                                 f"call's cost ({cost:g}): the fixed part would be negative")
        return self


class MissingFrameworkOpCost(Provenance):
    """Framework ops the in-context table (`framework_ops`) lacks, as real models' steps pay them: their
    tight-loop cost (eager_op_us_by_kind with the driver launch, framework_op_us for one that launches no kernel)
    times `ratio`, the measured in-context / tight-loop ratio over the ops the table and the tight loop share
    (sim.calibrate.host_fit.fit_in_context_ratio). Applied only where `apply` is true (a replayed trace under
    --host model, a workload op naming a `framework_op` the table does not have); false: the tight-loop cost."""

    ratio: float = Field(gt=0, allow_inf_nan=False, description="in-context / tight-loop host time per call")
    apply: bool = Field(default=False, description="price the table's missing framework ops at ratio x tight loop")


class MissingOpClassCost(Quantity):
    """In-context host time per call (driver launch included, at the reference host speed) of an eager framework op
    the table (`framework_ops`) lacks, by the op's class (sim.costmodel.host.framework_op_class: a view, an op a
    torch.nn layer calls as its forward, any other functional op), called without autograd recording; fitted by the
    calibration from the calibration runs' eager decode / inference traces (sim.calibrate.host_fit.fit_missing_classes).
    Used by --host model and workload ops naming such a `framework_op` where `apply` is true (before
    missing_framework_ops.ratio); false: that ratio or the tight-loop cost."""

    apply: bool = Field(default=False, description="price the table's missing framework ops of this class at this cost")


class FrameworkOpLevel(Quantity):
    """The framework-op table's level against the calibration runs (issue 15): the median over the ops the table
    prices without autograd recording of (their in-context host time per call in the calibration runs' eager decode /
    inference traces, at the reference trace speed) / (the table's `us`); fitted by the calibration
    (sim.calibrate.host_fit.fit_table_level). Where `apply` is true, every `us` price of the table (and a foreach
    op's per-tensor share) is multiplied by `value` (--host model, workload ops naming a `framework_op`); false: the
    table's prices as fitted."""

    apply: bool = Field(default=False, description="multiply the table's prices without autograd recording by value")


class FrameworkOpSpeedLevel(Provenance):
    """The framework-op table's level as a function of host speed (issue 15): a calibration trace at host speed s
    (its traced-step speed against host.trace_profiler.clock_us) pays level(s) = value x s ** exponent times the
    table's prices at the reference speed; fitted by the calibration (sim.calibrate.host_fit.fit_table_level,
    least squares in logs over the traces); `spread` is the exponent's 90 % bootstrap interval, `value_spread`
    value's. Where `apply` is true, a step priced at a given host speed s (own-speed rows, replay --host-clock /
    --host-speed) pays the table's prices without autograd recording (and a foreach op's per-tensor share) times
    level(s), so framework ops scale as s ** (1 + exponent); pricing at the reference speed keeps the table."""

    value: float = Field(gt=0, allow_inf_nan=False, description="L0: the level at host speed 1")
    exponent: float = Field(allow_inf_nan=False, description="level(s) = value x s ** exponent")
    value_spread: list[float] | None = Field(default=None, description="90 % bootstrap interval [low, high] of value")
    apply: bool = Field(default=False, description="price the table at a given host speed by level(s)")


class HostClockLevel(Provenance):
    """The level-aware relation between the host clock and the host speed the host costs are priced at
    (issue 15): a host whose clock (sim.calibrate.gpu.host_context.host_clock, us per call) reads c runs at
    speed (c / reference_us) ** exponent, where speed is the trace host speed the framework-op table is
    normalised by (sim.costmodel.trace_host.trace_host_speed). Fitted by the calibration from clocked eager
    forward steps at both host levels (sim.calibrate.host_fit.fit_clock_level); `spread` is the exponent's 90 %
    bootstrap interval, `reference_spread` the reference clock's. Used where `apply` is true (own-speed rows,
    replay --host-clock); false: speed = c / host.clock_us."""

    exponent: float = Field(gt=0, allow_inf_nan=False, description="speed = (clock / reference_us) ** exponent")
    reference_us: float = Field(gt=0, allow_inf_nan=False, description="the clock (us per call) at speed 1")
    reference_spread: list[float] | None = Field(
        default=None, description="90 % bootstrap interval [low, high] of reference_us")
    apply: bool = Field(default=False, description="price own-speed steps by this relation (false: c / clock_us)")


class TraceProfilerCost(Strict):
    """What torch.profiler adds per recorded event in real models' steps (sim.calibrate.host_fit): the
    cost at a reference host speed by profiler configuration, and the reference speed itself as each
    reference op's median traced duration then. A trace recorded on a host running s times slower shows
    those ops s times longer, and its profiler cost per event is s times the reference cost."""

    event_us: dict[Literal["plain", "shapes", "stack"], PositiveQuantity] = Field(
        description="profiler cost per recorded event (CPU op, runtime/driver call) at the reference speed")
    kernel_record_us: dict[Literal["plain", "shapes", "stack"], PositiveQuantity] = Field(
        default_factory=dict,
        description="extra cost, over event_us, of torch.compile's per-kernel record (Python-side, with the "
                    "kernel's arguments) at the reference speed")
    clock_us: dict[str, PositiveQuantity] = Field(
        min_length=1, description="reference op (aten::empty, cudaLaunchKernel) -> median traced duration at that speed")


class CompiledTrainingCost(Strict):
    """A torch.compile'd graph called with autograd recording (a training step's forward): AOTAutograd
    wraps it in an autograd.Function (CompiledFunction: its runtime wrapper, the tensors saved for the
    backward, the graph's node), and its backward graph hands a gradient back per input. Beyond
    compiled_call_us / compiled_backward_call_us, per call and per tensor the function takes (parameters
    and inputs)."""

    grad_call_us: Quantity = Field(description="a compiled forward call with autograd recording, beyond compiled_call_us")
    grad_input_us: Quantity = Field(description="the same, per tensor the compiled function takes")
    backward_input_us: Quantity = Field(
        description="a compiled backward call, per tensor its forward took, beyond compiled_backward_call_us")


class CompiledInContextCost(Strict):
    """Compiled calls as real models' steps pay them (their traces' compiled regions outside the kernels they
    launch: sim.calibrate.host_fit.fit_compiled_calls), where compiled_call_us / compiled_backward_call_us are a
    tight loop calling one small graph: a replayed trace's model-priced host (--host model) uses these."""

    call_us: Quantity = Field(description="a compiled forward call without autograd recording, in a real step")
    grad_call_us: Quantity = Field(
        description="a compiled forward call with autograd recording, in a real step, beyond call_us and "
                    "compiled_training.grad_input_us per tensor")
    backward_call_us: Quantity = Field(description="a compiled backward graph call, in a real step")
    kernel_us: CompiledKernelCost | None = Field(
        default=None, description="each kernel a compiled forward without autograd recording launches, in a real "
                                  "step (none: compiled_kernel_us / triton_launch_us and the extern op's dispatch)")


class CompiledKernelCost(Quantity):
    """Host time per kernel launched inside a compiled forward region without autograd recording, as real models'
    steps pay it (the wrapper's Python between launches, the Triton launcher's argument handling, an extern op's
    dispatch), at the reference host speed: sim.calibrate.host_fit.fit_compiled_kernel. Used by --host model
    where `apply` is true; false: the tight-loop prices (compiled_kernel_us / triton_launch_us, the extern op's
    eager dispatch)."""

    apply: bool = Field(default=False, description="price a compiled no-grad region's kernels at this cost")


class DdpHostCost(Strict):
    """DistributedDataParallel's own host work (torch's Reducer and the DDP module's forward), per
    step and per gradient, beyond the ops a workload lists."""

    forward_us: Quantity = Field(
        description="one DDP step's host work beyond its listed ops, with or without gradient sync: the DDP "
                    "module's forward (pre/post-forward hooks) and the step's Python around it")
    hook_us: Quantity = Field(
        description="the Reducer's work per gradient when gradients are synchronized: its autograd hook "
                    "(mark_variable_ready, the bucket copy's dispatch) and the copy back after the all-reduce")


class HostSection(Strict):
    eager_op_us: Quantity = Field(description="framework dispatch per eager op (host)")
    eager_op_us_by_kind: dict[str, Quantity] = Field(
        default_factory=dict, description="framework dispatch per eager op of this kind (gemm, elementwise, ...)")
    framework_op_us: Quantity = Field(description="a framework op that launches no kernel (view, transpose, t)")
    autograd_node_us: Quantity = Field(description="autograd engine overhead per backward op")
    backward_call_us: Quantity = Field(description="fixed host cost of one .backward() call (engine start, thread hand-off)")
    launch_us: Quantity = Field(description="driver launch call per kernel (host)")
    compiled_call_us: Quantity = Field(description="compiled-graph wrapper per call (host)")
    triton_launch_us: Quantity = Field(description="Triton kernel launched from Python, e.g. in an autograd.Function (host)")
    compiled_kernel_us: Quantity = Field(description="host cost per kernel a compiled graph's wrapper launches")
    compiled_backward_call_us: Quantity = Field(description="compiled backward graph call (AOTAutograd) per step (host)")
    compiled_training: CompiledTrainingCost | None = Field(
        default=None, description="what a compiled graph called with autograd recording costs beyond compiled_call_us "
                                  "and compiled_backward_call_us, per call and per tensor it takes (none: nothing more)")
    compiled_in_context: CompiledInContextCost | None = Field(
        default=None, description="compiled calls as real models' steps pay them (replayed traces under --host model; "
                                  "none: compiled_call_us, compiled_training and compiled_backward_call_us)")
    python_function_us: Quantity = Field(description="a torch.autograd.Function call, forward or backward (host)")
    module_call_us: Quantity = Field(description="the nn.Module __call__ machinery around a forward (host)")
    graph_launch_us: Quantity = Field(description="CUDA graph replay call (host)")
    graph_kernel_us: Quantity = Field(description="device time of an empty kernel inside a CUDA graph (replaces kernel.fixed_us there)")
    sync_us: Quantity = Field(description="host cost of a stream/device synchronize once work is done")
    launch_queue_depth: Count = Field(description="pending launches per stream before the host blocks")
    profiler_event_us: dict[Literal["plain", "shapes", "stack"], Quantity] = Field(
        default_factory=dict,
        description="host time torch.profiler adds per recorded event (CPU op, runtime/driver call, Python frame), "
                    "by profiler configuration: plain, record_shapes (shapes), record_shapes + with_stack (stack)")
    ddp: DdpHostCost | None = Field(
        default=None, description="DistributedDataParallel's own host work (measured on a multi-GPU machine)")
    clock_us: PositiveQuantity | None = Field(
        default=None,
        description="the host clock at the reference host speed, the speed every host cost here is priced at: us per "
                    "call of a fixed tight loop (geometric mean of torch.empty, a view and a 16-element add; "
                    "sim.calibrate.gpu.host_context.host_clock). A step timed beside a clock of c us ran at host "
                    "speed c / clock_us (sim.validate.host.own_speed); none: not measured")
    clock_level: HostClockLevel | None = Field(
        default=None,
        description="the level-aware clock -> host speed relation, fitted at both host levels, and whether it "
                    "replaces c / clock_us (none: not fitted)")
    trace_profiler: TraceProfilerCost | None = Field(
        default=None,
        description="the profiler's host cost per recorded event in real models' steps, at a reference host speed, "
                    "and that speed as the median traced duration of reference ops (replay scales the cost by the "
                    "trace's own speed)")
    framework_ops: dict[str, FrameworkOpCost] = Field(
        default_factory=dict,
        description="host cost per call by framework op (aten::addmm, aten::view, MmBackward0), measured in real "
                    "models; an op not in the table falls back to eager_op_us_by_kind / framework_op_us")
    missing_framework_ops: MissingFrameworkOpCost | None = Field(
        default=None,
        description="the measured in-context / tight-loop ratio for framework ops the table lacks, and whether it "
                    "prices them (none: their tight-loop cost)")
    framework_op_level: FrameworkOpLevel | None = Field(
        default=None,
        description="the table's level against the calibration runs' traces at the same trace speed (a factor on its "
                    "prices without autograd recording), and whether it applies (none: not fitted)")
    framework_op_speed_level: FrameworkOpSpeedLevel | None = Field(
        default=None,
        description="the table's level as a function of host speed, L0 x speed ** exponent, for steps priced at a given "
                    "host speed, and whether it applies (none: not fitted)")
    missing_framework_op_classes: dict[Literal["view", "module", "functional"], MissingOpClassCost] = Field(
        default_factory=dict,
        description="in-context host time per call of the framework ops the table lacks, by op class, without autograd "
                    "recording (an applied class comes before missing_framework_ops)")


class LinksSection(Strict):
    nvlink_gbps: Quantity = Field(description="per-GPU, per-direction NVLink bandwidth (0 = none)")
    nvlink_latency_us: Quantity
    pcie_gbps: PositiveQuantity
    network_gbps: Quantity
    network_latency_us: Quantity
    comm_efficiency: PositiveQuantity = Field(description="achieved fraction of link bandwidth for large collectives")


class BusBwPoint(Provenance):
    """A reference bus bandwidth (nccl-tests `busbw`) of one collective at one size and scale."""

    collective: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]
    ranks: int = Field(ge=2)
    nodes: int = Field(default=1, ge=1)
    bytes: float = Field(gt=0, description="nccl-tests size column (the whole buffer, as nccl-tests counts it)")
    busbw_gbps: float = Field(gt=0)
    algorithm: str | None = Field(default=None, description="the algorithm NCCL used, when the source says")


class CollectiveFit(Provenance):
    """A collective's measured behaviour on this topology at `ranks`: the bus bandwidth of its
    bandwidth term (time less NCCL's base and hop latencies) at device-bound sizes, interpolated
    log-log between them (NCCL uses fewer channels for smaller messages, so it rises with size),
    and the host time of one torch.distributed call of it."""

    points: list[tuple[float, float]] = Field(
        min_length=1, description="[bytes, bus GB/s of the bandwidth term] at measured device-bound sizes, ascending")
    host_us: float = Field(ge=0, description="host time of one call (torch.distributed), from host-bound sizes")
    ranks: int = Field(ge=2, description="the group size it was measured at")


class TopologySection(Strict):
    """How GPUs are connected: nodes of GPUs on NVLink/NVSwitch (or PCIe), nodes joined by NICs.

    Link rates stay in `links` (per GPU, per direction); this section gives the structure,
    what NCCL achieves on it and how many channels (one CTA each) its collectives use.
    """

    gpus_per_node: Count
    nodes: Count = Field(description="nodes in the cluster; ranks are placed node by node")
    intra_node: Literal["nvswitch", "nvlink", "pcie"] = Field(description="what joins the GPUs of a node")
    nics_per_node: Quantity = Field(description="network adapters per node (rail-optimized: one per GPU)")
    network_efficiency: PositiveQuantity = Field(description="achieved fraction of a NIC's rate through NCCL")
    nvls_busbw_gbps: Quantity = Field(
        description="all-reduce bus bandwidth through NVLink SHARP (NVSwitch reductions); 0 = no NVLS")
    channels: Count = Field(description="NCCL channels of a large collective: one CTA each, on its own SM")
    channel_gbps: PositiveQuantity = Field(description="most one channel (one CTA) moves")
    sms_lost_per_channel: PositiveQuantity | None = Field(
        default=None,
        description="SMs a kernel beside a resident collective cannot use per NCCL channel (CTA): 1 when its "
                    "blocks fit any free SM, more when the collective's CTAs break the SM groups its blocks are "
                    "placed on (2-CTA clusters). Declared: a GEMM beside a collective runs in rounds of its work "
                    "units over the SMs left (sim.costmodel.collective.rounds_beside); absent: SMs shared as a fluid")
    collective_start_us: PositiveQuantity | None = Field(
        default=None,
        description="how long after its stream reaches it a collective's CTAs start (its stream's wait on the "
                    "event of its input, then its launch): a kernel of another stream released at the same "
                    "moment and already queued starts first. Part of the collective's measured time alone "
                    "(taken out of its latency); absent: the collective starts at once")
    release_loss_units: PositiveQuantity | None = Field(
        default=None,
        description="a GEMM that starts beside a resident collective with CTAs left out (its grid larger than the "
                    "SMs the collective leaves) loses this many of its work units' time (time alone / units per "
                    "CTA) x min(how long the collective stays after the GEMM's start / the GEMM's time alone, 1) "
                    "(sim.kernelcost.release_loss; measured by sim.calibrate.gpu.gemm_release, fitted by "
                    "sim.calibrate.gemm_release_fit); absent: not priced so")
    reference_busbw: list[BusBwPoint] = Field(
        default_factory=list, description="published or measured nccl-tests bus bandwidths the model is tested against")
    collective_fits: dict[Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                                  "send_recv"], CollectiveFit] = Field(
        default_factory=dict,
        description="measured per-collective plateau bus bandwidth and extra latency (replace the link estimate)")


class PowerSection(Strict):
    """What a long-running load does to the clocks: under a power cap, sustained tensor-core work
    runs at a lower SM clock than a burst (memory-bound work stays at full clock)."""

    power_limit_w: PositiveQuantity
    sustained_clock_mhz: PositiveQuantity = Field(description="SM clock in steady state under sustained tensor-core load")


class AttentionLibrary(Strict):
    """How the fused-attention kernels split their work (sim/costmodel/attention.py)."""

    query_tile: Count = Field(
        description="queries per tile (one thread block's rows) of the prefill/training kernels; the tiles "
                    "set how many blocks fill the GPU and how much of a causal mask's diagonal runs whole")
    decode_kv_chunk: Count = Field(description="keys per split of a decode kernel (one query per (batch, head))")
    decode_blocks_per_sm: Count = Field(
        description="a decode kernel splits its keys until its grid has about this many blocks per SM")


class StreamingLibrary(Strict):
    """Launch defaults of a library's streaming kernels, for ops whose workload gives no launch config."""

    threads_per_block: Count
    vector_bytes: Count = Field(description="bytes one thread loads per vector access")


class ReductionLibrary(StreamingLibrary):
    """PyTorch's row reductions (layer norm, softmax, sums) and its column-sum grid (sim/costmodel/reduction.py)."""

    column_split_rows: Count = Field(
        description="a sum over rows keeps one block per column group up to this many rows; past it the rows split")
    column_split_blocks_per_sm: Count = Field(description="the split aims at about this many blocks per SM")
    column_split_min_rows: Count = Field(description="rows each split covers at least")


class MemcpyLibrary(Strict):
    """The driver's device-to-device copy kernel (cudaMemcpyAsync D2D; sim/costmodel/layout.py)."""

    threads_per_block: Count
    elems_per_thread: Count = Field(description="2-byte elements a thread moves per iteration")
    registers_per_thread: Count


class ProtocolNumbers(Provenance):
    """One number per NCCL protocol (LL, LL128, Simple); a protocol left out does not apply."""

    ll: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    ll128: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    simple: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class NcclLibrary(Strict):
    """NCCL's tuner constants (src/graph/tuning.cc) and pipeline sizes (sim/costmodel/nccl.py)."""

    base_latency_us: dict[Literal["ring", "tree", "nvls"], ProtocolNumbers] = Field(
        description="latency of one call by algorithm and protocol (tuning.cc baseLat); a protocol left out "
                    "does not run that algorithm")
    hop_latency_us: dict[Literal["nvlink", "pcie", "net"], ProtocolNumbers] = Field(
        description="latency per hop by link kind and protocol (tuning.cc hwLat)")
    chunk_bytes: ProtocolNumbers = Field(description="bytes a channel moves per pipeline step, by protocol")
    tree_bandwidth_factor: PositiveQuantity = Field(description="tree bus bandwidth over the ring's")
    protocol_bandwidth: ProtocolNumbers = Field(
        description="share of the bus bandwidth each protocol carries (LL: for all-reduce or across nodes)")
    ll_bandwidth_other: PositiveQuantity = Field(
        description="LL's share of the bus bandwidth for other collectives within one node")


class LibrarySection(Strict):
    """Heuristics of the libraries whose kernels the workloads name (PyTorch ATen, FlashAttention, the CUDA
    driver): software constants, not hardware numbers; each says which library source it comes from."""

    attention: AttentionLibrary
    elementwise: StreamingLibrary = Field(description="PyTorch's vectorized elementwise kernels")
    reduction: ReductionLibrary
    memcpy: MemcpyLibrary
    nccl: NcclLibrary


class HardwareProfileFile(Strict):
    schema_: Literal["kernelsim.hardware/v1"] = Field(alias="schema")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    gpu: str
    description: str = ""
    sm: SMSection
    memory: MemorySection
    compute: ComputeSection
    gemm: GemmSection
    efficiency: EfficiencySection
    kernel: KernelSection
    host: HostSection
    links: LinksSection
    topology: TopologySection | None = Field(
        default=None, description="node and network structure for multi-rank runs (sim/topology.py); absent: one node")
    power: PowerSection | None = None
    corrections: dict[str, CorrectionTable] = Field(
        default_factory=dict, description="calibrated residual tables of families whose library picks kernels by shape")
    libraries: dict[str, dict[str, PositiveQuantity]] = Field(
        default_factory=dict,
        description="throughput of alternative libraries per op kind, relative to the default (torch/cuBLAS)",
    )
    reduce_kernel: dict[str, PositiveQuantity] = Field(
        default_factory=dict,
        description="PyTorch's reduce_kernel (sums over a dimension): its launch heuristics (max_threads,"
        " input_vec, vt0, min_values_per_thread, max_values_per_thread, warp_split_values: setReduceConfig in"
        " ATen's Reduce.cuh) and the time of one iteration of its per-thread load loop, vectorized (vec) or"
        " four loads deep (ilp), the loop's entry and exit per path (entry_ns_PATH_STATE) and a split input's"
        " hand-off to its last block (split_ns_STATE), with the input in L2 (warm) or in HBM (cold), and the"
        " exponent of the loop's Little's-law stream bending onto the HBM ceiling (knee_exponent_STATE; absent:"
        " the copies' bandwidth_knee_exponent) (sim/costmodel/reduction.py); absent: sums are priced as streaming reductions",
    )
    softmax_kernel: dict[str, PositiveQuantity] = Field(
        default_factory=dict,
        description="PyTorch's softmax forward over the last dimension (host_softmax in ATen's SoftMax.cu): its"
        " kernel choice (warp_max_elements, warp_max_bytes: the persistent warp kernel; max_threads, reg_max_loads:"
        " the register kernel while ceil(cols / block) <= reg_max_loads; smem_per_block_bytes: the shared-memory"
        " kernel while a row fits) and the kernels' times (sim/costmodel/reduction.py): load_ns and smem_step_ns,"
        " one block's turn on an SM per element a thread holds (the register and shared-memory kernels);"
        " warp_chain_ns, a warp-kernel lane's wait for each load, per wave of resident blocks, with the kernel's"
        " registers warp_base_regs + the elements a lane holds; with warp_slot_ns the warp kernel's wave takes"
        " its lane's loads x the wait (warp_chain_ns with the input in HBM, warp_chain_ns_warm where an op not"
        " marked l2: cold has its input within warm_l2_share of the L2; x warp_chain_fp32_ratio for elements of"
        " 4 bytes or more) plus the wave's threads x the element slots each holds x warp_slot_ns (the SM's"
        " throughput); absent: softmax is priced as the row-wise reduction its op describes. The backward"
        " (host_softmax_backward; an op of impl torch_softmax_bwd): bwd_warp_max_elements, bwd_warp_max_bytes"
        " (the persistent warp kernel, registers bwd_warp_base_regs + bwd_warp_regs_per_slot x the padded"
        " elements a lane holds; a wave takes a lane's loads x bwd_warp_chain_ns, from HBM bwd_warp_chain_ns_hbm,"
        " x bwd_warp_fp32_ratio for 4-byte elements, plus its threads x loads x bwd_warp_elem_ns), else a block per"
        " row (a wave takes bwd_block_ns plus its bytes at bwd_stream_gbps, from HBM bwd_block_ns_hbm plus its bytes"
        " at the HBM rate; rows past"
        " the shared memory move bwd_gmem_streams rows of bytes); inputs in L2 while both fit warm_l2_share of it;"
        " absent: the row-wise reduction its op describes",
    )
    layer_norm_kernel: dict[str, PositiveQuantity] = Field(
        default_factory=dict,
        description="PyTorch's layer norm and RMS norm forward over the last dimension (ATen's"
        " vectorized_layer_norm_kernel, one block of `threads` per row, loads of vec_elems elements, `regs`"
        " registers a thread): its times (sim/costmodel/reduction.py): iter_ns, the round trip of one iteration of"
        " a thread's loops (a load of the statistics pass, a load and store of the normalize pass), the input in"
        " HBM, and iter_ns_warm, in L2 (an op not marked l2: cold whose input fits reread_l2_share of it); stream_gbps,"
        " the rate of a wave's bytes per iteration (the row read again from HBM where the resident rows pass"
        " reread_l2_share of the L2); block_ns, an SM's own work per block; rms_iter_ns, rms_iter_ns_warm and"
        " rms_block_ns, the same for RMS norm (the kernel with its rms flag); absent: layer norm is priced as the"
        " row-wise reduction its op describes. The backward's two kernels: bwd_iter_ns, bwd_iter_ns_warm and"
        " bwd_stream_gbps for the grad-input kernel (a wave's iteration takes the round trip plus its bytes at the"
        " rate), bwd_reread_streams row slices re-read from HBM past the L2 share; gb_block_x x gb_block_y threads"
        " (gb_block_y_few_rows up to gb_few_rows rows), gb_rows_per_load rows a loop iteration, gb_iter_ns,"
        " gb_iter_ns_warm and gb_stream_gbps for the gamma/beta column sums (an iteration takes the longer of the"
        " round trip and its bytes at the rate); absent: priced as the reductions their ops describe. RMS norm's"
        " backward (the same kernels with their rms flag): rms_bwd_iter_ns, rms_bwd_iter_ns_warm, rms_bwd_stream_gbps"
        " and rms_gb_iter_ns, rms_gb_iter_ns_warm, rms_gb_stream_gbps. A forward over"
        " rows that are not whole vectors (ATen's two-kernel fallback): fb_moments_threads / fb_forward_threads"
        " threads and fb_moments_regs / fb_forward_regs registers a block per row; fb_moments_iter_ns(_warm),"
        " fb_moments_block_ns (the Welford combine per wave), fb_forward_iter_ns(_warm), fb_forward_stream_gbps;"
        " absent: the row-wise reduction the op describes",
    )
    primitives: dict[str, PositiveQuantity] = Field(
        default_factory=dict,
        description="sort / scan / unique (CUB device-wide algorithms): radix_digit_bits, scan_passes,"
        " unique_passes (sim/ops/sortscan.py)",
    )
    library: LibrarySection = Field(
        description="launch and work-split heuristics of the libraries (ATen, FlashAttention, the CUDA driver) "
                    "for kernels a workload gives no launch config")

    @field_validator("softmax_kernel", "layer_norm_kernel")
    @classmethod
    def _laws_whole(cls, v: dict[str, PositiveQuantity], info: ValidationInfo) -> dict[str, PositiveQuantity]:
        # a law's trigger key (the one sim/costmodel/reduction.py dispatches on) comes with every key the law reads
        laws = SOFTMAX_LAW_KEYS if info.field_name == "softmax_kernel" else LAYER_NORM_LAW_KEYS
        for trigger, needed in laws.items():
            missing = [k for k in needed if k not in v]
            if trigger in v and missing:
                raise ValueError(f"has {trigger} but lacks {', '.join(missing)} (every key of that kernel's law)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> HardwareProfileFile:
        if self.memory.hbm_sustained_gbps.value > self.memory.hbm_peak_gbps.value:
            raise ValueError("memory.hbm_sustained_gbps cannot exceed memory.hbm_peak_gbps")
        if self.sm.max_warps_per_sm.value * self.sm.warp_size.value != self.sm.max_threads_per_sm.value:
            raise ValueError("sm.max_warps_per_sm × sm.warp_size must equal sm.max_threads_per_sm")
        n = self.memory.bandwidth_knee_exponent.value
        if n < KNEE_EXPONENT_MIN:
            # (X^-n + B^-n)^(-1/n) tends to 0 as n does: a streaming bandwidth of nothing, not a model of queueing
            raise ValueError(f"memory.bandwidth_knee_exponent {n:g} is below {KNEE_EXPONENT_MIN:g} (the smooth "
                             "minimum's exponent; a large one is a hard minimum)")
        return self


# memory.bandwidth_knee_exponent: the smallest smooth-minimum exponent a profile may give (fitted 1.5 on H200; below
# 0.5 the knee takes more than three quarters of the bandwidth at the crossing; a large one is a hard minimum)
KNEE_EXPONENT_MIN = 0.5

# layer_norm_kernel: each law's trigger key and the keys its cost function reads (sim/costmodel/reduction.py)
_LN_LAUNCH = ("threads", "vec_elems", "regs", "reread_l2_share")
LAYER_NORM_LAW_KEYS: dict[str, tuple[str, ...]] = {
    "iter_ns": (*_LN_LAUNCH, "stream_gbps", "block_ns"),
    "rms_iter_ns": (*_LN_LAUNCH, "stream_gbps", "rms_block_ns"),
    "bwd_iter_ns": (*_LN_LAUNCH, "bwd_iter_ns_warm", "bwd_stream_gbps", "bwd_reread_streams"),
    "gb_iter_ns": ("regs", "reread_l2_share", "gb_iter_ns_warm", "gb_stream_gbps", "gb_block_x", "gb_block_y",
                   "gb_block_y_few_rows", "gb_few_rows", "gb_rows_per_load"),
    "rms_bwd_iter_ns": (*_LN_LAUNCH, "rms_bwd_iter_ns_warm", "rms_bwd_stream_gbps", "bwd_reread_streams"),
    "rms_gb_iter_ns": ("regs", "reread_l2_share", "rms_gb_iter_ns_warm", "rms_gb_stream_gbps", "gb_block_x",
                       "gb_block_y", "gb_block_y_few_rows", "gb_few_rows", "gb_rows_per_load"),
    "fb_moments_iter_ns": ("vec_elems", "threads", "reread_l2_share", "fb_moments_iter_ns_warm", "fb_moments_block_ns",
                           "fb_moments_threads", "fb_moments_regs", "fb_forward_iter_ns", "fb_forward_iter_ns_warm",
                           "fb_forward_stream_gbps", "fb_forward_threads", "fb_forward_regs"),
}

# softmax_kernel: the warp kernel's law's trigger key and the keys its cost function reads
SOFTMAX_LAW_KEYS: dict[str, tuple[str, ...]] = {
    "warp_slot_ns": ("warp_max_elements", "warp_max_bytes", "max_threads", "reg_max_loads", "smem_per_block_bytes",
                     "warp_chain_ns", "warp_chain_ns_warm", "warp_chain_fp32_ratio", "warm_l2_share"),
    "bwd_warp_elem_ns": ("bwd_warp_max_elements", "bwd_warp_max_bytes", "max_threads", "smem_per_block_bytes",
                         "bwd_warp_base_regs", "bwd_warp_regs_per_slot", "bwd_warp_chain_ns", "bwd_warp_chain_ns_hbm",
                         "bwd_warp_fp32_ratio", "bwd_block_ns", "bwd_block_ns_hbm", "bwd_stream_gbps",
                         "bwd_gmem_streams", "warm_l2_share"),
}

GemmSection.model_rebuild()
