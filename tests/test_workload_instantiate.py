"""Repeat blocks are evaluated once and copied per iteration: the same ops as expanding them op by op."""

from __future__ import annotations

import pytest

from sim.errors import InputError
from sim.schema.workload import WorkloadFile
from sim.workload import _instantiated_ops, build_op, flat_ops, load_workload
from tests.conftest import ROOT, workload_doc


def _reference(spec: WorkloadFile, params: dict[str, float]) -> list:
    return [build_op(o, params, file="w.yaml", path=p, mode=spec.mode) for o, p in flat_ops(spec, params, "w.yaml")]


@pytest.mark.parametrize("path", sorted((ROOT / "workloads").glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_workloads_build_the_same_ops(path) -> None:
    wl = load_workload(path)
    for b in wl.buckets():
        params = wl.params_for(b)
        assert _instantiated_ops(wl.spec, params, "w.yaml") == _reference(wl.spec, params)


def _block_doc(count: str) -> dict:
    return workload_doc(
        ops=[{"name": "pre", "kind": "elementwise", "reads": ["x"], "writes": ["x"]},
             {"kind": "repeat", "name": "layer", "count": count, "ops": [
                 {"name": "a", "kind": "elementwise", "reads": ["x"], "writes": ["y"]},
                 {"name": "b", "kind": "copy", "reads": ["y"], "writes": ["x"], "stream": 1, "after": ["a", "pre"]},
                 {"name": "c", "kind": "gemm", "m": "n", "n": "n", "k": "n", "reads": ["x", "y"], "writes": ["y"]}]}],
        tensors={"x": {"shape": ["n", "n"], "dtype": "bf16"}, "y": {"shape": ["n", "n"], "dtype": "bf16"}},
        params={"n": 64, "layers": 3})


def test_after_links_inside_a_block_are_renamed_per_iteration() -> None:
    spec = WorkloadFile.model_validate(_block_doc("layers"))
    ops = _instantiated_ops(spec, dict(spec.parameters), "w.yaml")
    assert ops == _reference(spec, dict(spec.parameters))
    assert [o.name for o in ops] == ["pre"] + [f"layer{r}.{n}" for r in range(3) for n in "abc"]
    assert ops[5].after == ("layer1.a", "pre")
    assert ops[1].attrs is ops[4].attrs  # evaluated once, shared by every iteration


def test_zero_iterations_and_errors_match_the_reference() -> None:
    spec = WorkloadFile.model_validate(_block_doc("layers - 3"))
    assert _instantiated_ops(spec, dict(spec.parameters), "w.yaml") == _reference(spec, dict(spec.parameters))
    bad = WorkloadFile.model_validate(_block_doc("layers - 4"))
    with pytest.raises(InputError) as ours:
        _instantiated_ops(bad, dict(bad.parameters), "w.yaml")
    with pytest.raises(InputError) as ref:
        _reference(bad, dict(bad.parameters))
    assert str(ours.value) == str(ref.value) and ours.value.path == "ops[1].count"


def test_nested_blocks_and_carried_tensors_match_the_reference() -> None:
    doc = _block_doc("layers")
    doc["ops"][1]["carried"] = ["x"]
    doc["ops"][1]["ops"].append({"kind": "repeat", "name": "micro", "count": 2, "ops": [
        {"name": "d", "kind": "elementwise", "reads": ["y"], "writes": ["y"], "after": ["c"]}]})
    spec = WorkloadFile.model_validate(doc)
    ops = _instantiated_ops(spec, dict(spec.parameters), "w.yaml")
    assert ops == _reference(spec, dict(spec.parameters))
    assert "layer1.micro0.d" in [o.name for o in ops]
    assert any("@" in t for o in ops for t in o.writes)  # per-iteration tensor names
