"""Plots for every shipped scenario: files written, non-empty, with the expected number of series."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.metrics import TERMS
from sim.report.html import render_page, run_tables
from sim.report.plots import breakdown_figure, gain_figure, timeline_figure, write_run_plots
from sim.run import load_scenario, run_scenario
from tests.conftest import ROOT

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_run_plots_for_shipped_scenario(path: Path, tmp_path: Path) -> None:
    scn = load_scenario(path)
    result, traces = run_scenario(scn, keep_traces=True)
    infos = write_run_plots(result, traces, tmp_path)
    sidecar = json.loads((tmp_path / "plots.json").read_text())["plots"]
    assert [p["file"] for p in sidecar] == [i.file for i in infos]
    for info in infos:
        png = tmp_path / info.file
        assert png.is_file() and png.stat().st_size > 1000
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    by_kind: dict[str, list[int]] = {}
    for p in sidecar:
        by_kind.setdefault(p["kind"], []).append(p["series"])
    n_hw = len(result["hardware"])
    n_var = len(result["hardware"][0]["variants"])  # baseline included
    assert by_kind["breakdown"] == [len(TERMS) * n_var] * n_hw
    assert by_kind["gain"] == [n_var - 1] * n_hw
    with_micro = sum(1 for hw in result["hardware"]
                     if any(v["micro"]["gain"] is not None for v in hw["variants"] if v["name"] != "baseline"))
    assert by_kind["micro_vs_step"] == [with_micro]
    assert len(by_kind["timeline"]) == 1 and by_kind["timeline"][0] >= 2  # host work and kernels at least


def test_figures_hold_the_series_they_report() -> None:
    scn = load_scenario(ROOT / "scenarios" / "bias_gelu_dropout.yaml")
    result, traces = run_scenario(scn, keep_traces=True)
    hw = result["hardware"][0]
    fig, n = breakdown_figure(hw)
    assert len(fig.axes) == len(hw["variants"])
    assert sum(len(ax.containers) for ax in fig.axes) == n == len(TERMS) * len(hw["variants"])
    assert all(len(c) == len(hw["variants"][0]["buckets"]) for ax in fig.axes for c in ax.containers)
    fig, n = gain_figure(hw)
    assert len(fig.axes[0].containers) == n == len(hw["variants"]) - 1
    chosen = [(v, t) for (h, v, b), t in traces.items() if h == hw["name"] and b == 0]
    fig, n = timeline_figure(chosen)
    assert len(fig.axes) == len(chosen)
    cats = {iv.cat for _, t in chosen for iv in t.intervals}
    assert n == len(cats)


def test_html_report_is_self_contained(tmp_path: Path) -> None:
    path = ROOT / "scenarios" / "bias_gelu_dropout.yaml"
    scn = load_scenario(path)
    result, traces = run_scenario(scn, keep_traces=True)
    infos = write_run_plots(result, traces, tmp_path)
    page = render_page("t", run_tables(result), infos, tmp_path, path.read_text(), str(path))
    assert page.count("data:image/png;base64,") == len(infos)
    assert "fused_b2048" in page and "simpy" in page and "matplotlib" in page
    assert 'src="http' not in page and "<script" not in page


def test_cli_run_plots_and_report(tmp_path: Path) -> None:
    from sim.cli import main

    code = main(["run", str(ROOT / "scenarios" / "serving_decode.yaml"), "--quiet", "--plots", str(tmp_path / "p"),
                 "--report", str(tmp_path / "r")])
    assert code == 0
    assert (tmp_path / "p" / "plots.json").is_file()
    assert (tmp_path / "r" / "index.html").stat().st_size > 10_000


def test_plot_fixes_of_issue_21(tmp_path: Path) -> None:
    """One y-scale across breakdown panels; kernel names on the timeline; a losing sweep cell is not 'best'."""
    from sim.report.plots import sweep_heatmap_figure

    result, traces = run_scenario(load_scenario(ROOT / "scenarios" / "counter_case_fusion.yaml", ["h200-sxm"]),
                                  keep_traces=True)
    fig, _ = breakdown_figure(result["hardware"][0])
    assert len({ax.get_ylim() for ax in fig.axes}) == 1
    fig, _ = timeline_figure([(f"{v}", tr) for (h, v, b), tr in traces.items() if b == 2])
    texts = {t.get_text() for ax in fig.axes for t in ax.texts}
    assert {"proj", "chain_fused"} <= texts
    records = [{"status": "ok", "hardware": "h200-sxm", "result": result}]
    fig, _ = sweep_heatmap_figure(records, ["h200-sxm"], ["fused_chain"])
    title = fig.axes[0].get_title()
    assert "best" not in title and "highest" in title


def test_micro_vs_step_labels_never_overlap() -> None:
    """No names written by the points (they printed over each other where variants share gains): a colour
    per profile and a marker per variant, named in a legend outside the axes."""
    import json

    from sim.report.plots import micro_vs_step_figure

    result = json.loads((ROOT / "tests" / "golden" / "run_bias_gelu_dropout.json").read_text())
    fig, series = micro_vs_step_figure(result)
    assert series == len(result["hardware"])
    assert not fig.axes[0].texts
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    variants = [v["name"] for v in result["hardware"][0]["variants"] if v["name"] != "baseline"]
    assert labels == [h["name"] for h in result["hardware"]] + variants
    markers = {c.get_paths()[0].vertices.tobytes() for c in fig.axes[0].collections}
    assert len(markers) == len(variants)  # one marker shape per variant
