"""Triton kernels of the harness. This module imports triton at import time, so other
modules import it only inside functions (lazily).

All elementwise kernels read/write bf16 (or whatever dtype the tensors have) and compute
in fp32. Offsets are flat int32 element indices (numel < 2**31). Dropout uses
``tl.rand(seed, offset)``: one Philox-4x32-10 block per call, one of its four 32-bit
outputs used ("1 rng" in the op counts). GELU is the exact form
0.5*a*(1+erf(a/sqrt(2))) with ``tl.math.erf`` (libdevice erff: a polynomial on the FMA
pipe plus an exp on the SFU for large |a|, counted as "1 erf" in the op counts).
"""

from __future__ import annotations

import triton
import triton.language as tl

RSQRT2 = 0.7071067811865476
RSQRT_2PI = 0.3989422804014327


@triton.jit
def empty_kernel(x_ptr):
    pass


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def copy_persistent_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for start in range(pid * BLOCK, n, nprog * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def bias_add_kernel(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    b = tl.load(b_ptr + offs % N, mask=m).to(tl.float32)
    tl.store(y_ptr + offs, (x + b).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    g = 0.5 * a * (1.0 + tl.math.erf(a * 0.7071067811865476))
    tl.store(y_ptr + offs, g.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["seed"])
def dropout_kernel(x_ptr, y_ptr, mask_ptr, n, p, seed, BLOCK: tl.constexpr, STORE_MASK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    keep = tl.rand(seed, offs) > p
    y = tl.where(keep, x / (1.0 - p), 0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)
    if STORE_MASK:
        tl.store(mask_ptr + offs, keep.to(tl.uint8), mask=m)


@triton.jit(do_not_specialize=["seed"])
def bias_gelu_dropout_fwd_kernel(h_ptr, b_ptr, y_ptr, mask_ptr, n, N, p, seed,
                                 BLOCK: tl.constexpr, STORE_MASK: tl.constexpr):
    """y = dropout(gelu_erf(h + b), p); the keep mask comes from tl.rand(seed, flat index)."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(h_ptr + offs, mask=m).to(tl.float32) + tl.load(b_ptr + offs % N, mask=m).to(tl.float32)
    g = 0.5 * a * (1.0 + tl.math.erf(a * 0.7071067811865476))
    keep = tl.rand(seed, offs) > p
    y = tl.where(keep, g / (1.0 - p), 0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)
    if STORE_MASK:
        tl.store(mask_ptr + offs, keep.to(tl.uint8), mask=m)


@triton.jit(do_not_specialize=["seed"])
def bias_gelu_dropout_bwd_kernel(gy_ptr, h_ptr, b_ptr, gh_ptr, n, N, p, seed, BLOCK: tl.constexpr):
    """gh = gy * keep/(1-p) * gelu'(h + b), keep recomputed from the same (seed, index)."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(h_ptr + offs, mask=m).to(tl.float32) + tl.load(b_ptr + offs % N, mask=m).to(tl.float32)
    gy = tl.load(gy_ptr + offs, mask=m).to(tl.float32)
    cdf = 0.5 * (1.0 + tl.math.erf(a * 0.7071067811865476))
    pdf = tl.exp(-0.5 * a * a) * 0.3989422804014327
    keep = tl.rand(seed, offs) > p
    gh = tl.where(keep, gy / (1.0 - p), 0.0) * (cdf + a * pdf)
    tl.store(gh_ptr + offs, gh.to(gh_ptr.dtype.element_ty), mask=m)


@triton.jit
def erf_k_kernel(x_ptr, y_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    """K dependent iterations of acc = erf(acc) + x: per element K erf + K fp32 add."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    acc = x
    for _ in tl.static_range(K):
        acc = tl.math.erf(acc) + x
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["seed"])
def rand_k_kernel(x_ptr, y_ptr, n, seed, K: tl.constexpr, BLOCK: tl.constexpr):
    """K tl.rand calls per element (seeds seed..seed+K-1), summed onto x."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    acc = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    for i in tl.static_range(K):
        acc += tl.rand(seed + i, offs)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def fma_k_kernel(x_ptr, y_ptr, n, a, b, K: tl.constexpr, BLOCK: tl.constexpr):
    """Two independent chains of K/2 fp32 FMAs each (K FMAs per element)."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    u = x
    v = x + 1.0
    for _ in tl.static_range(K // 2):
        u = u * a + b
        v = v * b + a
    tl.store(y_ptr + offs, (u + v).to(y_ptr.dtype.element_ty), mask=m)


try:  # triton >= 3.0
    from triton.language.extra import libdevice
except ImportError:  # pragma: no cover - older layouts
    from triton.language.extra.cuda import libdevice

MATH_OPS = ["sin", "cos", "tanh", "exp", "log", "sqrt", "rsqrt", "sigmoid", "silu", "pow", "erf"]


@triton.jit
def math_k_kernel(x_ptr, y_ptr, n, OP: tl.constexpr, K: tl.constexpr, BLOCK: tl.constexpr):
    """K dependent iterations of acc = op(acc) + x for the math op number OP of MATH_OPS."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    msk = offs < n
    x = tl.load(x_ptr + offs, mask=msk).to(tl.float32)
    acc = x
    for _ in tl.static_range(K):
        if OP == 0:
            a = tl.sin(acc)
        elif OP == 1:
            a = tl.cos(acc)
        elif OP == 2:
            a = libdevice.tanh(acc)
        elif OP == 3:
            a = tl.exp(acc * 0.01)
        elif OP == 4:
            a = tl.log(tl.abs(acc) + 1.0)
        elif OP == 5:
            a = tl.sqrt(tl.abs(acc))
        elif OP == 6:
            a = tl.rsqrt(tl.abs(acc) + 1.0)
        elif OP == 7:
            a = tl.sigmoid(acc)
        elif OP == 8:
            a = acc * tl.sigmoid(acc)
        elif OP == 9:
            a = libdevice.pow(tl.abs(acc) + 1.0, 0.75)
        else:
            a = tl.math.erf(acc)
        acc = a + x
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=msk)


# ----------------------------------------------------------------------------- launchers
# Each returns the CompiledKernel (triton 3.x JITFunction.run returns it) and the grid.


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def launch_copy(x, y, BLOCK=4096, num_warps=8):
    n = x.numel()
    grid = (cdiv(n, BLOCK),)
    return copy_kernel[grid](x, y, n, BLOCK=BLOCK, num_warps=num_warps), grid


def launch_copy_persistent(x, y, ctas, BLOCK=4096, num_warps=8):
    n = x.numel()
    grid = (ctas,)
    return copy_persistent_kernel[grid](x, y, n, BLOCK=BLOCK, num_warps=num_warps), grid


def launch_empty(x):
    return empty_kernel[(1,)](x, num_warps=1), (1,)


def launch_bias_add(x, b, y, BLOCK=1024, num_warps=4):
    n = x.numel()
    grid = (cdiv(n, BLOCK),)
    return bias_add_kernel[grid](x, b, y, n, b.numel(), BLOCK=BLOCK, num_warps=num_warps), grid


def launch_gelu(x, y, BLOCK=1024, num_warps=4):
    n = x.numel()
    grid = (cdiv(n, BLOCK),)
    return gelu_kernel[grid](x, y, n, BLOCK=BLOCK, num_warps=num_warps), grid


def launch_dropout(x, y, p, seed, mask=None, BLOCK=1024, num_warps=4):
    n = x.numel()
    grid = (cdiv(n, BLOCK),)
    ck = dropout_kernel[grid](x, y, mask if mask is not None else y, n, p, seed, BLOCK=BLOCK,
                              STORE_MASK=mask is not None, num_warps=num_warps)
    return ck, grid


def launch_bgd_fwd(h, b, y, p, seed, mask=None, BLOCK=1024, num_warps=4):
    n = h.numel()
    grid = (cdiv(n, BLOCK),)
    ck = bias_gelu_dropout_fwd_kernel[grid](h, b, y, mask if mask is not None else y, n, b.numel(), p, seed,
                                            BLOCK=BLOCK, STORE_MASK=mask is not None, num_warps=num_warps)
    return ck, grid


def launch_bgd_bwd(gy, h, b, gh, p, seed, BLOCK=1024, num_warps=4):
    n = h.numel()
    grid = (cdiv(n, BLOCK),)
    ck = bias_gelu_dropout_bwd_kernel[grid](gy, h, b, gh, n, b.numel(), p, seed, BLOCK=BLOCK, num_warps=num_warps)
    return ck, grid


def launch_erf_k(x, y, K, BLOCK=1024, num_warps=4):
    n = x.numel()
    grid = (cdiv(n, BLOCK),)
    return erf_k_kernel[grid](x, y, n, K=K, BLOCK=BLOCK, num_warps=num_warps), grid


def launch_rand_k(x, y, K, seed=1234, BLOCK=1024, num_warps=4):
    n = x.numel()
    grid = (cdiv(n, BLOCK),)
    return rand_k_kernel[grid](x, y, n, seed, K=K, BLOCK=BLOCK, num_warps=num_warps), grid


def launch_fma_k(x, y, K, BLOCK=1024, num_warps=4):
    n = x.numel()
    grid = (cdiv(n, BLOCK),)
    return fma_k_kernel[grid](x, y, n, 1.0001, 0.0001, K=K, BLOCK=BLOCK, num_warps=num_warps), grid
