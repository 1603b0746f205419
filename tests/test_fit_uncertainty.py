"""Every fitted number of the shipped profile carries its uncertainty where its raw data allow one:
numbers from a single record get the bootstrap interval of that record's own repeated samples."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_median_interval_is_deterministic_holds_the_value_and_needs_three_samples() -> None:
    from sim.calibrate.fit import _median_interval

    xs = [14.18, 14.148, 12.491, 13.373, 12.956, 11.52, 11.482]
    lo, hi = _median_interval(xs, 12.96)
    assert (lo, hi) == _median_interval(xs, 12.96)
    assert 11.48 <= lo <= 12.96 <= hi <= 14.18 and hi - lo > 0.5  # loops that drift 24 % give a wide interval
    assert _median_interval([1.0, 1.0, 1.0], 2.0) == (1.0, 2.0)  # widened to hold the value
    assert _median_interval([1.0, 2.0], 1.5) is None
    clock = _median_interval([840.0, 850.0, 860.0], 1640.0, lambda m: round(1980 * 704 / m, 0))
    assert clock is not None and clock[0] <= 1640 <= clock[1]


def test_single_record_host_and_power_numbers_carry_an_interval() -> None:
    doc = yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text())
    for section, key in (("host", "triton_launch_us"), ("host", "compiled_kernel_us"), ("host", "graph_kernel_us"),
                         ("power", "sustained_clock_mhz")):
        node = doc[section][key]
        lo, hi = node["spread"]
        assert lo <= node["value"] <= hi, (section, key)


def test_records_added_to_one_benchmark_leave_the_other_benchmarks_resamples_alone() -> None:
    """The whole-calibration bootstrap (sim.calibrate.fit.add_bootstrap_spreads) draws each group's benchmark from its
    own stream: appending records to one benchmark (as the row sums were appended to l2_cold's sums) changes that
    benchmark's resamples only -- not the other benchmarks of the same group, nor the other groups, whose
    intervals therefore stay as they were. The resamples are still random: two resamples differ."""
    from sim.calibrate.fit import _resampled, _strata
    from sim.calibrate.raw import RawData, RawGroup

    def raw(extra: int) -> RawData:
        sums = [{"bench": "sum", "rows": i, "cols": 64} for i in range(8 + extra)]
        copies = [{"bench": "copy", "bytes": 1 << i} for i in range(10)]
        gaps = [{"bench": "gap", "gap_us": 1.0 + i / 10} for i in range(9)]
        return RawData(root=ROOT, groups={"l2_cold": RawGroup("l2_cold", "l2_cold.json", {}, tuple(sums + copies)),
                                          "stream_gaps": RawGroup("stream_gaps", "stream_gaps.json", {}, tuple(gaps))})

    def drawn(r: RawData, resample: int) -> dict[str, list[dict[str, object]]]:
        out = _resampled(r, _strata(r), resample)
        return {"sum": out.records("l2_cold", "sum"), "copy": out.records("l2_cold", "copy"),
                "gap": out.records("stream_gaps")}

    before, after = drawn(raw(0), 3), drawn(raw(3), 3)
    assert after["copy"] == before["copy"] and after["gap"] == before["gap"]
    assert len(after["sum"]) == 11 and len(before["sum"]) == 8
    assert drawn(raw(0), 3) == before  # deterministic
    assert drawn(raw(0), 4)["copy"] != before["copy"]  # and another resample draws other records
