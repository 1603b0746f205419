"""docs/extending.md, run as written: its plugin file is placed in sim/ops/ (a temporary folder added
to the package's path, in a fresh interpreter: a defined kind cannot be taken back) and its registry
line is executed; then its workload and scenario are loaded, priced, simulated and imported from a
trace through the layers the plugin reached."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "extending.md"

SCRIPT = r"""
import json, sys
from pathlib import Path
import sim.ops
tmp = Path(sys.argv[1])
sim.ops.__path__.append(str(tmp))  # the plugin file sits in sim/ops/
exec((tmp / "registry_line.py").read_text())  # the documented registry line
import sim.transforms
sim.transforms.__path__.append(str(tmp / "transforms"))  # the transform file sits in sim/transforms/
exec((tmp / "transforms" / "import_line.py").read_text())

from sim.api import run
from sim.costmodel import kernel_cost, registered_kinds
from sim.graph import KERNEL_KINDS
from sim.hardware import load_profile
from sim.ingest.families import kernel_family
from sim.ingest.kineto import CpuOp, GpuActivity
from sim.ingest.shapes import infer_op
from sim.reference import op_examples, reference_markdown, transform_examples
from sim.schema.scenario import transform_keys
from sim.schema.workload import op_kinds
from sim.workload import load_workload

wl = load_workload(tmp / "workload.yaml")
graph = wl.build(wl.params_for(wl.buckets()[0]))
(op,) = graph.ops
cost = kernel_cost(op, graph, load_profile(str(Path(sys.argv[2]))))
result = run(tmp / "scenario.yaml").to_dict()
cpu = CpuOp(index=0, name="aten::histc", ts=0.0, end=1.0, tid=1, input_dims=[[32, 1024], [], [], []],
            input_types=["c10::BFloat16", "Scalar", "Scalar", "Scalar"], concrete=["", "128", "0", "0"], args={})
act = GpuActivity(index=1, name="void at::native::histogram1DKernel<float>", cat="kernel", ts=0.0, end=1.0,
                  stream=7, correlation=1)
family = kernel_family(act.name)
inferred = infer_op(family, [cpu], act, "t")
print(json.dumps({
    "kinds": list(op_kinds()), "kernel": "histogram" in KERNEL_KINDS, "costed": "histogram" in registered_kinds(),
    "example": op_examples().get("histogram"), "in_reference": "`histogram`" in reference_markdown(),
    "cost_us": cost.time_s * 1e6, "limiter": cost.limiter, "hbm_bytes": cost.hbm_bytes,
    "run": result, "family": family, "transforms": list(transform_keys()),
    "transform_example": transform_examples().get("rebin"), "inferred": inferred.fields if inferred else None,
}))
"""


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("plugin")
    plugin, registry_line, transform, import_line = _blocks("python")
    (tmp / "transforms").mkdir()
    (tmp / "transforms" / "rebin.py").write_text(transform)
    (tmp / "transforms" / "import_line.py").write_text(import_line)
    workload, scenario = _blocks("yaml")
    (tmp / "histogram.py").write_text(plugin)
    (tmp / "registry_line.py").write_text(registry_line)
    (tmp / "workload.yaml").write_text(workload)
    (tmp / "scenario.yaml").write_text(scenario)
    profile = ROOT / "tests" / "fixtures" / "profiles" / "testgpu.yaml"
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp), str(profile)], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_registry_line_is_the_shipped_registrys_form() -> None:
    (line,) = _blocks("python")[1].strip().splitlines()
    shipped = (ROOT / "sim" / "ops" / "registry.py").read_text()
    assert re.fullmatch(r"from sim\.ops import (\w+)  # noqa: F401,I001 - .*", line)
    assert re.search(r"^from sim\.ops import sortscan  # noqa: F401,I001 - ", shipped, flags=re.M)
    (line,) = _blocks("python")[3].strip().splitlines()
    assert line == "from sim.transforms import rebin  # noqa: E402,F401,I001"
    shipped = (ROOT / "sim" / "transforms" / "__init__.py").read_text()
    assert "\nfrom sim.transforms import relayout  # noqa: E402,F401,I001\n" in shipped


def test_one_file_and_one_line_list_the_kind_in_every_layer(plugin_run: dict) -> None:
    kinds = plugin_run["kinds"]
    assert kinds[-2:] == ["histogram", "repeat"]  # after the built-in and shipped plugin kinds, before repeat
    assert plugin_run["kernel"] and plugin_run["costed"] and plugin_run["in_reference"]
    assert plugin_run["example"] == "{name: expert_load, kind: histogram, numel: tokens, bins: 64}"


def test_the_cost_function_prices_the_op_by_hand(plugin_run: dict) -> None:
    # testgpu: 4000 GB/s sustained, 2 us fixed; 4096 fp32 values read, 64 fp32 counts written.
    assert plugin_run["hbm_bytes"] == 4096 * 4 + 64 * 4
    assert plugin_run["cost_us"] == pytest.approx(2.0 + (4096 * 4 + 64 * 4) / 4000e9 * 1e6, rel=1e-12)
    assert plugin_run["limiter"] == "hbm"


def test_the_scenario_runs_with_the_new_kind_and_inserts_it(plugin_run: dict) -> None:
    (hw,) = plugin_run["run"]["hardware"]
    variants = {v["name"]: v for v in hw["variants"]}
    base, twice = variants["baseline"], variants["twice"]
    for b0, b1 in zip(base["buckets"], twice["buckets"], strict=True):
        assert b0["kernels"] == 1 and b1["kernels"] == 2
        assert b1["time_us"] > b0["time_us"] > 0
    small, large = base["buckets"]
    assert large["hbm_bytes"] == 65536 * 4 + 64 * 4 and small["hbm_bytes"] == 4096 * 4 + 64 * 4


def test_a_trace_kernel_of_the_kind_imports_with_its_shapes(plugin_run: dict) -> None:
    assert plugin_run["family"] == "histogram"
    assert plugin_run["inferred"] == {"kind": "histogram", "numel": 32 * 1024, "bins": 128, "dtype": "bf16"}


def test_the_transform_file_adds_a_scenario_key_that_changes_the_op(plugin_run: dict) -> None:
    assert plugin_run["transforms"][-2:] == ["relayout", "rebin"]
    assert plugin_run["transform_example"] == "{rebin: {ops: [expert_load], bins: 128}}"
    (hw,) = plugin_run["run"]["hardware"]
    variants = {v["name"]: v for v in hw["variants"]}
    for b0, b1 in zip(variants["baseline"]["buckets"], variants["more_bins"]["buckets"], strict=True):
        assert b1["hbm_bytes"] - b0["hbm_bytes"] == (128 - 64) * 4  # 64 more fp32 counts written
