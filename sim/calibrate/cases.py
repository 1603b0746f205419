"""Microbenchmark records as kernelsim ops: each measured kernel becomes a one-op graph that the
cost model prices, so predictions and measurements can be compared record by record.

The mapping says what each benchmark kernel does (bytes, math per element, launch config);
it is the description a user would write, not a fit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sim.calibrate.gpu.common import FLUSH_BYTES  # the L2 flush of the event-timed benchmarks
from sim.costmodel import KernelCost, kernel_cost
from sim.graph import Graph, LaunchConfig, Op, Tensor
from sim.hardware import Hardware

TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "uint8": "uint8", "bool": "bool"}

# Math per element of each benchmark kernel (names priced by the profile's op_costs).
ELEMENTWISE_MATH: dict[str, dict[str, float]] = {
    "copy": {},
    "bias_add": {"add": 1},
    "gelu": {"gelu": 1},
    "dropout": {"rng": 1, "select": 1, "mul": 1},
    "dropout_mask": {"rng": 1, "select": 1, "mul": 1},
    "mul_mask_scale": {"mul": 1},
    "bias_gelu_dropout_fwd": {"add": 1, "gelu": 1, "rng": 1, "select": 1, "mul": 1},
    "bias_gelu_dropout_fwd_mask": {"add": 1, "gelu": 1, "rng": 1, "select": 1, "mul": 1},
    "bias_gelu_dropout_bwd": {"add": 1, "gelu_backward": 1, "rng": 1, "select": 1, "mul": 2},
}


@dataclass(frozen=True)
class Case:
    """One measured kernel and the ops that describe it."""

    family: str
    label: str
    graph: Graph
    measured_us: float
    record: dict[str, Any]

    profiled: bool = False  # measured as profiler kernel durations: no stream gap between kernels
    # A host-bound call timed with CUDA events after an L2-flush kernel (the graph's first op):
    # simulated with its host ops; the window opens when the flush ends.
    host_window: bool = False

    def predict(self, hw: Hardware) -> list[KernelCost]:
        return [kernel_cost(op, self.graph, hw) for op in self.graph.ops if op.is_kernel]

    def predicted_us(self, hw: Hardware) -> float:
        """What the measurement would show: profiler durations exclude the stream gaps; a
        CUDA-event time spans the kernels back to back plus the events' own overhead."""
        if self.host_window:
            return _event_window_us(self.graph, hw)
        costs = self.predict(hw)
        if self.profiled:  # an op of several kernels (detail `kernels`) has a stream gap inside each
            return sum(c.time_s - hw.launch_gap_s * int(c.detail.get("kernels", 1)) for c in costs) * 1e6
        return (sum(c.time_s for c in costs) - hw.launch_gap_s + hw.event_overhead_s) * 1e6


def _event_window_us(graph: Graph, hw: Hardware) -> float:
    """CUDA-event time of a call whose host path may outlast its kernels: the start event runs
    when the flush kernel (op 0) ends; the end event when the last kernel has ended and the
    host, done with the call, has recorded it (one launch latency later)."""
    from sim.costmodel.host import host_costs
    from sim.engine import simulate
    from sim.trace import HOST_TRACK

    costs = [kernel_cost(op, graph, hw) if op.is_kernel else None for op in graph.ops]
    trace = simulate(graph, costs, host_costs(hw))
    kernels = [iv for iv in trace.intervals if iv.track != HOST_TRACK and iv.op >= 0]
    flush_end = max(iv.end_s for iv in kernels if iv.op == 0)
    last_kernel = max(iv.end_s for iv in kernels)
    host_end = max((iv.end_s for iv in trace.intervals if iv.track == HOST_TRACK), default=0.0)
    end = max(last_kernel, host_end + hw.launch_latency_s)
    return (end - flush_end + hw.event_overhead_s) * 1e6


def _graph(ops: list[Op], tensors: list[Tensor]) -> Graph:
    return Graph(name="case", kind="training", params=MappingProxyType({}),
                 tensors=MappingProxyType({t.name: t for t in tensors}), ops=tuple(ops))


def _triton_launch(rec: dict[str, Any], numel: int) -> LaunchConfig:
    warps = int(rec.get("num_warps", 4))
    threads = 32 * warps
    block = int(rec.get("BLOCK", 1024))
    grid = rec.get("grid")
    # Triton's n_spills is the kernel's local memory in 32-bit words (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES / 4).
    spills = 4 * int(rec.get("n_spills") or 0)
    from sim.calibrate.spill_traffic import reload_distances_of, traffic_bytes_per_thread

    return LaunchConfig(
        block=threads,
        elems_per_thread=max(1, block // threads),
        regs_per_thread=int(rec["n_regs"]) if rec.get("n_regs") else None,
        spill_bytes_per_thread=spills if spills else None,
        # the compiled kernel's local loads + stores per thread (ptxas), where the record or the offline
        # compile table (sim.calibrate.spill_traffic) gives them; read under memory.spill_traffic_from_accesses
        spill_traffic_bytes_per_thread=traffic_bytes_per_thread(rec) if spills else None,
        # and its local loads' reload distances in the compiled code's order (read under memory.spill_l1_reuse)
        spill_reload_distances=reload_distances_of(rec) if spills else None,
        grid=int(grid[0]) if isinstance(grid, list) and grid else None,
        smem_per_block=int(rec.get("shared_bytes") or 0),
    )


def _elementwise(rec: dict[str, Any], family: str) -> Case | None:
    kernel = rec.get("kernel", "")
    numel = int(rec["numel"])
    if kernel in ELEMENTWISE_MATH:
        math = dict(ELEMENTWISE_MATH[kernel])
    elif kernel.startswith(("erf_x", "rand_x", "fma_x")):
        k = int(rec.get("k") or kernel.split("_x")[1])
        unit = {"erf": "erf", "rand": "rng", "fma": "fma"}[kernel.split("_x")[0]]
        math = {unit: float(k)}
    else:
        return None
    tensors = [Tensor("x", (numel,), "bf16"), Tensor("y", (numel,), "bf16")]
    reads, writes = ["x"], ["y"]
    if kernel.startswith("bias"):
        hidden = int(rec.get("hidden", 4096))
        tensors.append(Tensor("b", (hidden,), "bf16"))
        reads.append("b")
    if kernel == "bias_gelu_dropout_bwd":
        tensors.append(Tensor("g", (numel,), "bf16"))
        reads.append("g")
    if kernel.endswith("_mask") or kernel == "dropout_mask":
        tensors.append(Tensor("m", (numel,), "uint8" if rec.get("mask_dtype") == "uint8" else "bool"))
        writes.append("m")
    if kernel == "mul_mask_scale":
        tensors.append(Tensor("m", (numel,), "bool"))
        reads.append("m")
    launch = _triton_launch(rec, numel) if rec.get("impl", "triton") == "triton" else None
    if launch is None and kernel == "bias_add":
        # PyTorch broadcasts the bias with the non-vectorized elementwise_kernel<128, 4>: a
        # 2-byte load per element and a broadcast offset computed per element.
        launch = LaunchConfig(block=128, elems_per_thread=4)
        math["broadcast_index"] = 1
    if launch is None and kernel == "mul_mask_scale":
        # bf16 × bool: mixed dtypes take PyTorch's non-vectorized elementwise_kernel<128, 4>.
        launch = LaunchConfig(block=128, elems_per_thread=4)
    if launch is None and kernel in ("dropout", "dropout_mask"):
        # PyTorch's fused_dropout_kernel_vec: grid-stride over 8 blocks of 256 threads per SM,
        # one curand Philox call yields 4 random numbers (4 elements).
        launch = LaunchConfig(block=256, grid=8 * 132)
        math["rng"] = 0.25
    ops = [Op(name=kernel, kind="elementwise", reads=tuple(reads), writes=tuple(writes), launch=launch,
              library="triton" if rec.get("impl", "triton") == "triton" else "torch",
              attrs=MappingProxyType({"math": MappingProxyType(math), "numel": numel}))]
    if kernel == "mul_mask_scale":  # x * mask, then * scale: two kernels with a bf16 intermediate
        tensors.append(Tensor("t", (numel,), "bf16"))
        ops = [ops[0].with_(name="mul_mask", writes=("t",)),
               ops[0].with_(name="mul_scale", reads=("t",), writes=("y",))]
    impl = rec.get("impl", "triton")
    label = f"{kernel} {impl} n={numel}" + (f" B={rec.get('BLOCK')} w={rec.get('num_warps')}" if launch else "")
    return Case(family, label, _graph(ops, tensors), float(rec["time_us"]), rec)


def cases_from_raw(groups: dict[str, list[dict[str, Any]]]) -> list[Case]:
    """Every record the cost model can describe, as a Case with its family."""
    out: list[Case] = []
    for rec in groups.get("copy", []):
        if rec.get("bench") != "copy":
            continue
        numel = int(rec["numel"])
        t = [Tensor("x", (numel,), "bf16"), Tensor("y", (numel,), "bf16")]
        launch = _triton_launch(rec, numel) if rec.get("impl") == "triton_copy" else None
        op = Op(name="copy", kind="copy", reads=("x",), writes=("y",), launch=launch)
        out.append(Case("copy", f"copy {rec['impl']} {rec['bytes']}B", _graph([op], t), float(rec["time_us"]), rec))
    for rec in groups.get("elementwise", []):
        family = "fused_elementwise" if rec.get("kernel", "").startswith("bias_gelu") else "elementwise"
        case = _elementwise(rec, family)
        if case is not None:
            out.append(case)
    for rec in groups.get("register_sweep", []):
        case = _elementwise({**rec, "impl": "triton"}, "register_sweep")
        if case is not None:
            out.append(case)
    for rec in groups.get("reduction", []):
        case = _reduction(rec)
        if case is not None:
            out.append(case)
    for rec in groups.get("kernel_configs", []):
        case = _profiled_reduction(rec)
        if case is not None:
            out.append(case)
    for rec in groups.get("layout", []):
        case = _layout(rec)
        if case is not None:
            out.append(case)
    for rec in groups.get("gemm", []):
        if rec.get("bench") == "gemm":
            out.append(_gemm(rec))
    for rec in groups.get("attention", []):
        case = _attention(rec)
        if case is not None:
            out.append(case)
    out += _l2_cold_cases(groups.get("l2_cold", []))
    return out


def _l2_cold_cases(records: list[dict[str, Any]]) -> list[Case]:
    """Small-M GEMMs, PyTorch sums and copies at calibration shapes profiled after a read-only L2 flush (a
    clean cold L2; sim.calibrate.gpu.heldout_l2, set cal): families gemm_cold, reduction_cold and copy_cold; the
    copies of the same sizes after the flush that writes (family copy_dirty: no fit uses them); and the layer norm
    and RMS norm forwards after the clean flush and warm (family norm_cal: profile layer_norm_kernel's fit); the
    layer norm backwards, clean and warm (family norm_bwd_cal: its bwd_* and gb_* keys, fitted per kernel); the
    softmax forwards on ATen's warp kernel, clean and warm (family softmax_cal: softmax_kernel's warp_* keys); the
    layer norm forwards over rows that are not whole vectors, clean and warm (family norm_fallback_cal: its fb_* keys);
    the softmax backwards' backward kernels, clean and warm (family softmax_bwd_cal: softmax_kernel's bwd_* keys)."""
    import dataclasses

    out = []
    for rec in records:
        if rec.get("uneven_calls") or rec.get("set") != "cal":
            continue
        if rec.get("l2_state") == "dirty" and rec.get("bench") == "copy":
            # the same copies after the flush that writes: the write-back term on the clean copies' fit
            case = profiled_copy(rec)
            if case is not None:
                out.append(dataclasses.replace(case, family="copy_dirty"))
            continue
        if rec.get("bench") == "norm" and str(rec.get("op", "")).endswith("_bwd"):
            # layer norm backwards, clean and warm: one case per record, its two kernels summed as every profiled
            # record's (family norm_bwd_cal; the fit of profile layer_norm_kernel's bwd_* and gb_* keys splits them
            # per kernel: layer_norm_bwd_kernel_cases); RMS norm backwards likewise (family rms_norm_bwd_cal: the rms_bwd_*
            # and rms_gb_* keys)
            if rec.get("op") in ("layer_norm_bwd", "rms_norm_bwd") and rec.get("l2_state") in ("clean", "warm"):
                rms = rec["op"] == "rms_norm_bwd"
                case = _profiled_reduction({**rec, "bench": "rmsnorm_bwd" if rms else "layernorm_bwd"})
                if case is not None:
                    out.append(dataclasses.replace(case, family="rms_norm_bwd_cal" if rms else "norm_bwd_cal"))
            continue
        if rec.get("bench") == "reduction" and rec.get("op") == "softmax_bwd":
            # softmax backwards, clean and warm: the backward kernel alone (family softmax_bwd_cal: profile
            # softmax_kernel's bwd_* keys; the product kernel before it is an elementwise op no fit here uses)
            if rec.get("l2_state") in ("clean", "warm"):
                kc = softmax_bwd_kernel_case(rec, "softmax_bwd_cal")
                if kc is not None:
                    out.append(kc)
            continue
        if rec.get("bench") == "reduction" and rec.get("op") == "softmax_fwd":
            # softmax forwards on ATen's warp kernel, the input in HBM (clean) or in L2 (warm): family softmax_cal
            # (profile softmax_kernel's warp_* keys)
            if rec.get("l2_state") in ("clean", "warm"):
                case = _profiled_reduction({**rec, "bench": "softmax_fwd"})
                if case is not None:
                    out.append(dataclasses.replace(case, family="softmax_cal"))
            continue
        if rec.get("bench") == "norm" and rec.get("l2_state") in ("clean", "warm"):
            # layer norm and RMS norm forwards, the input in HBM (clean) or in L2 (warm): family norm_cal; a layer
            # norm that ran ATen's two-kernel fallback (rows that are not whole vectors: its RowwiseMoments kernel
            # profiled) is family norm_fallback_cal (layer_norm_kernel's fb_* keys)
            case = _profiled_reduction({**rec, "bench": "layernorm_fwd" if rec.get("op") == "layer_norm_fwd"
                                        else "rmsnorm_fwd"})
            fallback = any("RowwiseMomentsCUDAKernel" in str(k.get("name", "")) for k in rec.get("kernels") or [])
            if case is not None:
                out.append(dataclasses.replace(case, family="norm_fallback_cal" if fallback else "norm_cal"))
            continue
        if rec.get("l2_state") != "clean":
            continue
        if rec.get("bench") == "gemm":
            out.append(dataclasses.replace(_gemm(rec), family="gemm_cold"))
        elif rec.get("bench") == "sum" and rec.get("dim") in (0, 1):
            case = _profiled_reduction({**rec, "bench": f"sum_dim{rec['dim']}"})
            if case is not None:
                out.append(dataclasses.replace(case, family="reduction_cold"))
        elif rec.get("bench") == "copy":
            case = profiled_copy(rec)
            if case is not None:
                out.append(dataclasses.replace(case, family="copy_cold"))
    return out


def profiled_copy(rec: dict[str, Any]) -> Case | None:
    """A `torch.Tensor.copy_` between contiguous bf16 tensors, profiled: the driver's device-to-device
    memcpy (no launch config). Measured after a read-only L2 flush (l2_state clean), its operands come
    from HBM behind a clean L2 (`l2: cold`); after a flush that wrote (dirty), from HBM behind an L2 full of
    dirty lines (`l2: cold`, `l2_dirty`: the dirty lines it evicts are written back, as for GEMMs and
    sums); other records keep the default price."""
    kern = [k for k in rec.get("kernels") or [] if "Memset" not in str(k.get("name", ""))]
    if not kern:
        return None
    numel = int(rec["numel"])
    t = [Tensor("x", (numel,), "bf16"), Tensor("y", (numel,), "bf16")]
    state = rec.get("l2_state")
    attrs = MappingProxyType({"l2": "cold"} if state == "clean" else {"l2": "cold", "l2_dirty": True}
                             if state == "dirty" else {})
    op = Op(name="copy", kind="copy", reads=("x",), writes=("y",), attrs=attrs)
    tensor_bytes = rec.get("tensor_bytes", 2 * numel)
    return Case("copy", f"copy {tensor_bytes}B (profiled)", _graph([op], t),
                sum(float(k["duration_us"]) for k in kern), rec, profiled=True)


def _reduction(rec: dict[str, Any]) -> Case | None:
    bench = rec.get("bench")
    rows, cols = int(rec["rows"]), int(rec["cols"])
    dt = TORCH_DTYPES.get(str(rec.get("dtype", "bfloat16")), "bf16")
    x = Tensor("x", (rows, cols), dt)
    if bench in ("layernorm_fwd", "softmax_fwd"):
        tensors = [x, Tensor("y", (rows, cols), dt)]
        # layer norm: statistics pass + normalize pass; softmax: max, sum of exp, normalize.
        math = {"add": 3, "mul": 3} if bench == "layernorm_fwd" else {"exp": 2, "add": 2, "mul": 1}
        passes = 2 if bench == "layernorm_fwd" else 3
        # ATen's own kernels: softmax's for the row length (impl torch_softmax), layer norm's vectorized one (impl
        # torch_layer_norm); `passes` where the profile has no such section
        impl = ({"impl": "torch_softmax", "l2": "cold"} if bench == "softmax_fwd"
                else {"impl": "torch_layer_norm", "l2": "cold"})  # timed after an L2 flush: the input in HBM
        op = Op(name=bench, kind="reduction", reads=("x",), writes=("y",),
                attrs=MappingProxyType({"rows": rows, "cols": cols, "passes": passes, **impl,
                                        "math": MappingProxyType(math)}))
    elif bench == "layernorm_bwd":
        # y.backward(gy) timed with CUDA events after the L2 flush: the engine starts (one
        # .backward() call), NativeLayerNormBackward0 launches the grad-input kernel (a block per
        # row) and the gamma/beta column sums, then three AccumulateGrad nodes (x, w, b) run
        # before backward() returns and the end event is recorded.
        vec = Tensor("v", (cols,), dt)
        tensors = [x, Tensor("gy", (rows, cols), dt), Tensor("gx", (rows, cols), dt), vec,
                   Tensor("flush", (FLUSH_BYTES // 4,), "int32")]
        ops = [Op(name="l2_flush", kind="elementwise", writes=("flush",)),
               Op(name="backward_start", kind="host", phase="backward",
                  attrs=MappingProxyType({"backward_calls": 1, "autograd_nodes": 1})),
               Op(name="grad_input", kind="reduction", reads=("x", "gy", "v"), writes=("gx",), phase="backward",
                  attrs=MappingProxyType({"rows": rows, "cols": cols, "passes": 2, "impl": "torch_layer_norm_bwd",
                                          "l2": "cold", "math": MappingProxyType({"add": 4, "mul": 5})}),
                  launch=LaunchConfig(block=128, regs_per_thread=32)),
               Op(name="gamma_beta", kind="reduction", reads=("x", "gy"), writes=("v",), phase="backward",
                  attrs=MappingProxyType({"rows": rows, "cols": cols, "axis": "rows", "impl": "torch_gamma_beta",
                                          "l2": "cold", "math": MappingProxyType({"add": 2, "mul": 2})}),
                  launch=LaunchConfig(block=1024, grid=max(1, cols // 32), regs_per_thread=32)),
               Op(name="accumulate_grads", kind="host", phase="backward",
                  attrs=MappingProxyType({"autograd_nodes": 3}))]
        return Case("reduction", f"{bench} {rows}x{cols}", _graph(ops, tensors), float(rec["time_us"]), rec,
                    host_window=True)
    elif bench == "sum_dim0":
        tensors = [x, Tensor("s", (cols,), dt)]
        op = Op(name=bench, kind="reduction", reads=("x",), writes=("s",),
                attrs=MappingProxyType({"rows": rows, "cols": cols, "axis": "rows",
                                        "math": MappingProxyType({"add": 1})}))
    else:
        return None
    return Case("reduction", f"{bench} {rows}x{cols}", _graph([op], tensors), float(rec["time_us"]), rec)


def _profiled_reduction(rec: dict[str, Any]) -> Case | None:
    """A reduction measured by the profiler (device time of its kernels, launch configs known).

    The kernel list can pair a launch config with the wrong event when a memset precedes the
    kernel; the configs used here are PyTorch's (documented in the record's kernel names)."""
    kernels = [k for k in rec.get("kernels") or [] if "Memset" not in k["name"]]
    if not kernels or "rows" not in rec:
        return None
    bench, rows, cols = rec["bench"], int(rec["rows"]), int(rec["cols"])
    measured = sum(float(k["duration_us"]) for k in kernels)
    # where the input was when the kernel ran: L2 after the warm-up call (no flush), HBM after a flush
    l2 = "warm" if rec.get("l2_state", "warm") == "warm" else "cold"
    # after a flush that wrote: an L2 full of dirty lines, written back as the input streams in (PyTorch's sums)
    dirty = {"l2_dirty": True} if rec.get("l2_state") == "dirty" else {}
    dt = TORCH_DTYPES.get(str(rec.get("dtype", "bfloat16")), "bf16")
    x, y = Tensor("x", (rows, cols), dt), Tensor("y", (rows, cols), dt)
    vec, col = Tensor("v", (cols,), dt), Tensor("r", (rows,), dt)

    def red(name: str, reads: tuple[str, ...], writes: tuple[str, ...], **attrs: Any) -> Op:
        launch = attrs.pop("launch", None)
        return Op(name=name, kind="reduction", reads=reads, writes=writes, launch=launch,
                  attrs=MappingProxyType({"rows": rows, "cols": cols, **attrs}))

    regs = next((int(k["registers_per_thread"]) for k in kernels if k.get("registers_per_thread")), None)
    if bench in ("layernorm_fwd", "rmsnorm_fwd"):
        # ATen's vectorized kernel (impl torch_layer_norm; RMS norm: the same kernel without the mean, impl
        # torch_rms_norm), with the profiled kernel's registers and the input where the record had it; a layer norm
        # over rows that are not whole vectors is ATen's two-kernel fallback (the same impl; RMS norm's: row-wise)
        ln = bench == "layernorm_fwd"
        math = {"add": 3, "mul": 3} if ln else {"fma": 2, "rsqrt": 1}
        ops = [red(bench, ("x", "v"), ("y",), passes=2, math=MappingProxyType(math),
                   impl="torch_layer_norm" if ln else "torch_rms_norm", l2=l2,
                   launch=LaunchConfig(block=128, regs_per_thread=regs or (32 if ln else 27)))]
        tensors = [x, y, vec]
    elif bench in ("layernorm_bwd", "rmsnorm_bwd"):
        # ATen's grad-input kernel (impl torch_layer_norm_bwd) and gamma/beta column sums (impl torch_gamma_beta),
        # the inputs where the record had them; RMS norm's backward runs the same two kernels with their rms flag
        # (impl torch_rms_norm_bwd, and torch_rms_gamma: the gamma sums alone)
        rms = bench == "rmsnorm_bwd"
        g = Tensor("g", (rows, cols), "bf16")
        ops = [red("grad_input", ("x", "g", "v"), ("y",), passes=2, math=MappingProxyType({"add": 4, "mul": 5}),
                   impl="torch_rms_norm_bwd" if rms else "torch_layer_norm_bwd", l2=l2,
                   launch=LaunchConfig(block=128, regs_per_thread=32)),
               red("gamma_beta", ("x", "g"), ("v",), axis="rows",
                   math=MappingProxyType({"add": 1, "mul": 2} if rms else {"add": 2, "mul": 2}),
                   impl="torch_rms_gamma" if rms else "torch_gamma_beta", l2=l2,
                   launch=LaunchConfig(block=1024, grid=max(1, cols // 32), regs_per_thread=32))]
        tensors = [x, y, vec, g]
        if any("CUDAFunctor_add" in str(k.get("name", "")) for k in kernels):
            # the records that take the gradient of x and the weight only (kernel_configs, the held-out sets) also
            # run an elementwise add over one [cols] vector (the profiled vectorized_elementwise_kernel, cols / 1024
            # blocks): described as measured
            tensors.append(Tensor("v2", (cols,), dt))
            ops.append(Op(name="param_add", kind="elementwise", reads=("v", "v2"), writes=("v",),
                          attrs=MappingProxyType({"math": MappingProxyType({"add": 1})})))
    elif bench == "softmax_fwd":
        # ATen's own choice of kernel and layout for the row length (impl torch_softmax), with the profiled
        # kernel's register count where the record has it; generic_softmax gives the row-wise description
        ops = [red(bench, ("x",), ("y",), impl="torch_softmax", math=MappingProxyType({"exp": 1, "add": 2, "mul": 1}),
                   l2=l2, launch=LaunchConfig(regs_per_thread=regs) if regs else None)]
        tensors = [x, y]
    elif bench == "softmax_bwd":
        # aten._softmax_backward_data: ATen's elementwise product of the gradient and the output, then the backward
        # kernel ATen picks for the row (impl torch_softmax_bwd) over that product and the output, with the
        # profiled kernel's registers where the record has them
        g, p = Tensor("g", (rows, cols), dt), Tensor("p", (rows, cols), dt)
        bwd = next((k for k in kernels if softmax_bwd_kernel_kind(str(k["name"]))), None)
        bregs = int(bwd["registers_per_thread"]) if bwd and bwd.get("registers_per_thread") else None
        ops = [Op(name="grad_times_output", kind="elementwise", reads=("g", "y"), writes=("p",),
                  attrs=MappingProxyType({"math": MappingProxyType({"mul": 1})})),
               red(bench, ("p", "y"), ("x",), impl="torch_softmax_bwd", math=MappingProxyType({"fma": 2}), l2=l2,
                   launch=LaunchConfig(regs_per_thread=bregs) if bregs else None)]
        tensors = [x, y, g, p]
    elif bench == "sum_dim0":
        ops = [red(bench, ("x",), ("v",), axis="rows", math=MappingProxyType({"add": 1}), impl="torch_reduce",
                   l2=l2, **dirty, launch=LaunchConfig(block=128, regs_per_thread=54))]
        tensors = [x, vec]
    elif bench == "sum_dim1":
        ops = [red(bench, ("x",), ("r",), threads_per_row=32, math=MappingProxyType({"add": 1}), impl="torch_reduce",
                   l2=l2, **dirty, launch=LaunchConfig(block=512, regs_per_thread=32))]
        tensors = [x, col]
    else:
        return None
    return Case("reduction_profiled", f"{bench} {rows}x{cols} (profiled)", _graph(ops, tensors), measured, rec,
                profiled=True)


LAYER_NORM_BWD_KERNELS = {"grad_input": "layer_norm_grad_input_kernel", "gamma_beta": "GammaBetaBackward"}


def layer_norm_bwd_kernel_cases(rec: dict[str, Any], family: str, bench: str = "layernorm_bwd") -> list[Case]:
    """A profiled layer norm backward (`bench` rmsnorm_bwd: an RMS norm backward) as one case per kernel (the
    grad-input kernel, the gamma/beta sums), each against its own profiled duration; none where the record lacks
    either kernel."""
    import dataclasses

    case = _profiled_reduction({**rec, "bench": bench})
    if case is None:
        return []
    out = []
    for op in (o for o in case.graph.ops if o.name in LAYER_NORM_BWD_KERNELS):  # not the parameter add
        ks = [k for k in rec.get("kernels") or [] if LAYER_NORM_BWD_KERNELS[op.name] in str(k.get("name", ""))]
        if len(ks) != 1:
            return []
        state = rec.get("l2_state", "warm")
        out.append(dataclasses.replace(case, family=family, graph=case.graph.with_ops([op]),
                                       measured_us=float(ks[0]["duration_us"]),
                                       label=f"{bench.replace('norm', '_norm')} {op.name} {rec['rows']}x{rec['cols']} ({state})"))
    return out


SOFTMAX_BWD_KERNEL = re.compile(r"softmax_warp_backward|cunn_SoftMaxBackward")


def softmax_bwd_kernel_kind(name: str) -> str | None:
    """Which of ATen's softmax backward kernels a profiled kernel name is (sim.costmodel.reduction
    torch_softmax_bwd_config's `kernel`: warp, smem or gmem), None for any other kernel."""
    if not SOFTMAX_BWD_KERNEL.search(name):
        return None
    return "warp" if "softmax_warp_backward" in name else "smem" if "BackwardSmem" in name else "gmem"


def softmax_bwd_kernel_case(rec: dict[str, Any], family: str) -> Case | None:
    """A profiled softmax backward (aten._softmax_backward_data) as one case of its backward kernel alone (impl
    torch_softmax_bwd), against that kernel's profiled duration; None where the record lacks it."""
    import dataclasses

    case = _profiled_reduction({**rec, "bench": "softmax_bwd"})
    ks = [k for k in rec.get("kernels") or [] if softmax_bwd_kernel_kind(str(k.get("name", "")))]
    if case is None or len(ks) != 1:
        return None
    state = rec.get("l2_state", "warm")
    return dataclasses.replace(case, family=family, graph=case.graph.with_ops([case.graph.ops[-1]]),
                               measured_us=float(ks[0]["duration_us"]),
                               label=f"softmax_bwd kernel {rec['dtype']} {rec['rows']}x{rec['cols']} ({state})")


def generic_softmax(case: Case) -> Case:
    """A profiled softmax forward (impl torch_softmax) as the generic row-wise reduction the reduction step
    (compute.reduction_step_ns) is fitted with: a warp per row, 4 rows per 128-thread block, one sweep up to
    1024 columns; else one 1024-thread block per row and three sweeps (max, sum, write). That is not what
    ATen runs past 1024 columns (its warp kernel up to 2048, then the register, shared-memory or three-sweep
    kernel: sim.costmodel.reduction.torch_softmax_config), but it is the description the step's fit has
    always used; the step fitted on the layer norms and sums alone moves from 98 to 214 ns and prices the
    layer norms inside the validated model steps too slow (issue 18 note, 2026-12-02). A layer norm or RMS norm
    forward (impl torch_layer_norm, torch_rms_norm) likewise loses its impl and L2 state: the two-pass row-wise
    description of its op. Other cases
    as they are."""
    import dataclasses

    op = case.graph.ops[0] if case.graph.ops else None
    if op is None or op.attrs.get("impl") not in ("torch_softmax", "torch_layer_norm", "torch_rms_norm"):
        return case
    attrs = {k: v for k, v in op.attrs.items() if k != "impl"}
    if op.attrs.get("impl") in ("torch_layer_norm", "torch_rms_norm"):
        attrs.pop("l2", None)
        return dataclasses.replace(case, graph=case.graph.with_ops([op.with_(attrs=attrs)]))
    if not case.profiled:  # a timed record: already the generic description (three sweeps, the default block)
        generic = op.with_(attrs=attrs)
    else:
        warp = int(attrs["cols"]) <= 1024
        generic = op.with_(attrs={**attrs, "passes": 1 if warp else 3, "threads_per_row": 32 if warp else 1024},
                           launch=LaunchConfig(block=128, regs_per_thread=48) if warp
                           else LaunchConfig(block=1024, regs_per_thread=30))
    return dataclasses.replace(case, graph=case.graph.with_ops([generic]))


def _layout(rec: dict[str, Any]) -> Case | None:
    bench = rec.get("bench")
    if bench == "transpose_contiguous":
        n = int(rec["rows"]) * int(rec["cols"])
        tensors = [Tensor("x", (n,), "bf16"), Tensor("y", (n,), "bf16")]
        transform = "transpose"
    elif bench in ("nchw_to_nhwc", "nhwc_to_nchw"):
        n = 1
        for d in rec["shape"]:
            n *= int(d)
        tensors = [Tensor("x", (n,), "bf16"), Tensor("y", (n,), "bf16")]
        transform = bench
    elif bench == "cast":
        n = int(rec["numel"])
        tensors = [Tensor("x", (n,), TORCH_DTYPES[rec["src_dtype"]]), Tensor("y", (n,), TORCH_DTYPES[rec["dst_dtype"]])]
        transform = "cast"
    else:
        return None
    op = Op(name=bench, kind="layout", reads=("x",), writes=("y",), attrs=MappingProxyType({"transform": transform}))
    return Case("layout", f"{bench} {rec.get('bytes')}B", _graph([op], tensors), float(rec["time_us"]), rec)


def _gemm(rec: dict[str, Any]) -> Case:
    from sim.calibrate.raw import kernel_time_us

    dt = "tf32" if rec.get("tf32") else TORCH_DTYPES.get(str(rec["dtype"]), "bf16")
    m, n, k = int(rec["m"]), int(rec["n"]), int(rec["k"])
    attrs: dict[str, Any] = {"m": m, "n": n, "k": k, "dtype": dt}
    if rec.get("layout", "nn") != "nn":  # which strides must be 16-byte aligned (sim.costmodel.gemm.alignment_bytes)
        attrs["layout"] = str(rec["layout"])
    if rec.get("l2_state") in ("clean", "dirty"):  # profiled after an L2 flush: operands from HBM
        attrs["l2"] = "cold"
    if rec.get("l2_state") == "dirty":  # after a flush that wrote: an L2 full of dirty lines to write back
        attrs["l2_dirty"] = True
    op = Op(name="gemm", kind="gemm", attrs=MappingProxyType(attrs))
    label = f"gemm {dt} {rec.get('layout', 'nn')} {m}x{n}x{k}"
    profiled = bool(rec.get("kernels")) and all("duration_us" in x for x in rec["kernels"])
    return Case("gemm", label, _graph([op], []), kernel_time_us(rec), rec, profiled=profiled)


def _attention(rec: dict[str, Any]) -> Case | None:
    bench = rec.get("bench")
    b, h, d = int(rec["batch"]), int(rec["heads"]), int(rec["head_dim"])
    causal = bool(rec.get("causal", False))
    if bench in ("sdpa_fwd", "sdpa_fwd_bwd"):
        s = int(rec["seq"])
        q = Tensor("q", (b, h, s, d), "bf16")
        tensors = [q, Tensor("k", (b, h, s, d), "bf16"), Tensor("v", (b, h, s, d), "bf16"), Tensor("o", (b, h, s, d), "bf16")]
        fwd = Op(name="attn_fwd", kind="attention", reads=("q", "k", "v"), writes=("o",),
                 attrs=MappingProxyType({"batch": b, "heads": h, "seq_q": s, "seq_kv": s, "head_dim": d,
                                         "causal": causal, "direction": "forward", "dtype": "bf16",
                                         **({"backend": rec["backend"]} if rec.get("backend") else {})}))
        ops = [fwd]
        if bench == "sdpa_fwd_bwd":
            tensors += [Tensor(f"g{x}", (b, h, s, d), "bf16") for x in "qkvo"]
            ops.append(fwd.with_(name="attn_bwd", reads=("q", "k", "v", "o", "go"), writes=("gq", "gk", "gv"),
                                 attrs={**fwd.attrs, "direction": "backward"}))
        label = f"{bench} b{b} h{h} s{s} d{d}{' causal' if causal else ''}"
        return Case("attention", label, _graph(ops, tensors), float(rec["time_us"]), rec)
    if bench == "sdpa_decode":
        length = int(rec["kv_len"])
        tensors = [Tensor("q", (b, h, 1, d), "bf16"), Tensor("k", (b, h, length, d), "bf16"),
                   Tensor("v", (b, h, length, d), "bf16"), Tensor("o", (b, h, 1, d), "bf16")]
        op = Op(name="attn_decode", kind="attention", reads=("q", "k", "v"), writes=("o",),
                attrs=MappingProxyType({"batch": b, "heads": h, "seq_q": 1, "seq_kv": length, "head_dim": d,
                                        "causal": False, "direction": "forward", "dtype": "bf16"}))
        from sim.calibrate.raw import kernel_time_us

        # profiled kernel durations where the record has them (device-side), else the event time
        profiled = bool(rec.get("kernels")) and all("duration_us" in x for x in rec["kernels"])
        return Case("attention", f"decode b{b} h{h} L{length} d{d}", _graph([op], tensors), kernel_time_us(rec), rec,
                    profiled=profiled)
    return None
