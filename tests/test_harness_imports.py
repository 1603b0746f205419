"""The GPU measurement harness runs on the device machines, which have torch but none of
kernelsim's own dependencies: every harness module must import with pydantic, simpy and yaml absent (triton_kernels needs triton, which the device has)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = sorted(p.stem for p in (ROOT / "sim" / "calibrate" / "gpu").glob("*.py") if p.stem not in ("__init__", "triton_kernels"))

BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"pydantic", "simpy", "yaml", "rich"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
import importlib
importlib.import_module(sys.argv[1])
"""


@pytest.mark.parametrize("module", HARNESS)
def test_harness_module_imports_without_kernelsim_dependencies(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", BLOCK, f"sim.calibrate.gpu.{module}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
