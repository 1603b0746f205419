"""Repeat blocks: per-iteration tensor names (so fusion inside one iteration drops its intermediates),
loop-carried state, `carried` buffers, and nesting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.costmodel.pricing import price
from sim.errors import InputError
from sim.hardware import Hardware
from sim.schema.scenario import TransformSpec
from sim.transforms import Context, apply_all, check_dataflow
from sim.workload import load_workload
from tests.conftest import workload_doc, write_yaml

TENSORS = {
    "x": {"shape": ["tokens", 4096], "dtype": "bf16"},
    "b": {"shape": [4096], "dtype": "bf16"},
    "a": {"shape": ["tokens", 4096], "dtype": "bf16"},
    "g": {"shape": ["tokens", 4096], "dtype": "bf16"},
    "acc": {"shape": [4096], "dtype": "fp32"},
}
# One layer: x -> bias -> gelu -> dropout -> x (the residual stream is loop-carried).
LAYER = [
    {"name": "bias", "kind": "elementwise", "reads": ["x", "b"], "writes": ["a"], "math": {"add": 1}},
    {"name": "gelu", "kind": "elementwise", "reads": ["a"], "writes": ["g"], "math": {"gelu": 1}},
    {"name": "dropout", "kind": "elementwise", "reads": ["g"], "writes": ["x"], "math": {"rng": 1, "mul": 1}},
]


def _load(tmp_path: Path, ops: list[dict[str, Any]]) -> Any:
    doc = workload_doc(ops, TENSORS, params={"tokens": 2048, "layers": 3})
    return load_workload(write_yaml(tmp_path / "wl.yaml", doc))


def _fuse_layer(graph: Any, layer: str) -> Any:
    spec = TransformSpec.model_validate(
        {"fuse": {"ops": [f"{layer}.bias", f"{layer}.gelu", f"{layer}.dropout"], "name": f"{layer}.fused"}})
    ctx = Context("scn.yaml", "variants[0].transforms", {"tokens": 2048.0, "layers": 3.0})
    out = apply_all(graph, [spec], ctx)
    check_dataflow(graph, out, ctx)
    return out


def test_fusing_one_iteration_drops_its_intermediates(tmp_path: Path, h200: Hardware) -> None:
    wl = _load(tmp_path, [{"kind": "repeat", "name": "layer", "count": "layers", "ops": LAYER}])
    graph = wl.build(wl.params_for(wl.buckets()[0]))
    fused_graph = _fuse_layer(graph, "layer0")
    fused = fused_graph.op("layer0.fused")
    # Only the carried residual leaves the kernel: the next layer reads x, never layer 0's a or g.
    assert fused.writes == ("x@0",)
    assert set(fused.reads) == {"x", "b"}
    cost = price(fused_graph, h200)[fused_graph.index("layer0.fused")]
    assert cost is not None
    assert cost.hbm_bytes == pytest.approx(2 * 2048 * 4096 * 2 + 4096 * 2, rel=1e-6)


def test_iterations_chain_through_the_newest_version(tmp_path: Path) -> None:
    wl = _load(tmp_path, [
        {"name": "embed", "kind": "elementwise", "reads": ["b"], "writes": ["x"]},
        {"kind": "repeat", "name": "layer", "count": "layers", "ops": LAYER},
        {"name": "head", "kind": "elementwise", "reads": ["x"], "writes": ["g"]},
    ])
    graph = wl.build(wl.params_for(wl.buckets()[0]))
    io = {o.name: (o.reads, o.writes) for o in graph.ops}
    assert io["layer0.bias"] == (("x", "b"), ("a@0",))
    assert io["layer0.dropout"] == (("g@0",), ("x@0",))
    assert io["layer1.bias"] == (("x@0", "b"), ("a@1",))
    assert io["layer2.dropout"] == (("g",), ("x",))  # the last iteration keeps the declared names
    assert io["head"] == (("x",), ("g",))
    assert graph.tensors["a@1"].shape == graph.tensors["a"].shape == (2048, 4096)


def test_carried_tensor_keeps_one_name(tmp_path: Path) -> None:
    body = [*LAYER, {"name": "accum", "kind": "elementwise", "reads": ["acc", "b"], "writes": ["acc"]}]
    wl = _load(tmp_path, [{"kind": "repeat", "name": "layer", "count": 2, "carried": ["acc"], "ops": body}])
    graph = wl.build(wl.params_for(wl.buckets()[0]))
    assert graph.op("layer0.accum").writes == ("acc",)
    assert graph.op("layer0.dropout").writes == ("x@0",)


def test_carried_must_be_written_by_the_block(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"ops\[0\]\.carried\[0\].*do not write"):
        _load(tmp_path, [{"kind": "repeat", "name": "layer", "count": 2, "carried": ["b"], "ops": LAYER}])


def test_repeat_blocks_nest(tmp_path: Path) -> None:
    wl = _load(tmp_path, [{"kind": "repeat", "name": "stage", "count": 2, "ops": [
        {"name": "start", "kind": "elementwise", "reads": ["b"], "writes": ["a"]},
        {"kind": "repeat", "name": "layer", "count": 3, "ops": LAYER},
    ]}])
    graph = wl.build(wl.params_for(wl.buckets()[0]))
    names = [o.name for o in graph.ops]
    assert len(names) == 2 * (1 + 3 * 3)
    assert names[:4] == ["stage0.start", "stage0.layer0.bias", "stage0.layer0.gelu", "stage0.layer0.dropout"]
    assert names[-1] == "stage1.layer2.dropout"
    assert len(set(names)) == len(names)
    # the second stage's first layer reads the first stage's last layer's output
    assert graph.op("stage1.layer0.bias").reads == ("x@0", "b")
    assert graph.op("stage0.layer2.dropout").writes == ("x@0",)
    assert graph.op("stage0.layer1.dropout").writes == ("x@1@0",)
    assert graph.op("stage1.layer2.dropout").writes == ("x",)
    # fusion inside a nested iteration still drops its intermediates
    fused = _fuse_layer(graph, "stage0.layer1").op("stage0.layer1.fused")
    assert fused.writes == ("x@1@0",)


def test_tensor_names_may_not_use_the_iteration_marker(tmp_path: Path) -> None:
    doc = workload_doc(LAYER, {**TENSORS, "y@1": {"shape": [4], "dtype": "bf16"}}, params={"tokens": 2048})
    with pytest.raises(InputError, match="'@'"):
        load_workload(write_yaml(tmp_path / "wl.yaml", doc))
