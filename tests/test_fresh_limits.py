"""The threshold policy for profiles other than the shipped one (sim.validate.fresh)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.validate.core import check, load_thresholds
from sim.validate.fresh import (
    FRESH_FILE_NAME,
    derive,
    exceeded,
    limit_from_worst,
    load_fresh,
    main,
    never_raised,
)
from sim.validate.suite import is_tripwire_profile

ROOT = Path(__file__).resolve().parents[1]
THRESHOLDS = {"gates": {
    "step/x/unseen": {"goal": {"median_abs": 0.05}, "tripwire": {"median_abs": 0.10, "p90_abs": 0.3}},
    "gains/unseen": {"tripwire": {"median_abs_pp": 5.0, "sign_wrong": 2}},
    "bands/time/leave_one_out": {"tripwire": {"min_coverage": 0.86}},
    "kernel/only_goal/unseen": {"goal": {"median_abs": 0.1}},
}}


def test_margins_follow_the_tripwire_rule() -> None:
    assert limit_from_worst("median_abs", 0.2) == 0.225  # x 1.1 + 0.005, rounded up
    assert limit_from_worst("median_abs_pp", 3.0) == 3.5  # x 1.1 + 0.2 pp
    assert limit_from_worst("sign_wrong", 7.0) == 7.0  # counts at the worst count
    assert limit_from_worst("min_coverage", 0.9104) == 0.86  # floors: worst - 0.05, rounded down


def test_derive_takes_the_worst_calibration_per_tripwire_metric() -> None:
    measured = {
        "A": {"step/x/unseen": {"median_abs": 0.08, "p90_abs": 0.2}, "gains/unseen": {"median_abs_pp": 2.0, "sign_wrong": 1},
              "bands/time/leave_one_out": {"coverage": 0.95}, "kernel/only_goal/unseen": {"median_abs": 0.5}},
        "B": {"step/x/unseen": {"median_abs": 0.12, "p90_abs": 0.1}, "gains/unseen": {"median_abs_pp": 4.0, "sign_wrong": 3},
              "bands/time/leave_one_out": {"coverage": 0.80}},
    }
    lim = derive(measured, THRESHOLDS)
    assert lim == {"step/x/unseen": {"median_abs": 0.137, "p90_abs": 0.225},
                   "gains/unseen": {"median_abs_pp": 4.6, "sign_wrong": 3.0},
                   "bands/time/leave_one_out": {"min_coverage": 0.75}}
    assert "kernel/only_goal/unseen" not in lim  # goals stay goals: no fresh limit where no tripwire is
    assert all(not exceeded(m, lim) for m in measured.values())  # the calibrations they come from hold them


def test_fresh_limits_are_never_raised() -> None:
    old = {"step/x/unseen": {"median_abs": 0.11}, "bands/time/leave_one_out": {"min_coverage": 0.8}}
    new = {"step/x/unseen": {"median_abs": 0.137, "p90_abs": 0.2}, "bands/time/leave_one_out": {"min_coverage": 0.75}}
    kept = never_raised(old, new)
    assert kept == {"step/x/unseen": {"median_abs": 0.11, "p90_abs": 0.2}, "bands/time/leave_one_out": {"min_coverage": 0.8}}


def test_a_fresh_profile_fails_on_fresh_limits_not_on_the_shipped_tripwires() -> None:
    measured = {"step/x/unseen": {"median_abs": 0.12, "p90_abs": 0.2, "n": 5.0},
                "gains/unseen": {"median_abs_pp": 1.0, "sign_wrong": 0.0, "n": 4.0},
                "bands/time/leave_one_out": {"coverage": 0.9, "n": 20.0},
                "kernel/only_goal/unseen": {"median_abs": 0.2, "n": 3.0}}
    shipped = check(measured, THRESHOLDS)
    assert shipped.failed and shipped.tripwires_exceeded == ["step/x/unseen: median_abs 0.120 (limit <= 0.100)"]
    fresh = check(measured, THRESHOLDS, fresh={"step/x/unseen": {"median_abs": 0.137, "p90_abs": 0.15}})
    assert fresh.policy == "fresh" and not fresh.tripwires_exceeded
    assert fresh.shipped_tripwires_exceeded == ["step/x/unseen: median_abs 0.120 (limit <= 0.100)"]
    assert fresh.fresh_exceeded == ["step/x/unseen: p90_abs 0.200 (fresh limit <= 0.150)"] and fresh.failed
    assert len(fresh.goals_not_met) == 2  # goals: reported the same way for every profile
    ok = check(measured, THRESHOLDS, fresh={"step/x/unseen": {"median_abs": 0.137}})
    assert not ok.failed and ok.fresh_checked == 1


def test_only_the_shipped_profile_byte_for_byte_gets_the_tripwires(tmp_path: Path) -> None:
    th = {"tripwire_profile": "h200-measured"}
    assert is_tripwire_profile("h200-measured", th)
    shipped = ROOT / "hardware_profiles" / "h200-measured.yaml"
    same = tmp_path / "copy.yaml"
    same.write_bytes(shipped.read_bytes())
    assert is_tripwire_profile(str(same), th)
    changed = tmp_path / "refit.yaml"
    changed.write_bytes(shipped.read_bytes() + b"\n# refit\n")
    assert not is_tripwire_profile(str(changed), th)
    assert is_tripwire_profile(str(changed), {})  # a thresholds file without the key: tripwires for all
    assert load_thresholds(ROOT / "validation" / "thresholds.yaml")["tripwire_profile"] == "h200-measured"


def test_the_committed_fresh_limits_are_derived_from_the_committed_calibrations(capsys: pytest.CaptureFixture[str]) -> None:
    # not exit 1: the file is what the writer gives (never raised). A committed calibration may exceed it
    # (a later calibration tests the limits): what each exceeds is what its validate run recorded.
    repro = json.loads((ROOT / "calibration/h200/runs/repro.json").read_text())
    rc = main(["--check", "--repro", str(ROOT / "calibration/h200/runs/repro.json"),
               "--thresholds", str(ROOT / "validation/thresholds.yaml")])
    printed = capsys.readouterr().out
    assert rc != 1, printed
    recorded = [f"{c['name']}: {line}" for c in repro["calibrations"] for line in c["violations"]]
    assert printed.splitlines() == recorded and rc == (3 if recorded else 0)
    limits = load_fresh(ROOT / "validation" / FRESH_FILE_NAME)["limits"]
    gates = load_thresholds(ROOT / "validation" / "thresholds.yaml")["gates"]
    assert set(limits) <= set(gates)
    assert all(set(m) <= set(gates[g].get("tripwire", {})) for g, m in limits.items())


def test_a_bad_fresh_file_is_one_input_error(tmp_path: Path) -> None:
    from sim.errors import InputError

    bad = tmp_path / FRESH_FILE_NAME
    bad.write_text("schema: kernelsim.fresh_limits/v1\nlimits: {\"step/x/unseen\": {median_abs: high}}\n")
    with pytest.raises(InputError, match="a limit must be a number"):
        load_fresh(bad)
    with pytest.raises(InputError, match="not a fresh-limits file"):
        load_fresh(tmp_path / "missing.yaml")
