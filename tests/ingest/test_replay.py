"""Replay: measured mode reproduces the trace's step time; predict mode prices what it can and
reports the rest as unpriced; real fixtures (when present) stay within 2 %."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.hardware import Hardware
from sim.replay import replay
from tests.ingest.conftest import MALFORMED, REAL_TRACES

REPLAY_KEYS = {"trace", "mode", "hardware", "step", "measured_time_us", "predicted_time_us", "error", "families"}


def test_measured_replay_matches_synthetic_step(synth_gz: Path, h200: Hardware) -> None:
    for step in ("1", "2", "3"):
        res, trace = replay(synth_gz, h200, "measured", step)
        assert set(res) >= REPLAY_KEYS
        assert abs(res["error"]) < 1e-6, res
        for f in res["families"].values():
            assert f["predicted_us"] == pytest.approx(f["measured_us"], rel=1e-6)
        assert len(trace.kernels()) == res["kernels"] == 12


def test_predict_prices_known_shapes_and_counts_the_rest(synth_gz: Path, h200: Hardware) -> None:
    res, _ = replay(synth_gz, h200, "predict")
    fam = res["families"]
    assert res["unpriced"]["kernels"] == 2 and res["unpriced"]["families"] == {"triton": 2}
    assert fam["triton"]["predicted_us"] == pytest.approx(fam["triton"]["measured_us"])  # kept measured
    assert fam["gemm"]["predicted_us"] != pytest.approx(fam["gemm"]["measured_us"])  # priced by the model
    assert res["predicted_time_us"] > 0 and res["mode"] == "predict" and res["hardware"] == "h200-sxm"


def test_predict_on_another_gpu_changes_the_answer(synth_gz: Path, h200: Hardware) -> None:
    from sim.hardware import load_profile

    a, _ = replay(synth_gz, h200, "predict")
    b, _ = replay(synth_gz, load_profile("a100-sxm-80gb"), "predict")
    assert b["families"]["gemm"]["predicted_us"] > a["families"]["gemm"]["predicted_us"]


def test_replay_is_deterministic(synth_gz: Path, h200: Hardware) -> None:
    assert replay(synth_gz, h200, "predict")[0] == replay(synth_gz, h200, "predict")[0]


def test_minimal_fixture_replays(h200: Hardware) -> None:
    res, _ = replay(MALFORMED / "valid_minimal.json", h200, "measured")
    assert res["measured_time_us"] == pytest.approx(52.0) and abs(res["error"]) < 0.02


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name.split(".")[0])
def test_real_traces_replay_within_2_percent(path: Path, h200: Hardware) -> None:
    res, _ = replay(path, h200, "measured")
    assert abs(res["error"]) <= 0.02, (path.name, res["measured_time_us"], res["predicted_time_us"])
    pred, _ = replay(path, h200, "predict")
    assert pred["kernels"] == res["kernels"] and pred["predicted_time_us"] > 0
