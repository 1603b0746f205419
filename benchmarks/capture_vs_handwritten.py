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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.capture import capture_factory, examples  # noqa: E402
from sim.capture.compare import compare  # noqa: E402

CASES = [
    ("mlp", examples.mlp, {"tokens": 4096, "hidden": 4096, "ffn": 16384}, ["tokens"], "mlp_bias_gelu_dropout.yaml"),
    ("transformer_block", examples.transformer_block, {"batch": 4, "seq": 1024, "d": 2048, "heads": 16, "ffn": 8192},
     ["batch", "seq"], "transformer_block.yaml"),
    ("decode", examples.decode, {"batch": 8, "cache_len": 512, "layers": 4, "d": 2048, "heads": 16, "ffn": 8192},
     ["batch", "cache_len"], "decode_step.yaml"),
]


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
            result = capture_factory(factory, params, vary=vary, name=name, module_calls=not args.no_module_calls)
            captured_path = out / f"{name}.yaml"
            result.write(captured_path)
            cap, ref = compare(captured_path, ROOT / "workloads" / shipped, hardware, tmp)
            for hw in hardware:
                c, r = cap[hw]["step"], ref[hw]["step"]
                print(f"{name:<18} {hw:<14} {c:>12.1f} {r:>12.1f} {c / r - 1:>+8.2%}")
            if result.uncosted:
                print(f"  uncosted: {result.uncosted}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
