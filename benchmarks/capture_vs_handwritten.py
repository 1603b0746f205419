"""Captured workloads vs the hand-written shipped ones: same shapes, same buckets, same profiles.

    python benchmarks/capture_vs_handwritten.py [--hardware h200-measured ...] [--out DIR]
        [--no-module-calls]

Captures sim/capture/examples.py's mlp, transformer_block and decode factories (the models
that workloads/mlp_bias_gelu_dropout.yaml, transformer_block.yaml and decode_step.yaml
describe) on the meta device, runs each captured workload and its shipped counterpart over the
shipped workload's buckets, and prints the weighted step times and their difference. Needs
torch. The shipped workloads leave out nn.Module call overhead (their comments say so);
`--no-module-calls` captures without it, for a like-for-like comparison. The shipped files
leave the attention backend to the profile's default: they are run with the backend the
capture says PyTorch picks (lowering.yaml `sdpa`), as tests/capture/test_vs_shipped.py does.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.capture import capture_factory, examples  # noqa: E402
from sim.run import load_scenario, run_scenario  # noqa: E402

CASES = [
    ("mlp", examples.mlp, {"tokens": 4096, "hidden": 4096, "ffn": 16384}, ["tokens"], "mlp_bias_gelu_dropout.yaml"),
    ("transformer_block", examples.transformer_block, {"batch": 4, "seq": 1024, "d": 2048, "heads": 16, "ffn": 8192},
     ["batch", "seq"], "transformer_block.yaml"),
    ("decode", examples.decode, {"batch": 8, "cache_len": 512, "layers": 4, "d": 2048, "heads": 16, "ffn": 8192},
     ["batch", "cache_len"], "decode_step.yaml"),
]


def weighted_us(workload: Path, buckets: list[dict[str, object]], hardware: list[str], tmp: Path) -> dict[str, float]:
    scn_path = tmp / f"{workload.stem}_scenario.yaml"
    scn_path.write_text(yaml.safe_dump({"schema": "kernelsim.scenario/v1", "name": workload.stem,
                                        "workload": str(workload), "hardware": hardware, "distribution": buckets}))
    result, _ = run_scenario(load_scenario(scn_path))
    return {hw["name"]: hw["variants"][0]["weighted_time_us"] for hw in result["hardware"]}


def _flat(ops: list[dict[str, object]]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for op in ops:
        if op.get("kind") == "repeat":
            out.extend(_flat(op["ops"]))  # type: ignore[arg-type]
        else:
            out.append(op)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", action="append", help="profiles (default: h200-measured, h100-sxm)")
    ap.add_argument("--out", type=Path, help="keep the captured workloads here")
    ap.add_argument("--no-module-calls", action="store_true")
    args = ap.parse_args()
    hardware = args.hardware or ["h200-measured", "h100-sxm"]
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        out = args.out or tmp
        out.mkdir(parents=True, exist_ok=True)
        print(f"{'workload':<18} {'hardware':<14} {'captured_us':>12} {'shipped_us':>12} {'diff':>8}")
        for name, factory, params, vary, shipped in CASES:
            shipped_path = ROOT / "workloads" / shipped
            shipped_buckets = yaml.safe_load(shipped_path.read_text())["distribution"]["buckets"]
            result = capture_factory(factory, params, vary=vary, name=name, module_calls=not args.no_module_calls)
            captured_path = out / f"{name}.yaml"
            result.write(captured_path)
            backends = {op["backend"] for op in result.workload["ops"] if op.get("backend")}
            doc = yaml.safe_load(shipped_path.read_text())
            for op in _flat(doc["ops"]):
                if op["kind"] == "attention" and backends:
                    op["backend"] = sorted(backends)[0]
            named_path = tmp / shipped
            named_path.write_text(yaml.safe_dump(doc, sort_keys=False))
            cap = weighted_us(captured_path, shipped_buckets, hardware, tmp)
            ref = weighted_us(named_path, shipped_buckets, hardware, tmp)
            for hw in hardware:
                print(f"{name:<18} {hw:<14} {cap[hw]:>12.1f} {ref[hw]:>12.1f} {cap[hw] / ref[hw] - 1:>+8.2%}")
            if result.uncosted:
                print(f"  uncosted: {result.uncosted}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
