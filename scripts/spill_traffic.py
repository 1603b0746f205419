"""Local-memory (spill) traffic of the harness's Triton configs, compiled offline, without a GPU (issue 18).

Triton reports a spilling kernel's `n_spills` as its local-memory size per thread in 4-byte words (the
CUDA function attribute LOCAL_SIZE_BYTES / 4): a footprint, not a traffic. What a thread moves is the sum
of its local loads and stores (LDL/STL), which ptxas prints with `-v` ("N bytes spill stores, M bytes
spill loads") and which the SASS shows instruction by instruction. The fused bias+GELU+dropout kernels
have no loops (one block of straight-line code per thread), so the static counts are the per-thread
traffic of one launch.

This compiles every config (kernel, BLOCK, num_warps) of the harness's fused-kernel records for sm_90a
with Triton's own compiler and its bundled ptxas/nvdisasm, exactly as the device run's JIT did (bf16
tensors, 16-aligned pointers, element counts divisible by 16, STORE_MASK off), checks that the compile
reproduces the registers and local size the device recorded, and writes per config the footprint and the
traffic. It needs triton (the version the measurements used, 3.6.0: `pip install triton==3.6.0` in a
separate virtual environment; no GPU, no CUDA driver); run it with that environment's python:

    /path/to/venv/bin/python scripts/spill_traffic.py --out calibration/h200/spill_traffic/triton-3.6.0.json

Read by sim.calibrate.spill_traffic (no triton needed there).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SOURCES = ("validation/h200/heldout_kernels/A.json", "validation/h200/heldout_kernels/C.json",
           "validation/h200/machine_F/heldout_kernels.json", "validation/h200/wave4/heldout_l2/heldout_l2.json",
           "calibration/h200/raw/register_sweep.json", "calibration/h200/raw/register_small.json",
           "calibration/h200/raw/elementwise.json", "calibration/h200/wave12_M/raw/register_sweep.json",
           "calibration/h200/wave12_M/raw/register_small.json")
KERNELS = ("bias_gelu_dropout_fwd", "bias_gelu_dropout_bwd")
# the harness's argument lists (sim/calibrate/gpu/triton_kernels.launch_bgd_fwd / launch_bgd_bwd)
SIGNATURES = {
    "bias_gelu_dropout_fwd": {"h_ptr": "*bf16", "b_ptr": "*bf16", "y_ptr": "*bf16", "mask_ptr": "*bf16",
                              "n": "i32", "N": "i32", "p": "fp32", "seed": "i32",
                              "BLOCK": "constexpr", "STORE_MASK": "constexpr"},
    "bias_gelu_dropout_bwd": {"gy_ptr": "*bf16", "h_ptr": "*bf16", "b_ptr": "*bf16", "gh_ptr": "*bf16",
                              "n": "i32", "N": "i32", "p": "fp32", "seed": "i32", "BLOCK": "constexpr"},
}
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_LOCAL = re.compile(r"\b(LDL|STL)((?:\.[A-Z0-9]+)*)\b")
_WIDTH = {"64": 8, "128": 16, "U8": 1, "S8": 1, "U16": 2, "S16": 2}  # bytes per access; plain = 4


def recorded_configs(root: Path, extra: tuple[str, ...] = ()) -> dict[tuple[str, int, int], set[tuple[int, int]]]:
    """(kernel, BLOCK, num_warps) -> the (n_regs, n_spills) pairs the device recorded for it."""
    out: dict[tuple[str, int, int], set[tuple[int, int]]] = {}
    for rel in SOURCES + extra:
        path = root / rel
        if not path.is_file():
            continue
        for r in json.loads(path.read_text()).get("records", []):
            if (isinstance(r, dict) and r.get("kernel") in KERNELS and r.get("dtype", "bfloat16") == "bfloat16"
                    and r.get("n_regs") is not None and r.get("BLOCK") and r.get("num_warps")):
                key = (r["kernel"], int(r["BLOCK"]), int(r["num_warps"]))
                out.setdefault(key, set()).add((int(r["n_regs"]), int(r.get("n_spills") or 0)))
    return out


def _kernels_module() -> Any:
    spec = importlib.util.spec_from_file_location("_harness_triton_kernels",
                                                  ROOT / "sim" / "calibrate" / "gpu" / "triton_kernels.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sass_reuse_module() -> Any:
    """sim/calibrate/sass_reuse.py, loaded by path (this script runs where sim's dependencies may be absent)."""
    spec = importlib.util.spec_from_file_location("_sass_reuse", ROOT / "sim" / "calibrate" / "sass_reuse.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compile_one(kernel: str, block: int, num_warps: int, K: Any) -> dict[str, Any]:
    """Compile one config for sm_90a; its registers, local size and local-memory traffic per thread."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(K, kernel + "_kernel")
    sig = SIGNATURES[kernel]
    names = list(sig)
    constexprs: dict[tuple[int, ...], Any] = {(names.index("BLOCK"),): block}
    if "STORE_MASK" in sig:
        constexprs[(names.index("STORE_MASK"),)] = False
    # what the JIT specialises for 16-aligned tensors and element counts divisible by 16 (n, N)
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if sig[n].startswith("*") or n in ("n", "N")}
    ck = triton.compile(ASTSource(fn, sig, constexprs=constexprs, attrs=attrs),
                        target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
    bindir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "k.ptx").write_text(ck.asm["ptx"])
        (Path(d) / "k.cubin").write_bytes(ck.asm["cubin"])
        log = subprocess.run([str(bindir / "ptxas"), "-v", "--gpu-name=sm_90a", f"{d}/k.ptx", "-o", f"{d}/v.cubin"],
                             capture_output=True, text=True, check=True).stderr
        sass = subprocess.run([str(bindir / "nvdisasm"), "-c", f"{d}/k.cubin"],
                              capture_output=True, text=True, check=True).stdout
    frame = _PTXAS_FRAME.search(log)
    regs = _PTXAS_REGS.search(log)
    assert frame and regs, log
    counts: Counter[str] = Counter()
    sass_bytes = {"LDL": 0, "STL": 0}
    for op, mods in _LOCAL.findall(sass):
        width = next((_WIDTH[m] for m in mods.split(".")[1:] if m in _WIDTH), 4)
        counts[op + mods] += 1
        sass_bytes[op] += width
    branches = len(re.findall(r"\bBRA\b", sass))
    return {"kernel": kernel, "BLOCK": block, "num_warps": num_warps,
            "elements_per_thread": block / (32 * num_warps),
            "n_regs": int(regs.group(1)), "stack_frame_bytes": int(frame.group(1)),
            "n_spills": int(frame.group(1)) // 4,
            "spill_store_bytes": int(frame.group(2)), "spill_load_bytes": int(frame.group(3)),
            "sass_stl_bytes": sass_bytes["STL"], "sass_ldl_bytes": sass_bytes["LDL"],
            "sass_local_ops": dict(sorted(counts.items())), "sass_branches": branches,
            # per local load: bytes the thread touched since that word's last access (sim.calibrate.sass_reuse)
            "ldl_reload_distances": [list(p) for p in _sass_reuse_module().reload_distances(sass)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "calibration/h200/spill_traffic/triton-3.6.0.json")
    ap.add_argument("--only-spilling", action="store_true", help="compile only configs the device saw spill")
    ap.add_argument("--records", nargs="*", default=[], metavar="FILE",
                    help="more harness record files (relative to the repository) whose configs to compile")
    args = ap.parse_args(argv)
    try:
        import triton  # noqa: F401
    except ImportError:
        print("error: scripts/spill_traffic.py: triton is not importable (expected triton 3.6.0 in this python: "
              "pip install triton==3.6.0 in a separate virtual environment)", file=sys.stderr)
        return 2
    K = _kernels_module()
    recorded = recorded_configs(ROOT, tuple(args.records))
    rows = []
    for key in sorted(recorded):
        if args.only_spilling and not any(s for _, s in recorded[key]):
            continue
        t0 = time.time()
        row = compile_one(*key, K)
        row["device_recorded"] = sorted([list(p) for p in recorded[key]])
        row["matches_device"] = [row["n_regs"], row["n_spills"]] in row["device_recorded"]
        rows.append(row)
        print(f"{key[0]:24s} BLOCK={key[1]:6d} w={key[2]:2d} regs={row['n_regs']:3d} spills={row['n_spills']:5d} "
              f"st={row['spill_store_bytes']:6d} ld={row['spill_load_bytes']:6d} device={row['device_recorded']} "
              f"match={row['matches_device']} ({time.time() - t0:.1f} s)", flush=True)
    import triton as _t
    bindir = Path(_t.__file__).parent / "backends" / "nvidia" / "bin"
    ptxas_version = subprocess.run([str(bindir / "ptxas"), "--version"], capture_output=True, text=True).stdout
    doc = {"meta": {"what": "local-memory traffic per thread of the harness's fused Triton configs, compiled "
                            "offline for sm_90a (no GPU): ptxas -v spill bytes and nvdisasm LDL/STL counts, "
                            "and each local load's reload distance in the SASS order",
                    "command": "python scripts/spill_traffic.py" + (" --only-spilling" if args.only_spilling else ""),
                    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "triton": _t.__version__, "ptxas": ptxas_version.strip().splitlines()[-1],
                    "python": platform.python_version(), "host": "CPU VM (no GPU)",
                    "kernel_source": "sim/calibrate/gpu/triton_kernels.py",
                    "sources": list(SOURCES) + list(args.records)},
           "records": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out} ({len(rows)} configs, {sum(r['matches_device'] for r in rows)} match the device)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="spill_traffic_"))
    sys.exit(main())
