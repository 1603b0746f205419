"""Print the device's software/hardware facts and check the Triton CompiledKernel API.

    python3 -m sim.calibrate.gpu.probe
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    import torch

    from . import common

    meta = common.collect_meta()
    print(json.dumps(meta, indent=1), flush=True)
    if not torch.cuda.is_available():
        return 2
    from . import triton_kernels as K

    x = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    ck, grid = K.launch_copy(x, y)
    torch.cuda.synchronize()
    print("launch returned", type(ck).__name__, "grid", grid, flush=True)
    print("CompiledKernel attrs:", [a for a in dir(ck) if not a.startswith("__")][:60], flush=True)
    print("metadata fields:", getattr(ck.metadata, "_fields", None), flush=True)
    print("kernel_info:", common.triton_kernel_info(ck), flush=True)
    print("copy ok:", bool(torch.equal(x, y)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
