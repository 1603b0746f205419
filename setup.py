"""Build hook: copy the shipped data folders into the wheel as sim/_shipped (see sim/resources.py).

Everything else is in pyproject.toml. The folders stay where users edit them, at the top of the
repository: one source of truth, copied only into built packages.
"""

import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_kernelsim_resources", ROOT / "sim" / "resources.py")
assert _spec is not None and _spec.loader is not None
_resources = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_resources)
SHIPPED_DIRS = _resources.SHIPPED_DIRS  # the one list, in sim/resources.py


class BuildPyWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout in place
        root = ROOT
        target = Path(self.build_lib) / "sim" / "_shipped"
        for rel in SHIPPED_DIRS:
            src = root / rel
            if src.is_dir():
                shutil.copytree(src, target / rel, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
