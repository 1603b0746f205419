"""One self-contained HTML page (plots embedded as base64 PNG, tables, the scenario, versions) for a review."""

from __future__ import annotations

import base64
import html
import platform
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from sim.metrics import TERMS
from sim.report.plots import PlotInfo
from sim.version import __version__

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}
pre{background:#f7f7f7;padding:1em;overflow-x:auto;font-size:12px}
.muted{color:#777;font-size:12px}
"""


def versions() -> dict[str, str]:
    out = {"kernelsim": __version__, "python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("simpy", "numpy", "scipy", "pydantic", "matplotlib", "rich", "dask", "distributed", "pyarrow"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f}%"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    def cell(tag: str, i: int, v: Any) -> str:
        cls = ' class="l"' if i < left else ""
        return f"<{tag}{cls}>{html.escape(str(v))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def run_tables(result: dict[str, Any]) -> str:
    parts = []
    for hw in result["hardware"]:
        src = "measured" if hw["measured"] else "datasheet/estimates"
        parts.append(f"<h3>{html.escape(hw['name'])} ({html.escape(hw['gpu'])}; {src})</h3>")
        parts.append(_table(
            ["variant", "weighted µs", "step gain", "kernel-only gain", "coverage", "fallback", "worst bucket"],
            [[v["name"], f"{v['weighted_time_us']:.1f}", "" if v["name"] == "baseline" else _pct(v["gain_vs_baseline"]),
              "" if v["name"] == "baseline" else _pct(v["micro"]["gain"]),
              "" if v["name"] == "baseline" else f"{v['coverage'] * 100:.0f}%",
              "" if v["name"] == "baseline" else f"{v['fallback_rate'] * 100:.0f}%",
              "" if v["name"] == "baseline" else f"{v['tail']['worst_bucket']} ({_pct(v['tail']['worst_gain'])})"]
             for v in hw["variants"]]))
        rows = []
        for v in hw["variants"]:
            for b in v["buckets"]:
                rows.append([v["name"], b["name"], f"{b['weight']:.2f}", f"{b['time_us']:.1f}",
                             "" if v["name"] == "baseline" else _pct(b["gain_vs_baseline"]),
                             *[f"{b['breakdown_us'][t]:.1f}" for t in TERMS], b["dominant"], b["kernels"], b["path"]])
        parts.append(_table(["variant", "bucket", "weight", "time µs", "gain", *TERMS, "dominant", "kernels", "path"],
                            rows, left=2))
    return "\n".join(parts)


def sweep_tables(manifest: dict[str, Any]) -> str:
    s = manifest["summary"]
    c = s["counts"]
    parts = [f"<p>{len(manifest['points'])} points: {c['ok']} ran, {c['infeasible']} infeasible, "
             f"{c['invalid']} invalid. Axes: "
             + html.escape("; ".join(f"{k} = {v}" for k, v in manifest["axes"].items())) + "</p>"]
    parts.append(_table(
        ["profile", "best variant", "at", "step gain", "kernel-only gain", "coverage", "fallback"],
        [[b["hardware"], b["variant"], ", ".join(f"{k}={v}" for k, v in b["params"].items()) or "—", _pct(b["gain"]),
          _pct(b["micro_gain"]), f"{b['coverage'] * 100:.0f}%", f"{b['fallback_rate'] * 100:.0f}%"]
         for b in s["best"]], left=3))
    if s["not_run"]:
        parts.append("<h3>points that did not run</h3>")
        parts.append(_table(["point", "profile", "params", "status", "reason"],
                            [[r["point"], r["hardware"], r["params"], r["status"], r["reason"]] for r in s["not_run"][:200]],
                            left=5))
    return "\n".join(parts)


def render_page(title: str, body_html: str, plots: Sequence[PlotInfo], plots_dir: Path | None,
                scenario_text: str, scenario_file: str) -> str:
    imgs = []
    for p in plots:
        if plots_dir is None:
            continue
        data = base64.b64encode((plots_dir / p.file).read_bytes()).decode("ascii")
        imgs.append(f'<figure><img alt="{html.escape(p.title)}" src="data:image/png;base64,{data}">'
                    f'<figcaption class="muted">{html.escape(p.title)}</figcaption></figure>')
    ver = _table(["package", "version"], sorted(versions().items()))
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="muted">kernelsim {html.escape(__version__)}, {stamp}. Predictions of a model: check the profiles' provenance.</p>
<h2>Results</h2>
{body_html}
<h2>Plots</h2>
{''.join(imgs) or '<p class="muted">no plots</p>'}
<h2>Scenario</h2>
<p class="muted">{html.escape(scenario_file)}</p>
<pre>{html.escape(scenario_text)}</pre>
<h2>Versions</h2>
{ver}
</body></html>
"""
