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

from sim.run import load_scenario, run_scenario
from tests.capture.conftest import CAPTURE

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [("mlp", "mlp_bias_gelu_dropout.yaml"), ("transformer_block", "transformer_block.yaml"),
         ("decode", "decode_step.yaml")]


def run(workload: Path, tmp_path: Path, hardware: list[str]) -> dict[str, dict[str, float]]:
    """Per profile: weighted step time, weighted kernel time, kernels per step (first bucket)."""
    scn = tmp_path / f"{workload.stem}.scn.yaml"
    scn.write_text(yaml.safe_dump({"schema": "kernelsim.scenario/v1", "name": "cmp", "workload": str(workload),
                                   "hardware": hardware}))
    result, _ = run_scenario(load_scenario(scn))
    out = {}
    for hw in result["hardware"]:
        v = hw["variants"][0]
        out[hw["name"]] = {"step": v["weighted_time_us"],
                           "kernel": sum(b["kernel_time_us"] * b["weight"] for b in v["buckets"]),
                           "kernels": v["buckets"][0]["kernels"]}
    return out


@pytest.mark.parametrize(("captured", "shipped"), PAIRS)
def test_captured_predicts_within_3_percent_of_shipped(captured: str, shipped: str, tmp_path: Path) -> None:
    cap_path = CAPTURE / f"{captured}.captured.yaml"
    cap_doc = yaml.safe_load(cap_path.read_text())
    ship_doc = yaml.safe_load((ROOT / "workloads" / shipped).read_text())
    assert cap_doc["distribution"] == ship_doc["distribution"]
    assert not any("module_calls" in op for op in cap_doc["ops"])
    backends = {op["backend"] for op in cap_doc["ops"] if op["kind"] == "attention"}
    assert len(backends) <= 1
    named = 0
    for op in _flat(ship_doc["ops"]):
        if op["kind"] == "attention" and backends:
            assert op.get("backend") in (None, *backends)
            op["backend"] = next(iter(backends))
            named += 1
    assert bool(named) == bool(backends)
    ship_path = tmp_path / shipped
    ship_path.write_text(yaml.safe_dump(ship_doc, sort_keys=False))
    hardware = ["h200-measured", "h100-sxm"]
    cap = run(cap_path, tmp_path, hardware)
    ref = run(ship_path, tmp_path, hardware)
    for hw in hardware:
        # the same kernels at the same shapes
        assert cap[hw]["kernels"] == ref[hw]["kernels"]
        assert abs(cap[hw]["kernel"] / ref[hw]["kernel"] - 1) < 0.01, (hw, cap[hw], ref[hw])
    # the step, host work included: the measured profile prices framework calls from its host
    # table, the datasheet one by op kind (a Linear's t and views are inside its call on both)
    for hw in hardware:
        assert abs(cap[hw]["step"] / ref[hw]["step"] - 1) < 0.03, (hw, cap[hw], ref[hw])


def _flat(ops: list[dict[str, object]]) -> list[dict[str, object]]:
    """The ops of a workload, repeat blocks' bodies included (their dicts, editable in place)."""
    out: list[dict[str, object]] = []
    for op in ops:
        if op.get("kind") == "repeat":
            out.extend(_flat(op["ops"]))  # type: ignore[arg-type]
        else:
            out.append(op)
    return out


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
