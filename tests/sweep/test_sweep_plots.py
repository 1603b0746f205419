"""Sweep plots: a gain-vs-parameter line per profile, a profile × variant heat map."""

from __future__ import annotations

import json
from pathlib import Path

from sim.report.plots import sweep_heatmap_figure, sweep_param_figure, write_sweep_plots
from sim.sweep import load_sweep, run_sweep
from tests.sweep.conftest import tiny_scenario


def test_sweep_plots_series(tmp_path: Path) -> None:
    plan = load_sweep(tiny_scenario(tmp_path, {"hardware": ["h200-sxm", "h100-sxm"], "params": {"bs": [64, 128, 256]}}))
    outcome = run_sweep(plan, tmp_path / "out", workers=1, progress=False)
    infos = write_sweep_plots(outcome.records, plan.axes, list(plan.variants), tmp_path / "plots")
    sidecar = {p["kind"]: p["series"] for p in json.loads((tmp_path / "plots" / "plots.json").read_text())["plots"]}
    assert sidecar == {"gain_vs_param": 2 * 2, "heatmap": 2 * 2}  # per variant a line per profile; 2×2 cells
    assert all((tmp_path / "plots" / i.file).stat().st_size > 1000 for i in infos)
    fig, n = sweep_param_figure(outcome.records, plan.axes, "bs", list(plan.variants))
    assert [len(ax.lines) for ax in fig.axes] == [2 + 1, 2 + 1]  # two profiles and the zero line
    assert [len(line.get_xdata()) for line in fig.axes[0].lines[:2]] == [3, 3]
    fig, n = sweep_heatmap_figure(outcome.records, plan.axes["hardware"], list(plan.variants))
    assert fig.axes[0].images[0].get_array().shape == (2, 2)
