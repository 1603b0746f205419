"""Terminal tables: they fit the width they are given and never cut a number (issue 21)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from sim.metrics import TERMS
from sim.report.tables import Col, column_groups, fit_widths, pct, render_run
from sim.run import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def main_result() -> dict[str, Any]:
    result, _ = run_scenario(load_scenario(ROOT / "scenarios" / "bias_gelu_dropout.yaml"))
    return result


@pytest.fixture(scope="module")
def comm_result() -> dict[str, Any]:
    result, _ = run_scenario(load_scenario(ROOT / "scenarios" / "dp_mlp_8ranks.yaml"))
    return result


def _render(result: dict[str, Any], width: int, **view: bool) -> str:
    buf = io.StringIO()
    render_run(result, Console(file=buf, width=width, color_system=None, legacy_windows=False), **view)
    return buf.getvalue()


def _weighted_numbers(hw: dict[str, Any]) -> list[str]:
    out = []
    for v in hw["variants"]:
        out.append(f"{v['weighted_time_us']:.1f}")
        if v["name"] != "baseline":
            out += [pct(v["gain_vs_baseline"]), pct(v["micro"]["gain"]), f"{v['coverage'] * 100:.0f}%",
                    f"{v['fallback_rate'] * 100:.0f}%"]
    return out


def _bucket_numbers(hw: dict[str, Any]) -> list[str]:
    out = []
    for v in hw["variants"]:
        for b in v["buckets"]:
            out += [f"{b['time_us']:.1f}", f"{b['hbm_bytes'] / 1e6:.1f}", str(b["kernels"]),
                    *(f"{b['breakdown_us'][t]:.1f}" for t in TERMS)]
            if v["name"] != "baseline":
                out.append(pct(b["gain_vs_baseline"]))
            if "comm" in b:
                c = b["comm"]
                out += [f"{c[k]:.1f}" for k in ("comm_time_us", "exposed_comm_us", "hidden_comm_us",
                                                 "rendezvous_wait_us")]
    return out


def _lines_fit(text: str, width: int) -> None:
    too_long = [line for line in text.splitlines() if len(line.rstrip()) > width]
    assert not too_long, too_long[:3]
    assert "…" not in text


@pytest.mark.parametrize("width", [80, 100, 120])
def test_compact_view_fits_and_keeps_every_weighted_number(main_result: dict[str, Any], width: int) -> None:
    text = _render(main_result, width)
    _lines_fit(text, width)
    tokens = set(text.split())
    for hw in main_result["hardware"]:
        missing = [x for x in _weighted_numbers(hw) if x not in tokens]
        assert not missing, (hw["name"], missing)
    assert "per bucket" not in text  # compact: the full tables only on request


def test_compact_view_fits_100_columns_in_one_table(main_result: dict[str, Any]) -> None:
    text = _render(main_result, 100)
    assert "(1/2)" not in text  # no split: the compact tables fit 100 columns whole
    assert len(text.splitlines()) < 100


@pytest.mark.parametrize("width", [80, 120])
def test_bucket_view_shows_every_number_intact(main_result: dict[str, Any], comm_result: dict[str, Any],
                                               width: int) -> None:
    for result in (main_result, comm_result):
        text = _render(result, width, buckets=True)
        _lines_fit(text, width)
        tokens = set(text.split())
        for hw in result["hardware"]:
            missing = [x for x in _bucket_numbers(hw) + _weighted_numbers(hw) if x not in tokens]
            assert not missing, (hw["name"], width, missing[:5])


def test_wide_view_is_one_table_per_kind(main_result: dict[str, Any]) -> None:
    text = _render(main_result, 80, wide=True)
    assert "(1/2)" not in text
    tokens = set(text.split())
    hw = main_result["hardware"][0]
    assert not [x for x in _bucket_numbers(hw) if x not in tokens]


def test_worst_buckets_are_each_variants_lowest_gain(main_result: dict[str, Any]) -> None:
    from sim.report.tables import worst_buckets

    hw = main_result["hardware"][0]
    worst = worst_buckets(hw)
    assert len(worst) == len(hw["variants"]) - 1
    for v, b, base in worst:
        assert b["gain_vs_baseline"] == min(x["gain_vs_baseline"] for x in v["buckets"])
        assert base["name"] == b["name"]
    assert [w[1]["gain_vs_baseline"] for w in worst] == sorted(w[1]["gain_vs_baseline"] for w in worst)


def _times(i: int) -> Any:
    return lambda r: f"{r[1] * i:.1f}"


def test_column_groups_repeat_keys_and_fit() -> None:
    cols = [Col("name", lambda r: r[0], numeric=False)] + [
        Col(f"value {i}", _times(i)) for i in range(12)]
    rows = [("a_long_variant_name", 12345.6), ("b", 7.0)]
    cells = [[c.cell(r) for c in cols] for r in rows]
    groups = column_groups(cols, cells, keys=1, width=60)
    assert len(groups) > 1
    assert all(g[0] == 0 for g in groups)
    assert sorted(i for g in groups for i in g[1:]) == list(range(1, 13))
    for g in groups:
        widths = fit_widths([cols[i] for i in g], [[row[i] for i in g] for row in cells], 60)
        assert sum(widths) + 2 * (len(widths) - 1) <= 60
        # numeric columns never narrower than their longest cell
        for i, w in zip(g, widths, strict=True):
            if cols[i].numeric:
                assert w >= max(len(row[i]) for row in cells)


def test_markup_in_names_is_printed_literally(main_result: dict[str, Any]) -> None:
    import copy

    result = copy.deepcopy(main_result)
    result["hardware"][0]["variants"][1]["name"] = "fused[red]x"
    assert "fused[red]x" in _render(result, 120)


def test_perfetto_process_names_use_bucket_names(tmp_path: Path) -> None:
    import json
    import re

    from sim.cli import main

    out = tmp_path / "t.json"
    assert main(["run", str(ROOT / "scenarios" / "counter_case_fusion.yaml"), "--hardware", "h200-sxm",
                 "--trace", str(out), "--quiet"]) == 0
    names = [e["args"]["name"] for e in json.loads(out.read_text())["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"]
    assert names and all(re.fullmatch(r"h200-sxm / [\w.+-]+ / tokens=\d+", n) for n in names), names


def test_kernels_table_and_json_add_up_to_the_bucket(tmp_path: Path) -> None:
    import json

    from sim.cli import main

    out = tmp_path / "k.json"
    assert main(["run", str(ROOT / "scenarios" / "counter_case_fusion.yaml"), "--kernels", "--trace-bucket", "1",
                 "--json", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    kernels = doc["kernels"]
    assert kernels["bucket"] == doc["hardware"][0]["variants"][0]["buckets"][1]["name"]
    for hw in doc["hardware"]:
        for v in hw["variants"]:
            b = v["buckets"][1]
            rows = kernels["hardware"][hw["name"]][v["name"]]
            assert len(rows) == b["kernels"]
            assert sum(r["time_us"] for r in rows) == pytest.approx(b["kernel_time_us"], rel=1e-9)
            assert sum(r["hbm_bytes"] for r in rows) == pytest.approx(b["hbm_bytes"], rel=1e-9)
            for r in rows:
                assert r["achieved_gbps"] == pytest.approx(r["hbm_bytes"] / r["time_us"] / 1e3)
                assert 0 < r["hbm_peak_share"] < 1 and 0 <= r["compute_peak_share"] < 1
                assert r["limiter"]


def test_kernels_view_prints_every_kernel_time(main_result: dict[str, Any]) -> None:
    from sim.report.kernels import kernel_rows
    from sim.report.tables import render_kernels

    scn = load_scenario(ROOT / "scenarios" / "counter_case_fusion.yaml")
    _, traces = run_scenario(scn, keep_traces=True)
    hw = {h.name: h for h in scn.hardware}
    figures: dict[str, Any] = {"bucket": "tokens=4096", "hardware": {}}
    for (h, var, b), tr in traces.items():
        if b == 2:
            figures["hardware"].setdefault(h, {})[var] = kernel_rows(tr, hw[h])
    buf = io.StringIO()
    render_kernels(figures, Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    _lines_fit(text, 80)
    tokens = set(text.split())
    for variants in figures["hardware"].values():
        for rows in variants.values():
            for r in rows:
                assert f"{r['time_us']:.1f}" in tokens and f"{r['achieved_gbps']:.0f}" in tokens
