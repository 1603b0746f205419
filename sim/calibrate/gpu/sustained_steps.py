"""The MLP training step (validation workload A, eager) in steady state under the power cap.

    python3 -m sim.calibrate.gpu.sustained_steps --out DIR [--seconds 3]

For each token count, steps run back to back for `seconds` (the clocks settle under the power
limit), then 20 more steps are timed one by one with CUDA events. Writes
DIR/mlp_step_sustained.json (a validation file: the `clock: sustained` setting predicts it).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from . import common


def run(out_dir: str, seconds: float) -> None:
    import torch

    from .workloads import MLP

    records: list[dict[str, Any]] = []
    for T in (2048, 4096, 16384):
        mlp = MLP(T)
        fwd = mlp.make_forward("eager")

        def step(mlp: Any = mlp, fwd: Any = fwd) -> None:
            fwd(mlp.x, mlp.W1, mlp.b1, mlp.W2).backward(mlp.gy)
            mlp.zero_grad()

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        deadline = time.time() + seconds
        n_warm = 0
        while time.time() < deadline:
            step()
            n_warm += 1
            if n_warm % 8 == 0:
                torch.cuda.synchronize()
        samples = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step()
            e.record()
            samples.append((s, e))
        torch.cuda.synchronize()
        times = sorted(s.elapsed_time(e) * 1e3 for s, e in samples)
        rec = {"workload": "mlp", "variant": "eager", "T": T, "H": mlp.H, "F": mlp.F, "p": mlp.p,
               "warm_seconds": seconds, "warm_steps": n_warm, "time_us": times[len(times) // 2],
               "samples_us": [round(t, 3) for t in times]}
        records.append(rec)
        common.log(f"mlp T={T} sustained: {rec['time_us']:.1f} us after {n_warm} warm steps")
        del mlp
        torch.cuda.empty_cache()
    common.write_group(out_dir, "mlp_step_sustained", records, "sim.calibrate.gpu.sustained_steps")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ns = ap.parse_args()
    run(ns.out, ns.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
