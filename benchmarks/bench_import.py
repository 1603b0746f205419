"""Peak memory (and time) of importing a large trace: a synthetic Kineto trace of ~200 MB.

    python benchmarks/bench_import.py [--mb 200] [--keep PATH] [--baseline]

Writes the trace (plain JSON, streamed), then imports one step in a fresh child process
and reports that process's peak RSS (ru_maxrss) and wall time. `--baseline` also
measures `json.load` of the same file, for comparison. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.ingest.synthetic import synthetic_events, write_events  # noqa: E402

CHILD_IMPORT = """
import resource, sys, time
from pathlib import Path
t = time.perf_counter()
from sim.ingest import import_trace, workload_yaml
step = import_trace(Path(sys.argv[1]), sys.argv[2])
text = workload_yaml(step, Path(sys.argv[1]))
dt = time.perf_counter() - t
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, dt, len(step.ops), len(step.events.steps))
"""
CHILD_JSON_LOAD = """
import json, resource, sys, time
t = time.perf_counter()
with open(sys.argv[1]) as fh:
    doc = json.load(fh)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter() - t, len(doc["traceEvents"]), 0)
"""
CHILD_BARE = """
import resource
import sim.ingest, sim.replay
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, 0, 0, 0)
"""


def _child(code: str, *args: str) -> tuple[float, float, int, int]:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, cwd=ROOT)
    rss_kb, dt, n, steps = out.stdout.split()
    return int(rss_kb) / 1024, float(dt), int(n), int(steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="trace size to write, MB")
    ap.add_argument("--layers", type=int, default=8, help="layers per synthetic step")
    ap.add_argument("--keep", type=Path, help="write the trace here and keep it")
    ap.add_argument("--baseline", action="store_true", help="also measure json.load of the whole file")
    args = ap.parse_args()
    path = args.keep or Path(tempfile.mkdtemp()) / "big_trace.json"
    # Size one step, then write enough steps for the target size.
    probe = Path(tempfile.mkdtemp()) / "probe.json"
    with probe.open("w") as fh:
        write_events(fh, synthetic_events(steps=10, layers=args.layers))
    steps = max(2, int(args.mb * 1e6 / (probe.stat().st_size / 10)))
    t = time.perf_counter()
    with path.open("w") as fh:
        write_events(fh, synthetic_events(steps=steps, layers=args.layers))
    size_mb = path.stat().st_size / 1e6
    print(f"wrote {path}: {size_mb:.0f} MB, {steps} steps in {time.perf_counter() - t:.1f} s")
    bare, _, _, _ = _child(CHILD_BARE)
    mid = str(steps // 2)
    rss, dt, nops, nsteps = _child(CHILD_IMPORT, str(path), mid)
    print(f"python + kernelsim imported, no trace: peak RSS {bare:.0f} MiB")
    print(f"import-trace (step {mid} of {nsteps}, {nops} ops): peak RSS {rss:.0f} MiB, {dt:.1f} s "
          f"({size_mb / dt:.0f} MB/s over two passes)")
    if args.baseline:
        rss_j, dt_j, n, _ = _child(CHILD_JSON_LOAD, str(path))
        print(f"json.load of the whole file ({n} events): peak RSS {rss_j:.0f} MiB, {dt_j:.1f} s")
    print(json.dumps({"trace_mb": round(size_mb, 1), "peak_rss_mib": round(rss, 1),
                      "baseline_rss_mib": round(bare, 1), "import_s": round(dt, 2)}))
    if args.keep is None:
        path.unlink()


if __name__ == "__main__":
    main()
