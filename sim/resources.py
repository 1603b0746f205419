"""Where the data shipped with kernelsim lives: the repository checkout, or the installed package.

One source of truth: the top-level folders of the repository (`hardware_profiles/`, `scenarios/`,
`workloads/`, `validation/`, `calibration/h200/raw/`). A checkout or an editable install reads them
in place; building a wheel copies them into the package as `sim/_shipped/` (setup.py), keeping
their relative layout, so a validation cases file's `../../scenarios/...` resolves the same way.
"""

from __future__ import annotations

from pathlib import Path

#: Top-level folders copied into the package at build time (setup.py reads this list).
SHIPPED_DIRS = ("hardware_profiles", "scenarios", "workloads", "validation", "calibration/h200/raw",
                # validate's host-time rows (real-model steps and traces) and collectives on two GPUs
                "calibration/h200/host_context", "calibration/h200x2/comm",
                # local-memory traffic of the harness's spilling Triton configs (sim.calibrate.spill_traffic)
                "calibration/h200/spill_traffic")

_PACKAGE = Path(__file__).resolve().parent


def shipped_root() -> Path:
    """The folder holding the shipped data: `sim/_shipped` in an installed wheel, else the checkout."""
    installed = _PACKAGE / "_shipped"
    if installed.is_dir():
        return installed
    return _PACKAGE.parent


def shipped(relative: str) -> Path:
    """A shipped file or folder, e.g. `shipped("validation/thresholds.yaml")`."""
    return shipped_root() / relative


def data_path(value: str) -> str:
    """A path as the user gave it when it exists (relative to the working folder), else the shipped
    copy when that exists: so defaults like `validation/thresholds.yaml` work from any folder."""
    if Path(value).is_absolute() or Path(value).exists():
        return value
    candidate = shipped(value)
    return str(candidate) if candidate.exists() else value
