"""Shared fixtures: repository paths, the round-number test profile, tiny workload writers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from sim.hardware import Hardware, load_profile

if TYPE_CHECKING:
    from sim.calibrate.fit import FitResult, RawFit

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TEST_PROFILE = FIXTURES / "profiles" / "testgpu.yaml"
SHIPPED_RAW = ROOT / "calibration" / "h200" / "raw"
SHIPPED_BASE = ROOT / "hardware_profiles" / "h200-sxm.yaml"
MEASURED_PROFILE = ROOT / "hardware_profiles" / "h200-measured.yaml"


@pytest.fixture(scope="session")
def testgpu() -> Hardware:
    return load_profile(str(TEST_PROFILE))


@pytest.fixture(scope="session")
def h200() -> Hardware:
    return load_profile("h200-sxm")


@pytest.fixture(scope="session")
def shipped_raw_fit() -> RawFit:
    """The shipped raw folder fitted over the shipped base profile with spreads, as
    `kernelsim calibrate --from-raw calibration/h200/raw --out hardware_profiles/h200-measured.yaml` fits it
    (sim.calibrate.fit.fit_from_raw: the fit does not depend on the written profile's name or path). One full
    fit per test session, shared by the tests that need this fit (it is the slowest step of the suite); they
    only read it."""
    from sim.calibrate.fit import fit_from_raw

    return fit_from_raw(SHIPPED_RAW, SHIPPED_BASE)


@pytest.fixture(scope="session")
def shipped_fit(shipped_raw_fit: RawFit) -> tuple[str, FitResult]:
    """The session's fit rendered exactly as h200-measured.yaml is written: the profile text and the fit."""
    from sim.calibrate.fit import render_fit

    return render_fit(shipped_raw_fit, MEASURED_PROFILE, "h200-measured"), shipped_raw_fit.result


def workload_doc(ops: list[dict[str, Any]], tensors: dict[str, Any], params: dict[str, Any] | None = None,
                 buckets: list[dict[str, Any]] | None = None, mode: str = "eager") -> dict[str, Any]:
    params = params or {"n": 1}
    return {
        "schema": "kernelsim.workload/v1",
        "name": "test",
        "kind": "training",
        "mode": mode,
        "parameters": params,
        "distribution": {"buckets": buckets or [{"params": dict(params), "weight": 1.0}]},
        "tensors": tensors,
        "ops": ops,
    }


def write_yaml(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
