"""GEMM: tensor-core time with tile and wave quantization, K efficiency, alignment, and memory.

- Output tiles of tile_m × tile_n; a grid of tiles runs in waves of one tile per SM, so a
  last partial wave wastes SMs (wave quantization) and padded tile edges waste work (tile
  quantization). The library has several tiles (the profile's `tile_choices`, read from the
  kernel names cuBLAS ran in calibration: 128x128 ... 320x128, 192x192) and runs, for a shape at
  least one default tile in M and N, the one that quantizes least (1536 x 3000: 192x192 tiles,
  128 of them in one wave, where 128x256 tiles would take two). When there are fewer tiles than SMs the library splits K (split-K) to
  fill the GPU, paying a reduction of the partial outputs. Below tile_m rows (decode-style M) the library runs
  thin kernels instead: one tile of M rounded up to a row step by a narrow N side (the profile's
  `small_m_row_step` x `small_m_tile_n`, read from the calibration's kernel names: nvjet ..._64x8_, _64x16_,
  _64x64_ at M = 1..8, 16, 64), so neither the padded rows nor split-K's partials are those of a 128-row tile
  (on in the shipped profile since 2026-12-02: sim.calibrate.fit.fit_small_m_tiles). Those kernels keep one or two tiles
  in flight per SM, so their K loop has a cost of its own beyond the bytes: a pipeline fill and epilogue
  (`thin_fill_us`) plus each wave of work units' A and B tile bytes at one SM's load rate (`thin_sm_stream_gbps`),
  or all units' at the L2's (`thin_l2_stream_gbps`), a floor under the body warm or cold; they split K only into
  slices at least `small_m_min_k_slice` deep, and a split runs the library's reduction as a second kernel
  (`thin_split_reduce_us`). All fitted by calibration where the base profile carries the keys (h200-sxm does).
- Short K amortizes each tile's prologue/epilogue poorly: per-tile efficiency k / (k + k_half).
- A leading dimension (row stride) that is not a multiple of 16 bytes falls off the fast (TMA,
  wgmma) path onto pre-Hopper CUTLASS kernels (measured on H200: `cutlass_80_tensorop_s16816` when
  the strides are 4- or 8-byte aligned, `cutlass_75_tensorop_s1688` when only 2-byte aligned).
  Which strides count depends on the layout: row-major A (m×k) has stride k, A transposed
  stride m; B (k×n) stride n, B transposed stride k; C stride n. Throughput × misaligned_factor,
  or × misaligned_odd_factor for 2-byte strides where the profile has one; those kernels run
  several smaller tiles per SM, so the Hopper tile's wave and tile quantization do not apply
  there (only the K-depth efficiency).
- Memory: minimum bytes (A, B, C once) at the achievable bandwidth: the small-M regime is
  weight-read bound.
- A measured profile carries a correction table (measured / this model) from calibration,
  interpolated in log-space by (m, n, k): never one global efficiency.
"""

from __future__ import annotations

import math
from types import MappingProxyType

from sim.costmodel import KernelCost
from sim.costmodel.corrections import interpolate
from sim.costmodel.memory import dirty_writeback_time
from sim.errors import KernelsimError
from sim.graph import DTYPE_BYTES, Graph, Op
from sim.hardware import Hardware


def _peak(hw: Hardware, dtype: str) -> float:
    """Peak FLOP/s of a GEMM in `dtype`: tensor cores, or the FP32 pipes for plain fp32 (no TF32)."""
    if dtype == "fp32":
        return 2.0 * hw.fp32_lanes_per_sm * hw.sm_count * hw.clock_hz
    if dtype not in hw.tensor_flops:
        raise KernelsimError(f"hardware profile '{hw.name}' has no tensor-core rate for dtype '{dtype}'")
    return hw.tensor_flops[dtype]


def _stride_alignment(elements: int, item: int) -> int:
    """The largest power of two (at most 16) dividing a stride of `elements` elements, in bytes."""
    nbytes = elements * item
    return min(16, nbytes & -nbytes)


def alignment_bytes(m: int, n: int, k: int, dtype: str, layout: str = "nn") -> int:
    """Byte alignment (1..16) of the GEMM's leading dimensions: A's (k, or m when A is transposed),
    B's (n, or k when B is transposed) and C's (n)."""
    item = int(DTYPE_BYTES[dtype])
    lda = m if layout[0] == "t" else k
    ldb = k if layout[1] == "t" else n
    return min(_stride_alignment(lda, item), _stride_alignment(ldb, item), _stride_alignment(n, item))


def alignment_class(hw: Hardware, align: int) -> str:
    """'fast' (16-byte strides), 'odd' (2-byte or less, where the profile prices it apart) or 'misaligned'."""
    if align >= 16:
        return "fast"
    if align <= 2 and hw.gemm_misaligned_odd_factor is not None:
        return "odd"
    return "misaligned"


def _aligned(n: int, k: int, dtype: str) -> bool:
    return alignment_bytes(1, n, k, dtype) >= 16


def correction(hw: Hardware, m: int, n: int, k: int, dtype: str, layout: str = "nn") -> float:
    """The calibrated measured/model ratio near (m, n, k), among shapes of the same dtype and alignment
    class. The table's points carry no layout: they are read as the calibration's (row-major) shapes."""
    cls = alignment_class(hw, alignment_bytes(m, n, k, dtype, layout))
    pts = [((pm, pn, pk), ratio) for pm, pn, pk, pd, ratio in hw.gemm_correction
           if pd == dtype and alignment_class(hw, alignment_bytes(pm, pn, pk, dtype)) == cls]
    return interpolate(pts, (m, n, k)) if pts else 1.0


def _thin(hw: Hardware, m: int) -> bool:
    """Whether a GEMM of M rows runs the library's thin kernels (M below tile_m, the profile has their tile rule)."""
    return m < hw.gemm_tile_m and bool(hw.gemm_small_m_row_step) and bool(hw.gemm_small_m_tile_n)


def _tiling(hw: Hardware, m: int, n: int, k: int, batch: int, tm: int, tn: int) -> tuple[int, int, float, float, float]:
    """(tiles, split-K slices, waves, wave efficiency, tile efficiency) of an M x N output in tm x tn tiles."""
    tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
    split = 1
    if tiles < hw.sm_count:
        # split-K: as many K slices as fill the SMs, each at least 4 k-tiles of 64 deep (the thin kernels: at least
        # gemm.small_m_min_k_slice deep, where the profile has it)
        min_slice = int(hw.gemm_small_m_min_k_slice) if _thin(hw, m) and hw.gemm_small_m_min_k_slice else 256
        split = max(1, min(hw.sm_count // tiles, k // min_slice))
    work_units = tiles * split
    waves = math.ceil(work_units / hw.sm_count)
    wave_eff = work_units / (waves * hw.sm_count)
    tile_eff = (m * n) / (math.ceil(m / tm) * tm * math.ceil(n / tn) * tn)
    return tiles, split, waves, wave_eff, tile_eff


def choose_tile(hw: Hardware, m: int, n: int, k: int, batch: int) -> tuple[int, int]:
    """The output tile the library runs: tile_m x tile_n, or, for a GEMM at least tile_m in M and N, the one
    of the profile's `tile_choices` (the tiles its kernels were seen to use) with the least quantized work:
    waves x tile rounds' idle SMs and padded edges, at equal per-SM throughput (the first of equals); for M below
    tile_m, where the profile has the library's thin-kernel rule, M rounded up to its row step x its narrow N."""
    default = (hw.gemm_tile_m, hw.gemm_tile_n)
    if _thin(hw, m):
        assert hw.gemm_small_m_row_step is not None and hw.gemm_small_m_tile_n is not None
        # the library's thin kernels (nvjet ..._{N}x{rows}_... in its transposed view): one tile of M rounded up
        # to the row step, a narrow N side; the tile count they give decides split-K (gemm.small_m_row_step)
        step = int(hw.gemm_small_m_row_step)
        return min(hw.gemm_tile_m, math.ceil(m / step) * step), int(hw.gemm_small_m_tile_n)
    if not hw.gemm_tile_choices or min(m, n) < hw.gemm_tile_m:
        return default  # thin shapes run skinny (split-K) kernels: the default tile's waves model them
    best, best_cost = default, math.inf
    for tm, tn in (default, *hw.gemm_tile_choices):
        _, split, _, wave_eff, tile_eff = _tiling(hw, m, n, k, batch, tm, tn)
        k_slice = k / split
        cost = 1.0 / (wave_eff * tile_eff * k_slice / (k_slice + hw.gemm_k_half))
        if cost < best_cost - 1e-12:
            best, best_cost = (tm, tn), cost
    return best


def gemm_terms(hw: Hardware, m: int, n: int, k: int, batch: int, dtype: str, layout: str = "nn") -> dict[str, float]:
    """The analytic terms (before the calibrated correction)."""
    item = DTYPE_BYTES[dtype]
    flops = 2.0 * m * n * k * batch
    tm, tn = choose_tile(hw, m, n, k, batch)
    tiles, split, waves, wave_eff, tile_eff = _tiling(hw, m, n, k, batch, tm, tn)
    k_slice = k / split
    k_eff = k_slice / (k_slice + hw.gemm_k_half)
    align = alignment_bytes(m, n, k, dtype, layout)
    aligned = align >= 16
    cls = alignment_class(hw, align)
    if hw.gemm_misaligned_odd_factor is not None and not aligned:
        # NB: the pre-Hopper kernels of misaligned shapes: their own throughput, K depth; no Hopper tile waves
        factor = hw.gemm_misaligned_odd_factor if cls == "odd" else hw.gemm_misaligned_factor
        eff = hw.gemm_max_efficiency * k_eff * factor
    else:
        eff = hw.gemm_max_efficiency * wave_eff * tile_eff * k_eff * (1.0 if aligned else hw.gemm_misaligned_factor)
    compute_s = flops / (_peak(hw, dtype) * eff)
    hbm = (m * k + k * n + m * n) * item * batch
    if split > 1:
        hbm += 2 * m * n * 4 * split * batch  # fp32 partials written and read back
    memory_s = hbm / hw.hbm_sustained_bps + hw.mem_latency_s
    stream_s = 0.0
    fill, sm_rate, l2_rate = hw.gemm_thin_fill_s, hw.gemm_thin_sm_stream_bps, hw.gemm_thin_l2_stream_bps
    if _thin(hw, m) and fill is not None and sm_rate is not None and l2_rate is not None:
        # the thin kernel's K loop: each work unit loads its A rows and B columns over its K slice, one or two tiles
        # in flight per SM, so a wave of units runs at one SM's load rate, and all of them at the L2's
        unit_bytes = (tm + tn) * k_slice * item
        stream_s = fill + max(waves * unit_bytes / sm_rate, tiles * split * unit_bytes / l2_rate)
    reduce_s = hw.gemm_thin_split_reduce_s if _thin(hw, m) and split > 1 and hw.gemm_thin_split_reduce_s else 0.0
    return {
        "flops": flops, "compute_s": compute_s, "memory_s": memory_s, "stream_s": stream_s, "reduce_s": reduce_s,
        "hbm_bytes": hbm,
        "tiles": tiles, "tile_m": float(tm), "tile_n": float(tn), "split_k": split, "waves": waves, "wave_eff": wave_eff, "tile_eff": tile_eff,
        "k_eff": k_eff, "aligned": float(aligned), "alignment_bytes": float(align), "efficiency": eff,
    }


def cold_stream_bps(hw: Hardware) -> float:
    """The rate a cold GEMM's operands stream from HBM after its ramp: gemm.cold_stream_gbps where the profile
    has it (a read-only stream), else the copy-fitted memory.hbm_sustained_gbps."""
    return hw.gemm_cold_stream_bps if hw.gemm_cold_stream_bps is not None else hw.hbm_sustained_bps


def gemm_cost(op: Op, graph: Graph, hw: Hardware) -> KernelCost:
    m, n, k = int(op.attrs["m"]), int(op.attrs["n"]), int(op.attrs["k"])
    batch = int(op.attrs.get("batch", 1))
    dtype = op.attrs.get("dtype", "bf16")
    if min(m, n, k, batch) <= 0:
        raise KernelsimError(f"op '{op.name}': GEMM dimensions must be positive (m={m}, n={n}, k={k})")
    layout = str(op.attrs.get("layout", "nn"))
    t = gemm_terms(hw, m, n, k, batch, dtype, layout)
    corr = correction(hw, m, n, k, dtype, layout)
    body = max(t["compute_s"], t["memory_s"], t["stream_s"]) * corr
    cold = op.attrs.get("l2") == "cold" and hw.gemm_cold_ramp_s is not None
    if cold:
        # operands from HBM: the correction table was measured with them in L2, so it scales the
        # compute term only; the stream runs at the sustained HBM rate after the pipeline fills (a GEMM's
        # read-only operand stream at its own rate, gemm.cold_stream_gbps, where the profile has one)
        assert hw.gemm_cold_ramp_s is not None
        t = {**t, "memory_s": hw.gemm_cold_ramp_s + t["hbm_bytes"] / cold_stream_bps(hw)}
        # an L2 full of dirty lines (a written flush before the call): the evicted lines' write-back first
        t["memory_s"] += dirty_writeback_time(hw, op.attrs, t["hbm_bytes"])
        body = max(t["compute_s"] * corr, t["memory_s"], t["stream_s"] * corr)
    # the thin kernels' split-K reduction: a second kernel after the GEMM's body (gemm.thin_split_reduce_us)
    time = hw.kernel_fixed_s + body + t["reduce_s"]
    if t["stream_s"] > max(t["compute_s"], t["memory_s"]):
        limiter, cat = "l2", "memory"  # the thin K loop's loads from L2
    elif t["compute_s"] >= t["memory_s"]:
        limiter = "tensor_core" if t["wave_eff"] > 0.75 else "tail"
        if not t["aligned"]:
            limiter = "tensor_core"
        cat = "compute"
    else:
        limiter, cat = "hbm", "memory"
    if body < hw.kernel_fixed_s:
        limiter = "launch"
    detail: dict[str, float | str] = {k_: (round(v, 6) if isinstance(v, float) else v) for k_, v in t.items()
                                      if k_ not in ("compute_s", "memory_s", "stream_s", "reduce_s")}
    if t["stream_s"] > 0:
        detail["k_loop_us"] = round(t["stream_s"] * 1e6, 4)
    if t["reduce_s"] > 0:
        detail["split_reduce_us"] = round(t["reduce_s"] * 1e6, 4)
    detail["correction"] = round(corr, 4)
    if cold:
        detail["l2"] = "cold"
        if op.attrs.get("l2_dirty") and hw.l2_dirty_writeback_bps is not None:
            detail["l2_dirty"] = "write-back"
    return KernelCost(
        time_s=time,
        compute_s=t["compute_s"] * corr,
        memory_s=max(t["memory_s"] * (1.0 if cold else corr), t["stream_s"] * corr),
        fixed_s=hw.kernel_fixed_s,
        limiter=limiter,
        category=cat,
        hbm_bytes=t["hbm_bytes"],
        flops=t["flops"],
        bw_demand=min(1.0, t["hbm_bytes"] / time / hw.hbm_sustained_bps),
        sm_demand=min(1.0, t["tiles"] * t["split_k"] / hw.sm_count),
        detail=MappingProxyType(detail),
    )
