"""scripts/host_clock_parts.py (issue 15, host13): the fit that gives each host part's exponent on the clock."""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("host_clock_parts", ROOT / "scripts" / "host_clock_parts.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fit_line_recovers_a_known_exponent_and_level_with_an_interval_around_them() -> None:
    mod = _script()
    rng = random.Random(7)
    pts = []
    for run in range(8):
        offset = rng.gauss(0.0, 0.03)  # a run's own level
        for _ in range(10):
            x = math.log(rng.uniform(3.0, 7.5) / 7.846)
            pts.append((f"r{run}", x, math.log(1.3) + 0.7 * x + offset + rng.gauss(0.0, 0.02)))
    f = mod.fit_line(pts, resamples=300)
    assert abs(f["exponent"] - 0.7) < 0.05 and abs(f["level_at_ref"] - 1.3) < 0.05
    assert f["exponent_90"][0] <= f["exponent"] <= f["exponent_90"][1]
    assert f["level_90"][0] <= f["level_at_ref"] <= f["level_90"][1]
    assert f["n"] == 80 and f["runs"] == 8


def test_fit_line_needs_spread_in_the_clock() -> None:
    mod = _script()
    assert mod.fit_line([("a", 0.0, 1.0), ("b", 0.0, 2.0), ("c", 0.0, 3.0)]) is None
    assert mod.fit_line([("a", 0.0, 1.0), ("b", 1.0, 2.0)]) is None


def test_part_speed_follows_its_fit_and_the_one_speed_variant_keeps_the_profiles() -> None:
    mod = _script()
    res = {"c_ref_us": 8.0, "fits": {
        "forward (decode, inference)/eager+python": {"level_at_ref": 1.2, "exponent": 0.5},
        "forward (decode, inference)/compiled_kernel": {"level_at_ref": 1.0, "exponent": 0.0}}}
    assert mod.part_factor(res, "decode_eager", "eager", 2.0, "fitted") == 1.2 * 0.25 ** 0.5
    assert mod.part_factor(res, "infer_compiled", "compiled_kernel", 2.0, "fitted") == 1.0
    assert mod.part_factor(res, "infer_compiled", "compiled_kernel", 2.0, "compiled_as_eager") == 1.2 * 0.25 ** 0.5
    assert mod.part_factor(res, "decode_eager", "eager", 2.0, "one_speed") is None
    assert mod.part_factor(res, "train_eager", "eager", 2.0, "fitted") is None  # no training fit given
