"""The cold-L2 calibration step (sim.calibrate.gpu.l2_cold) writes the group the cold-L2 fits read, with
only calibration-split shapes, and a full calibration runs it. CPU only: torch is replaced by a stand-in
and the profiled kernel durations by a fixed fake."""

import json
import sys
from pathlib import Path
from unittest import mock

import pytest


def test_a_full_calibration_runs_the_l2_cold_step_and_quick_says_why_it_skips_it() -> None:
    from sim.calibrate.gpu.calibrate_all import QUICK_SKIPS, steps

    full = [" ".join(cmd[2:]) for cmd in steps("OUT", quick=False)]
    assert any(c.startswith("sim.calibrate.gpu.l2_cold --out OUT") for c in full)
    assert not any("l2_cold" in " ".join(cmd) for cmd in steps("OUT", quick=True)) and "l2_cold" in QUICK_SKIPS


def test_l2_cold_rejects_an_unknown_state(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from sim.calibrate.gpu import l2_cold

    assert l2_cold.main(["--out", str(tmp_path), "--states", "clean,hot"]) == 2
    assert capsys.readouterr().out.startswith("error: --states: 'clean,hot'")
    assert not list(tmp_path.iterdir())


def test_l2_cold_writes_calibration_shapes_the_fits_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sim.calibrate.cases import cases_from_raw
    from sim.calibrate.gpu import common, heldout_l2, l2_cold
    from sim.calibrate.raw import load_raw

    monkeypatch.setitem(sys.modules, "torch", mock.MagicMock())
    monkeypatch.setattr(common, "collect_meta", lambda extra=None: {"gpu_name": "fake", **(extra or {})})
    monkeypatch.setattr(common, "warm_gpu", lambda seconds=1.5: 0.0)
    monkeypatch.setattr(common, "_nvidia_smi_query", lambda: {})
    name = {"gemm": "nvjet_fake", "copy": "Memcpy DtoD (Device -> Device)", "sum": "reduce_kernel",
            "norm": "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>"}
    bwd = ["void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>",
           "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<c10::BFloat16, float, 32u>"]

    name["softmax"] = "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, false, false>"
    sm_bwd = ["void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
              "c10::BFloat16, at::native::binary_internal::MulFunctor",
              "void (anonymous namespace)::softmax_warp_backward<c10::BFloat16, c10::BFloat16, float, 10, false, false>"]
    fallback = ["void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<c10::BFloat16>",
                "void at::native::(anonymous namespace)::LayerNormForwardCUDAKernel<c10::BFloat16, float>"]

    def fake_profiled(fn: object, state: str, calls: int = 7) -> dict[str, object]:
        names = (bwd if current[0] == "norm_bwd" else fallback if current[0] == "norm_fallback"
                 else sm_bwd if current[0] == "softmax_bwd" else [name[current[0]]])
        return {"kernels": [{"name": n, "duration_us": 10.0, "grid": [1, 1, 1], "block": [128, 1, 1],
                             "kind": "kernel"} for n in names], "flush_kernels": 1}

    current = ["gemm"]
    for fn_name, bench in (("_gemm", "gemm"), ("_copy", "copy"), ("_sum", "sum"), ("_row_sum", "sum"),
                          ("_norm", "norm"), ("_norm_bwd", "norm_bwd"), ("_norm_fallback", "norm_fallback"),
                          ("_softmax_cal", "softmax"), ("_softmax_bwd", "softmax_bwd")):
        orig = getattr(heldout_l2, fn_name)

        def wrapped(c: object, shapes: object, tag: str, orig: object = orig, bench: str = bench) -> None:
            current[0] = bench
            orig(c, shapes, tag)  # type: ignore[operator]
        monkeypatch.setattr(heldout_l2, fn_name, wrapped)
    monkeypatch.setattr(heldout_l2, "profiled_state", fake_profiled)
    assert l2_cold.main(["--out", str(tmp_path), "--states", "clean,warm"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l2_cold.json"]
    doc = json.loads((tmp_path / "l2_cold.json").read_text())
    assert doc["group"] == "l2_cold" and doc["status"] == "complete" and not doc["errors"]
    recs = doc["records"]
    assert {r["set"] for r in recs} == {"cal"} and {r["l2_state"] for r in recs} == {"clean", "warm"}
    n_cases = (len(heldout_l2.CAL_GEMM) + 2 * len(heldout_l2.CAL_SUM) + len(heldout_l2.CAL_COPY_KIB)
               + len(heldout_l2.CAL_ROW_SUM) + 2 * len(heldout_l2.CAL_NORM) + 2 * len(heldout_l2.CAL_NORM_BWD)
               + len(heldout_l2.CAL_NORM_FALLBACK) + len(heldout_l2.CAL_SOFTMAX) + len(heldout_l2.CAL_SOFTMAX_BWD))
    assert len(recs) == 2 * n_cases
    # exactly the calibration-split shapes (CAL_GEMM shares 1x2048x2048 with the third wave's set, a
    # shape of the GEMM calibration grid; none of the new held-out shapes)
    assert {(r["m"], r["n"], r["k"]) for r in recs if r["bench"] == "gemm"} == set(heldout_l2.CAL_GEMM)
    assert not set(heldout_l2.CAL_GEMM) & set(heldout_l2.NEW_GEMM)
    assert {(r["rows"], r["cols"]) for r in recs if r["bench"] == "sum"} == set(heldout_l2.CAL_SUM + heldout_l2.CAL_ROW_SUM)
    assert {r["dim"] for r in recs if (r.get("rows"), r.get("cols")) in heldout_l2.CAL_ROW_SUM} == {1}
    assert {r["tensor_bytes"] // 1024 for r in recs if r["bench"] == "copy"} == set(heldout_l2.CAL_COPY_KIB)
    raw = load_raw(tmp_path)
    fams = [c.family for c in cases_from_raw({g: raw.records(g) for g in raw.groups})]
    assert (fams.count("gemm_cold"), fams.count("copy_cold")) == (len(heldout_l2.CAL_GEMM), len(heldout_l2.CAL_COPY_KIB))
    assert 0 < fams.count("reduction_cold") <= 2 * len(heldout_l2.CAL_SUM) + len(heldout_l2.CAL_ROW_SUM)
    # layer norm and RMS norm at the calibration's shapes, clean and warm: family norm_cal (layer_norm_kernel's fit)
    assert {(r["op"], r["rows"], r["cols"]) for r in recs if r["bench"] == "norm"} == {
        (op, r, c) for op in ("layer_norm_fwd", "rms_norm_fwd") for r, c in heldout_l2.CAL_NORM} | {
        (op, r, c) for op in ("layer_norm_bwd", "rms_norm_bwd") for r, c in heldout_l2.CAL_NORM_BWD} | {
        ("layer_norm_fwd", r, c) for r, c in heldout_l2.CAL_NORM_FALLBACK}
    # the layer norms over rows that are not whole vectors (ATen's two-kernel fallback): family norm_fallback_cal
    assert fams.count("norm_fallback_cal") == 2 * len(heldout_l2.CAL_NORM_FALLBACK)
    assert fams.count("norm_cal") == 2 * 2 * len(heldout_l2.CAL_NORM)
    # their backwards, clean and warm, one case of two kernels each: the layer norm's (family norm_bwd_cal) and the
    # RMS norm's (family rms_norm_bwd_cal)
    assert fams.count("norm_bwd_cal") == fams.count("rms_norm_bwd_cal") == 2 * len(heldout_l2.CAL_NORM_BWD)
    # softmax forwards on ATen's warp kernel at the calibration's shapes, clean and warm: family softmax_cal
    assert sorted((r["dtype"], r["cols"], r["rows"]) for r in recs if r.get("op") == "softmax_fwd") == sorted(
        2 * heldout_l2.CAL_SOFTMAX)
    assert fams.count("softmax_cal") == 2 * len(heldout_l2.CAL_SOFTMAX)
    # softmax backwards at the calibration's shapes, clean and warm: the backward kernel alone, family softmax_bwd_cal
    # (softmax_kernel's bwd_* keys); none of the held-out set's shapes
    assert sorted((r["dtype"], r["cols"], r["rows"]) for r in recs if r.get("op") == "softmax_bwd") == sorted(
        2 * heldout_l2.CAL_SOFTMAX_BWD)
    assert fams.count("softmax_bwd_cal") == 2 * len(heldout_l2.CAL_SOFTMAX_BWD)
    assert not set(heldout_l2.CAL_SOFTMAX_BWD) & set(heldout_l2.NEW_SOFTMAX_BWD)


def test_the_cold_row_sums_are_few_block_long_chains_on_the_training_side_and_no_held_out_shape() -> None:
    """row_sum_cal's shapes are what they are for: row sums (vec path) on at most 4 blocks with 16-48 loop
    iterations under the shipped profile's launch model, none of them a held-out set's shape, and every one
    on the fit's side of the record split (the fit would ignore a held-out record)."""
    from sim.calibrate.gpu import heldout_l2
    from sim.calibrate.raw import held_out
    from sim.costmodel.reduction import torch_reduce_config
    from sim.hardware import load_profile

    hw = load_profile("h200-measured")
    assert len(heldout_l2.CAL_ROW_SUM) >= 2
    iters = set()
    for rows, cols in heldout_l2.CAL_ROW_SUM:
        cfg = torch_reduce_config(hw, rows, cols, True, 2)
        assert cfg["path"] == "vec" and int(cfg["grid_x"]) * int(cfg["ctas_per_output"]) <= 4, (rows, cols, cfg)
        assert 16 <= int(cfg["iterations"]) <= 48, (rows, cols, cfg)
        iters.add(int(cfg["iterations"]))
        assert not held_out({"bench": "sum_dim1", "rows": rows, "cols": cols, "dtype": "bfloat16"}), (rows, cols)
    assert len(iters) == len(heldout_l2.CAL_ROW_SUM)  # distinct chain lengths: a slope, not one point
    assert not set(heldout_l2.CAL_ROW_SUM) & set(heldout_l2.W3_SUM + heldout_l2.NEW_SUM + heldout_l2.CAL_SUM)


def test_the_cold_fit_separates_iteration_and_entry_when_the_row_sums_are_there() -> None:
    """sim.calibrate.fit.fit_reduce_kernel over l2_cold's clean sums as calibrate reads them (cases_from_raw, the
    training split): row_sum_cal's records enter the cold fit when a raw folder has them (counted in its n), and
    with them the row sums' iteration, entry and the stream's knee come back from times the model makes at known
    values (250 ns per iteration, 400 ns entry, knee 2.5; the shipped profile starts the fit at 215 / 625 / 1.8),
    within the grids' steps traded along the chains (5 ns x 20-44 iterations). Without the rows the same fit
    misses them (220 / 650 / 2.1): the many-block sums alone trade the iteration against the knee."""
    import dataclasses

    from sim.calibrate.cases import cases_from_raw
    from sim.calibrate.fit import fit_reduce_kernel
    from sim.calibrate.gpu import heldout_l2
    from sim.calibrate.raw import held_out
    from sim.hardware import load_profile

    hw = load_profile("h200-measured")
    truth = dataclasses.replace(hw, reduce_kernel={**hw.reduce_kernel, "iter_ns_vec_cold": 250.0,
                                                   "entry_ns_vec_cold": 400.0, "knee_exponent_cold": 2.5})

    def records(shapes: list[tuple[int, int]], dims: tuple[int, ...]) -> list[dict[str, object]]:
        recs: list[dict[str, object]] = [
            {"bench": "sum", "set": "cal", "l2_state": "clean", "dim": d, "rows": r, "cols": c, "dtype": "bfloat16",
             "kernels": [{"name": "reduce_kernel", "duration_us": 1.0}]} for r, c in shapes for d in dims]
        for rec in recs:  # the model's own time at the true values: what a device would measure if it were right
            case = cases_from_raw({"l2_cold": [rec]})[0]
            rec["kernels"] = [{"name": "reduce_kernel", "duration_us": case.predicted_us(truth)}]
        return recs

    base = records(heldout_l2.CAL_SUM, (0, 1))
    rows = records(heldout_l2.CAL_ROW_SUM, (1,))

    def fit(recs: list[dict[str, object]]) -> dict[str, tuple[float, int | None]]:
        cases = [c for c in cases_from_raw({"l2_cold": recs}) if not held_out(c.record)]
        return {f.key: (float(f.value), f.n) for f in fit_reduce_kernel(cases, hw, "cold", "l2_cold.json")}  # type: ignore[arg-type]

    without, with_rows = fit(base), fit(base + rows)
    assert with_rows["iter_ns_vec_cold"][1] == without["iter_ns_vec_cold"][1] + len(heldout_l2.CAL_ROW_SUM)  # type: ignore[operator]
    assert abs(with_rows["iter_ns_vec_cold"][0] - 250.0) <= 5.0, with_rows
    assert abs(with_rows["entry_ns_vec_cold"][0] - 400.0) <= 100.0, with_rows
    assert abs(with_rows["knee_exponent_cold"][0] - 2.5) <= 0.2, with_rows
    assert abs(without["iter_ns_vec_cold"][0] - 250.0) > abs(with_rows["iter_ns_vec_cold"][0] - 250.0), without


def test_the_held_out_norm_backwards_are_shapes_no_fit_uses_and_validate_reads_them() -> None:
    """heldout_l2's norm_bwd_new part: layer norm and RMS norm backwards at row counts and widths that neither the
    calibration's backwards (CAL_NORM_BWD) nor its forwards use; the committed records
    (validation/h200/norm_bwd_heldout) become table heldout_norm_bwd's rows, one per record and L2 state."""
    from sim.calibrate.gpu import heldout_l2
    from sim.hardware import load_profile
    from sim.validate.wave2 import NORM_BWD_HELDOUT, norm_bwd_heldout_rows

    new = set(heldout_l2.NEW_NORM_BWD)
    assert not new & set(heldout_l2.CAL_NORM_BWD + heldout_l2.CAL_NORM + heldout_l2.CAL_NORM_FALLBACK)
    assert not {r for r, _ in new} & {r for r, _ in heldout_l2.CAL_NORM_BWD}
    root = Path(__file__).resolve().parent.parent
    rows = norm_bwd_heldout_rows(load_profile("h200-measured"), root / NORM_BWD_HELDOUT)
    assert len(rows) == 2 * 2 * len(new) and {r.family for r in rows} == {"layer_norm_bwd", "rms_norm_bwd"}
    assert {r.split for r in rows} == {"unseen"} and all(r.measured_us > 0 for r in rows)
