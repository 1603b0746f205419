"""Acceptance: the captured MLP, transformer block and decode step (tests/fixtures/capture/
*.captured.yaml, made by make_fixtures.py from sim/capture/examples.py) predict within 3 % of
the hand-written shipped workloads, over the shipped buckets, on measured and datasheet profiles.

Both sides are priced by the same models: host time by framework op (`framework_op`, the
profile's host table where it has one), no nn.Module call overhead on either side (the shipped
files count it inside the table's in-context costs), and attention on the backend the capture
says PyTorch runs (the shipped training block describes cuDNN's kernels but leaves the backend
to the profile's default; here it is named on both sides)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sim.capture.compare import captured_backends, compare, flat_ops, name_backend
from sim.run import load_scenario, run_scenario
from tests.capture.conftest import CAPTURE

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [("mlp", "mlp_bias_gelu_dropout.yaml"), ("transformer_block", "transformer_block.yaml"),
         ("decode", "decode_step.yaml")]


@pytest.mark.parametrize(("captured", "shipped"), PAIRS)
def test_captured_predicts_within_3_percent_of_shipped(captured: str, shipped: str, tmp_path: Path) -> None:
    cap_path = CAPTURE / f"{captured}.captured.yaml"
    cap_doc = yaml.safe_load(cap_path.read_text())
    ship_doc = yaml.safe_load((ROOT / "workloads" / shipped).read_text())
    assert cap_doc["distribution"] == ship_doc["distribution"]
    assert not any("module_calls" in op for op in cap_doc["ops"])
    backends = captured_backends(cap_doc)
    assert len(backends) <= 1
    # the shipped files leave the backend to the profile's default (None) or name the captured one
    assert all(op.get("backend") in (None, *backends) for op in flat_ops(ship_doc["ops"]) if op["kind"] == "attention")
    assert bool(name_backend(ship_doc, backends)) == bool(backends)
    hardware = ["h200-measured", "h100-sxm"]
    cap, ref = compare(cap_path, ROOT / "workloads" / shipped, hardware, tmp_path)
    for hw in hardware:
        # the same kernels at the same shapes
        assert cap[hw]["kernels"] == ref[hw]["kernels"]
        assert abs(cap[hw]["kernel"] / ref[hw]["kernel"] - 1) < 0.01, (hw, cap[hw], ref[hw])
    # the step, host work included: the measured profile prices framework calls from its host
    # table, the datasheet one by op kind (a Linear's t and views are inside its call on both)
    for hw in hardware:
        assert abs(cap[hw]["step"] / ref[hw]["step"] - 1) < 0.03, (hw, cap[hw], ref[hw])


def test_compare_leaves_the_shipped_file_alone(tmp_path: Path) -> None:
    shipped = ROOT / "workloads" / "decode_step.yaml"
    before = shipped.read_bytes()
    compare(CAPTURE / "decode.captured.yaml", shipped, ["h100-sxm"], tmp_path)
    assert shipped.read_bytes() == before and (tmp_path / "decode_step.yaml").exists()


def test_whatif_on_captured_workload_runs_by_module_path(tmp_path: Path) -> None:
    captured = (CAPTURE / "mlp.captured.yaml").read_bytes()
    scenario = yaml.safe_load((CAPTURE / "mlp_whatif.yaml").read_text())
    assert scenario["workload"] == "mlp.captured.yaml"  # the captured file as it was written, no edit
    result, _ = run_scenario(load_scenario(CAPTURE / "mlp_whatif.yaml", ["h200-measured"]))
    assert (CAPTURE / "mlp.captured.yaml").read_bytes() == captured
    variants = {v["name"]: v for v in result["hardware"][0]["variants"]}
    assert set(variants) == {"baseline", "fused_act", "cuda_graph", "compiled"}
    fused = variants["fused_act"]["buckets"][0]
    base = variants["baseline"]["buckets"][0]
    # bias + GELU + dropout forward and their backward each became one kernel
    assert base["kernels"] - fused["kernels"] == 4
    assert fused["hbm_bytes"] < base["hbm_bytes"]
    # one CUDA graph launch instead of eager dispatch per op; the compiled step fuses `act` both ways
    graph = variants["cuda_graph"]["buckets"][0]
    assert graph["kernels"] == base["kernels"] and graph["host_busy_us"] < base["host_busy_us"] / 4
    assert variants["compiled"]["buckets"][0]["kernels"] == fused["kernels"]
