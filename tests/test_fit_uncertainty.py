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
