"""The wave-2 held-out kernels (validation/h200/heldout_kernels/*.json, measured by
sim.calibrate.gpu.heldout_kernels) as Cases: shapes and configurations that no fit and no
correction table uses. Each record becomes the one-op graph a user would write for it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sim.calibrate.cases import (
    Case,
    _attention,
    _elementwise,
    _gemm,
    _graph,
    _profiled_reduction,
    profiled_copy,
)
from sim.graph import Op, Tensor

# The held-out records' reduction names, as the profiled-reduction builder knows them.
_REDUCTION_BENCH = {"layer_norm_fwd": "layernorm_fwd", "layer_norm_bwd": "layernorm_bwd",
                    "rms_norm_fwd": "rmsnorm_fwd", "rms_norm_bwd": "rmsnorm_bwd", "softmax_fwd": "softmax_fwd",
                    "softmax_bwd": "softmax_bwd",
                    "sum_dim0": "sum_dim0", "sum_dim1": "sum_dim1"}

# Elementwise math of the eager torch unary ops (names priced by the profile's op_costs).
_EAGER_MATH = {"sin": "sin", "cos": "cos", "tanh": "tanh", "exp": "exp", "log": "log", "sqrt": "sqrt",
               "rsqrt": "rsqrt", "sigmoid": "sigmoid", "silu": "silu", "pow": "pow", "erf": "erf"}


def _kernels(rec: dict[str, Any]) -> list[dict[str, Any]]:
    return [k for k in rec.get("kernels") or [] if "Memset" not in str(k.get("name", ""))]


def heldout_case(rec: dict[str, Any]) -> Case | None:
    bench = rec.get("bench")
    if bench == "sum" and rec.get("dim") in (0, 1):  # the third wave's x.sum(dim) records
        rec, bench = {**rec, "bench": "reduction", "op": f"sum_dim{rec['dim']}"}, "reduction"
    if bench == "fused_bgd":
        case = _elementwise({**rec, "impl": "triton"}, "fused_heldout")
        return case
    if bench == "attention":
        kern = _kernels(rec)
        base = _attention({**rec, "bench": "sdpa_fwd"})
        if base is None or not kern:
            return None
        graph = base.graph
        if any("cudnn" in str(k.get("name", "")) for k in kern):  # the library that ran (PyTorch's default)
            fwd0 = graph.ops[0]
            graph = _graph([fwd0.with_(attrs={**fwd0.attrs, "backend": "cudnn"})], list(graph.tensors.values()))
        if rec.get("phase") == "bwd":
            fwd = graph.ops[0]
            tensors = list(graph.tensors.values()) + [Tensor(f"g{x}", tuple(graph.tensors["q"].shape), "bf16")
                                                      for x in "qkvo"]
            op = fwd.with_(name="attn_bwd", reads=("q", "k", "v", "o", "go"), writes=("gq", "gk", "gv"),
                           attrs={**fwd.attrs, "direction": "backward"})
            graph = _graph([op], tensors)
        measured = sum(float(k["duration_us"]) for k in kern)
        label = f"attention {rec['phase']} b{rec['batch']} h{rec['heads']} s{rec['seq']} d{rec['head_dim']}" + (
            " causal" if rec.get("causal") else "")
        return Case("attention_heldout", label, graph, measured, rec, profiled=True)
    if bench == "reduction":
        name = _REDUCTION_BENCH.get(str(rec.get("op")))
        if name is None:
            return None
        # the held-out sets flush L2 (a written buffer) before each profiled call unless they say otherwise
        case = _profiled_reduction({**rec, "bench": name, "kernels": rec.get("kernels"),
                                    "l2_state": rec.get("l2_state", "dirty")})
        if case is None:
            return None
        return Case("reduction_heldout", case.label, case.graph, case.measured_us, rec, profiled=True)
    if bench == "gemm":
        # the held-out sets profile GEMMs after an L2 flush (a written buffer) unless they say otherwise
        case = _gemm({**rec, "l2_state": rec.get("l2_state", "dirty")})
        return Case("gemm_heldout", case.label, case.graph, case.measured_us, rec, profiled=case.profiled)
    if bench == "copy":
        # the held-out sets profile copies after an L2 flush (a written buffer) unless they say otherwise
        case = profiled_copy({**rec, "l2_state": rec.get("l2_state", "dirty")})
        return None if case is None else dataclasses.replace(case, family="copy_heldout")
    if bench == "math_eager":
        kern = _kernels(rec)
        if not kern:
            return None
        numel = int(rec["numel"])
        t = [Tensor("x", (numel,), "bf16"), Tensor("y", (numel,), "bf16")]
        op = Op(name=str(rec["op"]), kind="elementwise", reads=("x",), writes=("y",),
                attrs=MappingProxyType({"math": MappingProxyType({_EAGER_MATH[str(rec["op"])]: 1}), "numel": numel}))
        return Case("math_heldout", f"eager {rec['op']} n={numel} (profiled)", _graph([op], t),
                    sum(float(k["duration_us"]) for k in kern), rec, profiled=True)
    return None


def heldout_cases(path: Path) -> list[Case]:
    """Every record of one held-out file that the cost model can describe."""
    doc = json.loads(Path(path).read_text())
    out = []
    for rec in doc.get("records") or []:
        case = heldout_case(rec)
        if case is not None:
            out.append(case)
    return out
