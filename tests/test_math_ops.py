"""Elementwise math ops: every shipped profile prices the common math functions (estimates that say so,
or measured numbers with their raw data and fit),
a chain using them is not free, and an unknown math op is an input error at its key path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sim.costmodel.pricing import price
from sim.errors import InputError
from sim.hardware import load_profile
from sim.run import load_scenario
from sim.workload import load_workload
from tests.conftest import ROOT, workload_doc, write_yaml

ESTIMATED = ("sin", "cos", "tan", "atan", "log", "log2", "log1p", "exp2", "expm1", "sqrt", "reciprocal", "sigmoid",
             "silu", "softplus", "pow", "erfinv", "abs", "minmax")
PROFILES = sorted(p for p in (ROOT / "hardware_profiles").glob("*.yaml") if "op_costs" in p.read_text())


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_profiles_price_common_math_as_estimates(path: Path) -> None:
    costs = yaml.safe_load(path.read_text())["compute"]["op_costs"]
    for name in ESTIMATED:
        entry = costs[name]
        assert ((entry["source"] == "estimate" and entry["note"])
                or (entry["source"] == "measured" and entry["raw"] and entry["fit"])), (path.name, name)
        assert entry.get("fp32", 0) + entry.get("sfu", 0) + entry.get("int", 0) > 0, (path.name, name)
    hw = load_profile(str(path))
    assert all(name in hw.op_costs for name in ESTIMATED)


def test_a_chain_of_sin_is_not_free(tmp_path: Path) -> None:
    tensors = {"x": {"shape": [8192, 8192], "dtype": "fp32"}, "y": {"shape": [8192, 8192], "dtype": "fp32"}}
    ops = [{"name": "f", "kind": "elementwise", "reads": ["x"], "writes": ["y"], "math": {"sin": 4, "cos": 4}}]
    graph = load_workload(write_yaml(tmp_path / "w.yaml", workload_doc(ops, tensors))).build({"n": 1})
    free = graph.with_ops([graph.ops[0].with_(attrs={**graph.ops[0].attrs, "math": {}})])
    hw = load_profile("h200-measured")
    (priced,), (copy,) = price(graph, hw), price(free, hw)
    assert priced is not None and copy is not None
    assert priced.compute_s > copy.compute_s * 10 and priced.time_s > copy.time_s


def test_unknown_math_op_names_file_and_key(tmp_path: Path) -> None:
    tensors = {"x": {"shape": [1024], "dtype": "fp32"}}
    ops = [{"name": "g", "kind": "elementwise", "reads": ["x"], "writes": ["x"]},
           {"kind": "repeat", "name": "layer", "count": 2,
            "ops": [{"name": "f", "kind": "elementwise", "reads": ["x"], "writes": ["x"], "math": {"sinh": 1}}]}]
    write_yaml(tmp_path / "w.yaml", workload_doc(ops, tensors))
    (tmp_path / "s.yaml").write_text("schema: kernelsim.scenario/v1\nname: t\nworkload: w.yaml\nhardware: [h200-sxm]\n")
    with pytest.raises(InputError, match=r"w\.yaml: ops\[1\]\.ops\[0\]\.math\.sinh.*math op 'sinh' has no cost"):
        load_scenario(tmp_path / "s.yaml")


def test_unknown_math_op_in_a_fusion_names_the_scenario_key(tmp_path: Path) -> None:
    tensors = {"x": {"shape": [1024], "dtype": "fp32"}, "y": {"shape": [1024], "dtype": "fp32"}}
    ops = [{"name": "f", "kind": "elementwise", "reads": ["x"], "writes": ["y"]},
           {"name": "g", "kind": "elementwise", "reads": ["y"], "writes": ["x"]}]
    write_yaml(tmp_path / "w.yaml", workload_doc(ops, tensors))
    doc = {"schema": "kernelsim.scenario/v1", "name": "t", "workload": "w.yaml", "hardware": ["h200-sxm"],
           "variants": [{"name": "v", "transforms": [{"fuse": {"ops": ["f", "g"], "name": "fg", "math": {"cosh": 1}}}]}]}
    write_yaml(tmp_path / "s.yaml", doc)
    with pytest.raises(InputError, match=r"s\.yaml: variants\[0\]\.transforms\[0\]\.fuse\.math\.cosh"):
        load_scenario(tmp_path / "s.yaml")
