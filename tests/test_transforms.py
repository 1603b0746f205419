"""Transforms: what they remove and add (bytes, launches, recompute, layout kernels), and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.costmodel.pricing import price
from sim.errors import InputError
from sim.graph import Graph
from sim.hardware import Hardware
from sim.schema.scenario import TransformSpec
from sim.transforms import Context, apply_all, check_dataflow
from sim.workload import load_workload
from tests.conftest import ROOT

MLP = ROOT / "workloads" / "mlp_bias_gelu_dropout.yaml"
PARAMS = {"tokens": 2048.0, "hidden": 4096.0, "ffn": 16384.0}


def base() -> Graph:
    wl = load_workload(Path(MLP))
    return wl.build(dict(PARAMS))


def apply(graph: Graph, *specs: dict) -> tuple[Graph, Context]:  # type: ignore[type-arg]
    ctx = Context("scn.yaml", "variants[0].transforms", dict(PARAMS))
    out = apply_all(graph, [TransformSpec.model_validate(s) for s in specs], ctx)
    check_dataflow(graph, out, ctx)
    return out, ctx


FWD = {"fuse": {"ops": ["bias", "gelu", "dropout"], "name": "bgd_fwd", "drop_saved": ["a", "mask"]}}
BWD = {"fuse": {"ops": ["dropout_bwd", "gelu_bwd"], "name": "bgd_bwd", "recompute": ["a", "mask"],
                "extra_reads": ["h", "b1"], "recompute_math": {"add": 1, "rng": 1, "select": 1}}}


def test_fuse_removes_intermediate_bytes_and_launches(h200: Hardware) -> None:
    g = base()
    out, _ = apply(g, FWD, BWD)
    assert out.kernel_count() == g.kernel_count() - 3
    fused = out.op("bgd_fwd")
    assert set(fused.reads) == {"h", "b1"} and fused.writes == ("d",)
    before = sum(c.hbm_bytes for c, o in zip(price(g, h200), g.ops, strict=True) if c and o.name in ("bias", "gelu", "dropout"))
    after = price(out, h200)[out.index("bgd_fwd")]
    assert after is not None
    t = 2048 * 16384
    # before: h,a read+write a,g read g write d,mask: 2+2+2+2+2+2+1 = 13 bytes/elem (+ bias); after: read h, write d.
    assert before == pytest.approx(13 * t + 2 * 16384, rel=1e-6)
    assert after.hbm_bytes == pytest.approx(4 * t + 2 * 16384, rel=1e-6)
    # the math stays: add + gelu + rng + select + mul per element
    # the members' math stays (weighted by element counts): add + broadcast index + gelu + dropout's
    # RNG (PyTorch draws one Philox call per 4 elements), select and scale
    assert dict(fused.attrs["math"]) == {"add": 1.0, "broadcast_index": 1.0, "gelu": 1.0, "rng": 0.25,
                                         "select": 1.0, "mul": 1.0}


def test_fused_backward_recomputes_what_the_forward_dropped() -> None:
    out, _ = apply(base(), FWD, BWD)
    bwd = out.op("bgd_bwd")
    assert "mask" not in bwd.reads and "a" not in bwd.reads
    assert {"gd", "h", "b1"} <= set(bwd.reads)
    math = dict(bwd.attrs["math"])
    assert math["rng"] == 1.0 and math["gelu_backward"] == 1.0 and math["add"] == 1.0  # recompute is cost
    assert "mask" not in {t for o in out.ops for t in o.writes}


def test_dropping_without_recompute_is_an_error() -> None:
    bad = {"fuse": {"ops": ["dropout_bwd", "gelu_bwd"], "name": "bgd_bwd"}}
    with pytest.raises(InputError, match="reads 'mask'"):
        apply(base(), FWD, bad)


def test_fusion_that_would_create_a_cycle_is_refused() -> None:
    # gelu_bwd feeds bias_grad and fc1_dgrad; fusing gelu_bwd with fc1_wgrad's neighbour chain across a GEMM fails
    spec = {"fuse": {"ops": ["bias", "dropout"], "name": "x"}}
    with pytest.raises(InputError, match="cycle"):
        apply(base(), spec)


def test_dispatch_fallback_adds_a_layout_kernel_and_records_the_path() -> None:
    spec = {"dispatch": {"when": "tokens % 4096 == 0", "then": [FWD, BWD],
                         "else": [{"insert": {"after": "fc1", "op": {"name": "pad_copy", "kind": "layout",
                                                                      "transform": "contiguous", "reads": ["h"],
                                                                      "writes": ["h"]}}}]}}
    g = base()
    out, ctx = apply(g, spec)
    assert ctx.paths_taken == ["fallback"]
    assert out.kernel_count() == g.kernel_count() + 1
    assert out.op("pad_copy").kind == "layout"
    ctx2 = Context("scn.yaml", "v", {**PARAMS, "tokens": 4096.0})
    wl = load_workload(Path(MLP))
    g2 = wl.build({**PARAMS, "tokens": 4096.0})
    out2 = apply_all(g2, [TransformSpec.model_validate(spec)], ctx2)
    assert ctx2.paths_taken == ["fast"] and out2.kernel_count() == g2.kernel_count() - 3


def test_mode_transform_changes_host_costs_not_kernels(h200: Hardware) -> None:
    from sim.costmodel.host import host_costs
    from sim.engine import simulate

    g = base()
    out, _ = apply(g, {"mode": {"mode": "cuda_graph"}})
    kernels = [c.time_s for c in price(g, h200) if c]
    assert kernels == [c.time_s for c in price(out, h200) if c]
    eager = simulate(g, price(g, h200), host_costs(h200))
    graph = simulate(out, price(out, h200), host_costs(h200))
    # one graph replay for the whole step; the host work inside it (autograd nodes) is gone
    assert len([iv for iv in graph.host() if iv.cat == "graph_launch"]) == 1
    assert not [o for o in out.ops if o.kind == "host"]
    assert sum(iv.duration_s for iv in graph.host()) < sum(iv.duration_s for iv in eager.host())


def test_specialize_pads_a_misaligned_gemm_with_a_real_copy(h200: Hardware) -> None:
    wl = load_workload(Path(MLP))
    g = wl.build({**PARAMS, "tokens": 1001.0})
    ctx = Context("scn.yaml", "v", {**PARAMS, "tokens": 1001.0})
    spec = {"specialize": {"op": "fc2_wgrad", "when": "tokens % 8 != 0", "pad": {"k": "round_up(k, 64)"}}}
    out = apply_all(g, [TransformSpec.model_validate(spec)], ctx)
    assert ctx.paths_taken == ["specialized"]
    assert out.op("fc2_wgrad").attrs["k"] == 1024
    assert out.op("fc2_wgrad__pad").kind == "layout"
    assert out.kernel_count() == g.kernel_count() + 1


def test_relayout_inserts_conversion_and_rewires_consumers() -> None:
    spec = {"relayout": {"tensor": "d", "consumers": ["fc2_wgrad"], "conversion": "transpose"}}
    out, _ = apply(base(), spec)
    conv = out.op("d__to_transpose")
    assert conv.kind == "layout" and out.index("d__to_transpose") == out.index("dropout") + 1
    assert "d__transpose" in out.op("fc2_wgrad").reads and "d" in out.op("fc2").reads


def test_swap_needs_the_library_in_the_profile(h200: Hardware) -> None:
    from sim.errors import UncostedOpError

    out, _ = apply(base(), {"swap": {"kind": "gemm", "library": "cutlass"}})
    with pytest.raises(UncostedOpError, match="library 'cutlass'"):
        price(out, h200)


def test_unknown_op_in_transform_names_the_key() -> None:
    with pytest.raises(InputError, match=r"variants\[0\]\.transforms\[0\]\.fuse\.ops\[1\]"):
        apply(base(), {"fuse": {"ops": ["bias", "gelu9"], "name": "x"}})
