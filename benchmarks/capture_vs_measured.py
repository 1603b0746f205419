"""Captured workloads vs H200 measurements of the same models.

    python benchmarks/capture_vs_measured.py [--hardware h200-measured] [--no-module-calls]

sim/calibrate/gpu/host_context.py measured whole eager steps of a GPT, a Llama and an MLP
(training with AdamW(foreach=True)) and a KV-cache decode step on H200s (records in
calibration/h200/host_context/{A,B,C}/host_context.json; `b2b_us` = wall time per step issued
back to back). This captures the same model classes (sim/capture/examples.py measured_*) on the
meta device at each measured shape, predicts the step, and prints predicted vs measured (the
median over the machines that measured it). Needs torch. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import warnings
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.capture import capture_factory, examples  # noqa: E402
from sim.run import load_scenario, run_scenario  # noqa: E402


def measured_steps() -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    for path in sorted((ROOT / "calibration" / "h200" / "host_context").glob("*/host_context.json")):
        for rec in json.loads(path.read_text())["records"]:
            if rec.get("bench") != "step" or rec.get("mode") != "eager":
                continue
            if rec["model"] in ("gpt", "llama", "mlp") and rec["phase"] == "train":
                out.setdefault(rec["config"], []).append(rec)
            elif rec["model"] == "gpt_decode" and rec.get("grad_mode") == "no_grad":
                out.setdefault(rec["config"], []).append(rec)
    return out


def factory_for(rec: dict[str, object]) -> tuple[object, dict[str, float]]:
    model = rec["model"]
    if model == "gpt":
        return examples.measured_gpt, {"batch": rec["B"], "seq": rec["S"]}  # type: ignore[dict-item]
    if model == "llama":
        return examples.measured_llama, {"batch": rec["B"], "seq": rec["S"]}  # type: ignore[dict-item]
    if model == "mlp":
        return examples.measured_mlp, {"tokens": rec["T"]}  # type: ignore[dict-item]
    return examples.measured_decode, {"batch": rec["B"], "cache_len": rec["L"], "max_len": rec["Lmax"]}  # type: ignore[dict-item]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="h200-measured")
    ap.add_argument("--no-module-calls", action="store_true")
    args = ap.parse_args()
    print(f"{'config':<22} {'machines':>8} {'measured_us':>12} {'predicted_us':>13} {'error':>8}")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for config, recs in measured_steps().items():
            factory, params = factory_for(recs[0])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = capture_factory(factory, params, vary=[], name=config,  # type: ignore[arg-type]
                                         module_calls=not args.no_module_calls)
            wl = tmp / f"{config}.yaml"
            result.write(wl)
            scn = tmp / f"{config}.scn.yaml"
            scn.write_text(yaml.safe_dump({"schema": "kernelsim.scenario/v1", "name": config, "workload": str(wl),
                                           "hardware": [args.hardware]}))
            res, _ = run_scenario(load_scenario(scn))
            predicted = res["hardware"][0]["variants"][0]["weighted_time_us"]
            measured = statistics.median(float(r["b2b_us"]) for r in recs)  # type: ignore[arg-type]
            note = f"  uncosted: {result.uncosted}" if result.uncosted else ""
            print(f"{config:<22} {len(recs):>8} {measured:>12.1f} {predicted:>13.1f} {predicted / measured - 1:>+8.1%}{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
