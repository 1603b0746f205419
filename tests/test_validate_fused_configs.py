"""The fused kernel's block-size configs on held-out data (issue 18): micro gains over each bucket's
reference config and the ranking of configs measured more than 5 % apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.hardware import load_profile
from sim.validate.fused_configs import (
    ConfigTime,
    config_gains,
    config_quantities,
    fused_config_times,
)

ROOT = Path(__file__).resolve().parents[1]


def _t(block: int, warps: int, measured: float, predicted: float, bucket: str = "fwd tokens=16") -> ConfigTime:
    return ConfigTime("heldout", bucket, f"B{block}/w{warps}", block, warps, measured, predicted)


def test_gains_are_over_the_smallest_block_at_the_fewest_warps_and_rank_pairs_beyond_noise() -> None:
    times = [_t(2048, 4, 8.0, 9.0), _t(1024, 8, 10.3, 9.5), _t(1024, 4, 10.0, 10.0), _t(4096, 4, 20.0, 8.0)]
    gains, ranks = config_gains(times)
    assert [(g.config, g.reference) for g in gains] == [("B2048/w4", "B1024/w4"), ("B1024/w8", "B1024/w4"),
                                                       ("B4096/w4", "B1024/w4")]
    assert gains[0].measured_gain == pytest.approx(0.2) and gains[0].predicted_gain == pytest.approx(0.1)
    assert gains[0].error_pp == pytest.approx(-10.0)
    (rank,) = ranks
    # 10.0 vs 10.3 is within 5 %: not a pair; B4096 measured slowest but predicted fastest: wrong vs all three
    assert rank.pairs == 5
    assert sorted(rank.wrong_pairs) == [("B1024/w4", "B4096/w4"), ("B1024/w8", "B4096/w4"), ("B2048/w4", "B4096/w4")]
    q = config_quantities(gains, ranks)["fused_configs/heldout/unseen"]
    assert (q["wrong_pairs"], q["pairs"], q["wrong_buckets"], q["buckets"], q["n"]) == (3, 5, 1, 1, 3)


def test_every_held_out_fused_config_has_a_bucket_and_a_reference() -> None:
    times = fused_config_times(load_profile("h200-measured"), ROOT, exclude=False)
    gains, ranks = config_gains(times)
    # wave 2: 2 machines x (fwd, bwd) x 5 token counts x 2 hidden sizes, 10 configs each; wave 4: 3 buckets of 8;
    # machine AE (the wave-4 harness on a second machine): its own table, the same 3 buckets of 8
    assert sorted({(r.table, len(r.measured_order)) for r in ranks}) == [("heldout", 10), ("heldout_w4", 8),
                                                                          ("heldout_w4_ae", 8)]
    assert sum(1 for r in ranks if r.table == "heldout") == 40 and sum(1 for r in ranks if r.table == "heldout_w4") == 3
    assert sum(1 for r in ranks if r.table == "heldout_w4_ae") == 3
    assert len(gains) == 40 * 9 + 3 * 7 + 3 * 7
    assert {g.reference for g in gains} == {"B1024/w4", "B1024/w2"}


def test_the_bad_measurements_left_out_are_machine_As_four_small_buckets_at_hidden_8192() -> None:
    """Left out by the measurements alone: A measured these 2-2.5x what C and F measured for the same configs
    (they agree within a few %), with its own samples scattered; every other bucket of A, C agrees with the rest."""
    from sim.validate.fused_configs import SUSPECT_SLOWER, SUSPECT_SPREAD, excluded_buckets

    out = excluded_buckets(ROOT)
    assert sorted(e.bucket for e in out) == [f"{p} tokens={t} hidden=8192 [A]" for p in ("bwd", "fwd") for t in (16, 64)]
    for e in out:
        assert e.slower > SUSPECT_SLOWER and e.spread > SUSPECT_SPREAD and e.witnesses == ("C", "F")
        assert e.configs == 10 and "bad measurement" in e.reason
    times = fused_config_times(load_profile("h200-measured"), ROOT)
    kept = {t.bucket for t in times}
    assert not kept & {e.bucket for e in out} and len({t.bucket for t in times if t.table == "heldout"}) == 36
    every = fused_config_times(load_profile("h200-measured"), ROOT, exclude=False)
    assert len({t.bucket for t in every if t.table == "heldout"}) == 40


def test_a_bucket_is_left_out_only_when_slower_scattered_and_its_witnesses_agree(tmp_path: Path) -> None:
    import json

    from sim.validate.fused_configs import excluded_buckets

    def write(path: Path, scale: float, spread: float, bucket_hidden: int = 8192) -> None:
        recs = [{"bench": "fused_bgd", "kernel": "bias_gelu_dropout_fwd", "tokens": 16, "hidden": bucket_hidden,
                 "BLOCK": b, "num_warps": 4, "time_us": scale * b / 1000, "min_us": scale * b / 1000 / spread}
                for b in (1024, 2048, 4096, 8192)]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"records": recs}))

    hk = tmp_path / "validation" / "h200" / "heldout_kernels"
    f = tmp_path / "validation" / "h200" / "machine_F" / "heldout_kernels.json"
    write(hk / "C.json", 1.0, 1.02)
    write(f, 1.05, 1.02)
    write(hk / "A.json", 2.0, 1.5)
    assert [e.bucket for e in excluded_buckets(tmp_path)] == ["fwd tokens=16 hidden=8192 [A]"]
    write(hk / "A.json", 2.0, 1.1)  # slow but steady: a real difference, kept
    assert excluded_buckets(tmp_path) == []
    write(hk / "A.json", 1.3, 1.5)  # scattered but close to the others: kept
    assert excluded_buckets(tmp_path) == []
    write(hk / "A.json", 2.0, 1.5)
    write(f, 2.0, 1.02)  # the witnesses disagree with each other: nothing to decide by
    assert excluded_buckets(tmp_path) == []
