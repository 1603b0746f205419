"""run --kineto: a simulated step as a Kineto trace that Kineto readers load (issue 21)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim import api
from sim.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("scenario", ["bias_gelu_dropout.yaml", "counter_case_fusion.yaml"])
def test_kineto_export_reimports_to_the_simulated_step(scenario: str, tmp_path: Path) -> None:
    out, js = tmp_path / "kineto", tmp_path / "run.json"
    assert main(["run", str(ROOT / "scenarios" / scenario), "--hardware", "h200-measured", "--kineto", str(out),
                 "--trace-bucket", "1", "--json", str(js), "--quiet"]) == 0
    result = json.loads(js.read_text())
    for v in result["hardware"][0]["variants"]:
        path = out / f"h200-measured__{v['name']}.json"
        doc = json.loads(path.read_text())
        events = doc["traceEvents"]
        kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
        runtime = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"}
        assert kernels and all(e["args"]["correlation"] in runtime for e in kernels)
        assert len(kernels) == v["buckets"][1]["kernels"]
        # kernelsim's own Kineto importer reads it back; a measured replay reproduces the step
        rep = api.replay(path, "h200-measured")
        assert rep.measured_time_us == pytest.approx(v["buckets"][1]["time_us"], rel=1e-3)
        assert rep.predicted_time_us == pytest.approx(rep.measured_time_us, rel=1e-3)
        assert rep.to_dict()["kernels"] == len(kernels)
