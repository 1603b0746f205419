"""Shipped data is found from any working folder, in a checkout and in an installed wheel (issue 21)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.hardware import list_profiles, load_profile
from sim.resources import SHIPPED_DIRS, data_path, shipped, shipped_root

ROOT = Path(__file__).resolve().parent.parent


def test_checkout_reads_its_own_folders() -> None:
    assert shipped_root() == ROOT
    for rel in SHIPPED_DIRS:
        assert shipped(rel).is_dir(), rel


def test_profiles_and_validation_defaults_found_from_another_folder(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNELSIM_PROFILES", raising=False)
    assert {"h200-sxm", "h200-measured"} <= set(list_profiles())
    assert load_profile("h200-measured").measured
    for rel in ("validation/thresholds.yaml", "validation/h200/cases.yaml", "calibration/h200/raw"):
        assert Path(data_path(rel)) == ROOT / rel
    # a path that exists where the user is wins over the shipped copy
    (tmp_path / "validation").mkdir()
    (tmp_path / "validation" / "thresholds.yaml").write_text("{}\n")
    assert data_path("validation/thresholds.yaml") == "validation/thresholds.yaml"
    # a path that exists nowhere is left as given (the command then names it in its error)
    assert data_path("no/such/file.yaml") == "no/such/file.yaml"


def test_setup_copies_the_list_from_resources() -> None:
    text = (ROOT / "setup.py").read_text()
    assert "_resources.SHIPPED_DIRS" in text
    manifest = (ROOT / "MANIFEST.in").read_text()
    for rel in SHIPPED_DIRS:
        assert f"graft {rel}" in manifest, rel


@pytest.mark.slow
def test_installed_wheel_runs_from_any_folder(tmp_path: Path) -> None:
    """Build the wheel, install it (not editable) apart from the checkout, run from an empty folder."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(wheels)],
                   check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("kernelsim-*.whl")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("KERNELSIM_PROFILES", None)

    def sim(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sim", *args], cwd=work, env=env, capture_output=True,
                              text=True)

    where = subprocess.run([sys.executable, "-c", "import sim; print(sim.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(site)), where  # the wheel, not the checkout
    profiles = sim("profiles")
    assert profiles.returncode == 0 and "h200-measured" in profiles.stdout, profiles.stderr
    assert str(site) in profiles.stdout.replace("\n", "").replace(" ", "")
    run = sim("run", str(ROOT / "scenarios" / "bias_gelu_dropout.yaml"), "--json", "out.json")
    assert run.returncode == 0, run.stderr
    assert (work / "out.json").is_file()
    validate = sim("validate")
    # 0 (thresholds met) or 3 (exceeded) both mean it found and compared its data; 2 would be missing input
    assert validate.returncode in (0, 3), validate.stdout[-2000:] + validate.stderr
    assert "error" not in validate.stderr
    # every gated group found its measurements (host_context and the two-GPU collectives ship too)
    assert "matches no validated group" not in validate.stdout, validate.stdout[-2000:]
