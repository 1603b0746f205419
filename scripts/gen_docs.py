"""Regenerate every generated block and file in README.md and docs/ from real runs.

    python scripts/gen_docs.py            # rewrite what is stale
    python scripts/gen_docs.py --check    # exit 1 and name what is stale (tests run this)
    python scripts/gen_docs.py --only run-main reference

A generated block in a Markdown file sits between `<!-- gen:NAME -->` and `<!-- /gen -->`; its
content (fences included) is the output of the generator NAME below, run on the shipped scenarios.
A figure in prose sits between `<!-- fig:NAME -->` and `<!-- /fig -->` on one line (`+2.0 %`): the
value of FIGURES' NAME, computed from the same runs (rendered Markdown shows the value only).
Whole generated files: docs/reference.md and docs/schema/*.json from the schemas, docs/validation.md
from `kernelsim validate --markdown` (its reproducibility section from calibration/h200/runs/repro.json,
which `python -m sim.calibrate.repro` writes from the committed raw folders). Tables are
rendered 100 columns wide, as `kernelsim` prints them into a pipe.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BLOCK = re.compile(r"(<!-- gen:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /gen -->)", re.S)
FIG = re.compile(r"(<!-- fig:(?P<name>[\w-]+) -->)(?P<body>[^<\n]*)(<!-- /fig -->)")
WALKTHROUGH_FILE = re.compile(r"<!-- walkthrough:(?P<file>[\w.-]+) -->\n```yaml\n(?P<body>.*?)```", re.S)
DOC_FILES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def cli_output(argv: list[str], columns: int = 100, cwd: Path = ROOT) -> str:
    """What `kernelsim ARGV` prints into a pipe `columns` wide (run in this process)."""
    from sim.cli import main

    buf = io.StringIO()
    old_cwd, old_cols = Path.cwd(), os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(buf):
            code = main(argv)
    finally:
        os.chdir(old_cwd)
        if old_cols is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_cols
    if code != 0:
        raise RuntimeError(f"kernelsim {' '.join(argv)} exited {code}")
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines())


def _text_block(command: str, output: str) -> str:
    return f"```text\n$ {command}\n{output.strip()}\n```\n"


def gen_run_main() -> str:
    argv = ["run", "scenarios/bias_gelu_dropout.yaml", "--hardware", "h200-measured"]
    return _text_block("kernelsim " + " ".join(argv), cli_output(argv))


def walkthrough_files(readme: str) -> dict[str, str]:
    """The walkthrough's files, as written in the README (`<!-- walkthrough:FILE -->` before a yaml block)."""
    return {m["file"]: m["body"] for m in WALKTHROUGH_FILE.finditer(readme)}


def gen_walkthrough_run() -> str:
    files = walkthrough_files((ROOT / "README.md").read_text(encoding="utf-8"))
    if "my_first.yaml" not in files:
        raise RuntimeError("README.md has no <!-- walkthrough:my_first.yaml --> block")
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in files.items():
            (Path(tmp) / name).write_text(body, encoding="utf-8")
        out = cli_output(["run", "my_first.yaml", "--buckets"], cwd=Path(tmp))
    return _text_block("kernelsim run my_first.yaml --buckets", out)


# The README's path from a model to a prediction. Its capture line runs here on the committed
# recording that line makes (no torch needed); tests/capture/test_readme_path.py runs the line
# itself where torch is installed and checks it writes the same workload.
CAPTURE_PATH = [
    "pip install -e '.[torch]'",
    "kernelsim capture sim.capture.examples:gpt --param batch=8 --param seq=512 -o gpt.yaml --scenario gpt_run.yaml",
    "kernelsim run gpt_run.yaml",
]
CAPTURE_PATH_RECORDING = ROOT / "tests" / "fixtures" / "capture" / "readme_gpt.bundle.json.gz"


def gen_capture_path() -> str:
    import gzip
    import shlex

    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "gpt.bundle.json"
        bundle.write_bytes(gzip.decompress(CAPTURE_PATH_RECORDING.read_bytes()))
        argv = shlex.split(CAPTURE_PATH[1])[1:]
        argv[1] = str(bundle)  # the model's recording instead of the model
        cli_output(argv, cwd=Path(tmp))
        out = cli_output(shlex.split(CAPTURE_PATH[2])[1:], cwd=Path(tmp))
    return "```bash\n" + "\n".join(CAPTURE_PATH) + "\n```\n\n" + _text_block(CAPTURE_PATH[2], out)


def gen_advise_seed() -> str:
    argv = ["advise", "scenarios/bias_gelu_dropout.yaml", "--hardware", "h200-measured"]
    return _text_block("kernelsim " + " ".join(argv), cli_output(argv))


def gen_counter_case() -> str:
    """The counter-case's decisions per profile and variant, from `kernelsim advise --json`."""
    from sim import api

    advice = api.advise(ROOT / "scenarios" / "counter_case_fusion.yaml").to_dict()
    lines = ["| profile | variant | decision | step gain | HBM traffic per step | coverage |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    for hw in advice["hardware"]:
        for v in hw["variants"]:
            f = v["figures"]
            hbm = f["hbm_bytes"] / f["baseline_hbm_bytes"] - 1
            lines.append(f"| {hw['name']} | {v['name']} | {v['decision']} | {f['step_gain'] * 100:+.1f} % | "
                         f"{hbm * 100:+.0f} % | {f['coverage'] * 100:.0f} % |")
    return "\n".join(lines) + "\n"


def gen_serve_table() -> str:
    """The README's serving table: the rows at 50 and 300 requests/s of `kernelsim serve --json` (the
    whole sweep runs, so the max-rate search walks every swept rate)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "serve.json"
        cli_output(["serve", "scenarios/serving_decode.yaml", "--json", str(out), "--quiet"])
        result = json.loads(out.read_text(encoding="utf-8"))
    target = result.get("p99_target_ms")
    metric = result.get("target_metric", "e2e")
    lines = [f"| profile | variant | rate/s | E2E p50 / p99 ms | TPOT p50 / p99 ms | mean batch | "
             f"max rate, p99 {metric.upper()} ≤ {target:g} ms |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    sentences = []
    for hw in result["hardware"]:
        for v in hw["variants"]:
            mr = (v.get("max_rate") or {}).get("rate_per_s")
            shown = [p for p in v["points"] if p["offered_rate_per_s"] in SERVE_TABLE_RATES]
            for i, p in enumerate(shown):
                batch = "—" if p["mean_decode_batch"] is None else f"{p['mean_decode_batch']:.1f}"
                rate = "log" if p["offered_rate_per_s"] is None else f"{p['offered_rate_per_s']:g}"
                lines.append(f"| {hw['name']} | {v['name']} | {rate} | {p['e2e_ms']['p50']:.1f} / "
                             f"{p['e2e_ms']['p99']:.1f} | {p['tpot_ms']['p50']:.2f} / {p['tpot_ms']['p99']:.2f} | "
                             f"{batch} | {'' if i or mr is None else f'{mr:.0f}/s'} |")
        sentences += [row["sentence"] for row in hw["comparison"] if "sentence" in row]
    return "\n".join(lines) + "\n" + "".join(f"\n{s}\n" for s in sentences)


def _traces(folder: str) -> list[Path]:
    return sorted((ROOT / folder).glob("*.json.gz"))


@functools.cache
def measured_replays() -> list[tuple[str, str, dict[str, Any]]]:
    """Measured-mode replay of every step of every fixture on h200-sxm: (fixture, step, result)."""
    from sim import api

    out = []
    for path in _traces("tests/fixtures/traces"):
        for step in api.replay(path, "h200-sxm").to_dict()["steps_in_trace"]:
            out.append((path.name.removesuffix(".json.gz"), step, api.replay(path, "h200-sxm", step=step).to_dict()))
    return out


def gen_traces_measured() -> str:
    """docs/traces.md: measured-mode replay of every step of every fixture on h200-sxm."""
    lines = ["| fixture | step | GPU activities | measured µs | replayed µs | error | device gaps µs |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for name, step, d in measured_replays():
        lines.append(f"| {name} | {step} | {d['kernels']} | {d['measured_time_us']:.1f} | {d['predicted_time_us']:.1f} | "
                     f"{d['error'] * 100:+.2f}% | {d['device_gaps_us']:.1f} |")
    return "\n".join(lines) + "\n"


def fig_measured_replay_max() -> str:
    """The largest |error| of measured-mode replay over the fixtures' steps (the engine and dependencies)."""
    return f"{max(abs(d['error']) for _, _, d in measured_replays()) * 100:.1f} %"


@functools.cache
def heldout_unprofiled() -> dict[str, float]:
    """Held-out trace → its step measured without the profiler (calibration/h200/raw/profiler_overhead.json)."""
    raw = json.loads((ROOT / "calibration" / "h200" / "raw" / "profiler_overhead.json").read_text(encoding="utf-8"))
    return {r["path"]: r["unprofiled_step_us"] for r in raw["records"] if r.get("bench") == "heldout_trace"}


@functools.cache
def predict_replay(path: Path, host: str = "trace", keep_profiler: bool = False) -> dict[str, Any]:
    """`kernelsim replay PATH --hardware h200-measured --mode predict` (last step), against the unprofiled
    step where the trace has one."""
    from sim import api

    unprofiled = None if keep_profiler else heldout_unprofiled().get(path.name)
    return api.replay(path, "h200-measured", mode="predict", host=host, keep_profiler=keep_profiler,
                      unprofiled_us=unprofiled).to_dict()


def gen_traces_predict() -> str:
    """docs/traces.md: predict mode on h200-measured, last step of each fixture and held-out trace."""
    unprofiled = heldout_unprofiled()
    lines = ["| trace | recorded µs | predicted, profiler kept µs | error | unprofiled µs | predicted µs | error |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, folder in (("", "tests/fixtures/traces"), ("held-out: ", "validation/h200/traces_heldout")):
        for path in _traces(folder):
            k = predict_replay(path, keep_profiler=True)
            row = (f"| {label}{path.name.removesuffix('.json.gz')} | {k['measured_time_us']:.1f} | "
                   f"{k['predicted_time_us']:.1f} | {k['error'] * 100:+.1f} % |")
            if path.name in unprofiled:
                d = predict_replay(path)
                row += f" {unprofiled[path.name]:.1f} | {d['predicted_time_us']:.1f} | {d['unprofiled_error'] * 100:+.1f} % |"
            else:
                row += " | | |"
            lines.append(row)
    return "\n".join(lines) + "\n"


def _heldout_errors(host: str, device_right: bool = False) -> list[float]:
    """|error| against the unprofiled step of the held-out traces, predicted with `--host HOST`; with
    `device_right`, only the traces whose device model is right (profiler kept: within 5 % of the trace)."""
    out = []
    for path in _traces("validation/h200/traces_heldout"):
        if path.name not in heldout_unprofiled():
            continue
        if device_right and abs(predict_replay(path, keep_profiler=True)["error"]) > 0.05:
            continue
        out.append(abs(predict_replay(path, host)["unprofiled_error"]))
    return out


def fig_profiled_decode(which: str) -> Generator:
    """The held-out eager decode step (b1, l128) without and with the profiler, in ms."""
    def make() -> str:
        path = ROOT / "validation" / "h200" / "traces_heldout" / "decode_eager_b1_l128.json.gz"
        us = heldout_unprofiled()[path.name] if which == "unprofiled" else \
            predict_replay(path, keep_profiler=True)["measured_time_us"]
        return f"{us / 1e3:.2f} ms"
    return Generator(make, slow=False)


def fig_heldout(host: str, stat: str, device_right: bool = False) -> Generator:
    import statistics

    def make() -> str:
        errs = _heldout_errors(host, device_right)
        if stat == "range":
            return _pct_range(errs)
        return f"{(statistics.median(errs) if stat == 'median' else max(errs)) * 100:.1f} %"
    return Generator(make, slow=False)


#: Binary files a generator produced (path relative to the repository → bytes): written with the
#: blocks, never compared (a PNG's bytes vary with the matplotlib version; the block beside it holds
#: the numbers behind it and is compared).
FIGURES: dict[str, bytes] = {}


def gen_sweep_gains() -> str:
    """README: the shipped sweep's weighted step gain per profile, variant and elements per thread."""
    import csv

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cli_output(["sweep", "scenarios/sweep_block_size.yaml", "--out", str(out), "--quiet", "--workers", "2"])
        FIGURES["docs/img/sweep_gain_vs_ept.png"] = (out / "plots" / "gain_vs_ept.png").read_bytes()
        with open(out / "results.csv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    gains: dict[tuple[str, str], dict[float, float]] = {}
    for row in rows:
        if row["variant"] != "baseline":
            gains.setdefault((row["hardware"], row["variant"]), {})[float(row["param.ept"])] = float(row["variant_gain"])
    epts = sorted({e for g in gains.values() for e in g})
    lines = ["| profile | variant | " + " | ".join(f"ept {e:g}" for e in epts) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in epts) + " |"]
    for (hw, var), g in gains.items():
        cells = [f"{g[e] * 100:+.1f} %" if e in g else "" for e in epts]
        lines.append(f"| {hw} | {var} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


SERVE_TABLE_RATES = (50, 300)


@dataclass(frozen=True)
class Generator:
    make: Callable[[], str]
    slow: bool  # over a few seconds: checked by the slow test only


BLOCKS: dict[str, Generator] = {
    "run-main": Generator(gen_run_main, slow=False),
    "capture-path": Generator(gen_capture_path, slow=False),
    "walkthrough-run": Generator(gen_walkthrough_run, slow=False),
    "advise-seed": Generator(gen_advise_seed, slow=True),
    "counter-case": Generator(gen_counter_case, slow=True),
    "serve-table": Generator(gen_serve_table, slow=True),
    "traces-measured": Generator(gen_traces_measured, slow=True),
    "sweep-gains": Generator(gen_sweep_gains, slow=True),
    "traces-predict": Generator(gen_traces_predict, slow=False),  # moves with the host model
    "traces-host-context": Generator(lambda: gen_traces_host_context(), slow=True),  # kernelsim validate
    "comm-contention": Generator(lambda: gen_comm_contention(), slow=True),  # the engine replays the cells
    "comm-ddp": Generator(lambda: gen_comm_ddp(), slow=True),
    "comm-machine-h": Generator(lambda: gen_comm_machine_h(), slow=True),  # the engine replays machine H
    "comm-ddp-breakdown": Generator(lambda: gen_comm_ddp_breakdown(), slow=False),
    "comm-release-loss": Generator(lambda: gen_comm_release_loss(), slow=False),
    "spill-regimes": Generator(lambda: gen_spill_regimes(), slow=True),  # refits the spill constants
    "spill-traffic": Generator(lambda: gen_spill_traffic(), slow=False),
    "spill-wave-floor": Generator(lambda: gen_spill_wave_floor(), slow=True),  # prices every spilling config
    "host-validation": Generator(lambda: gen_host_validation(), slow=True),  # kernelsim validate (issue 15)
    "host-config-spread": Generator(lambda: gen_host_config_spread(), slow=True),
    "host-repeat": Generator(lambda: gen_host_repeat(), slow=False),  # reads the step records only
    "host-optimizer": Generator(lambda: gen_host_optimizer(), slow=True),  # reads nine traces
    "host-profiler-sessions": Generator(lambda: gen_host_profiler_sessions(), slow=True),
    "host-speed-bands": Generator(lambda: gen_host_speed_bands(), slow=True),  # replays the decode traces twice
    "host-speed-calibrations": Generator(lambda: gen_host_speed_calibrations(), slow=False),
    "host-own-speed": Generator(lambda: gen_host_own_speed(), slow=True),  # kernelsim validate's rows
    "host-clock-runs": Generator(lambda: gen_host_clock_runs(), slow=True),  # replays the own-speed rows twice
    "host-levels": Generator(lambda: gen_host_levels(), slow=True),  # reads every decode trace
}


@functools.cache
def validation_run() -> tuple[str, dict[str, Any]]:
    """`kernelsim validate --markdown --json` once: (docs/validation.md's text, the JSON document). It
    exits 3 when a tripwire is exceeded and still writes both. validate keeps the Markdown file's
    reproducibility section (gen_validation_md replaces it), so the run starts from a copy of the
    committed file."""
    from sim.cli import main as kernelsim

    with tempfile.TemporaryDirectory() as tmp:
        out, js = Path(tmp) / "validation.md", Path(tmp) / "validation.json"
        out.write_text((ROOT / "docs" / "validation.md").read_text(encoding="utf-8"), encoding="utf-8")
        with contextlib.redirect_stdout(io.StringIO()):
            code = kernelsim(["validate", "--markdown", str(out), "--json", str(js)])
        if code not in (0, 3) or not out.exists():
            raise RuntimeError(f"kernelsim validate --markdown exited {code}")
        return out.read_text(encoding="utf-8"), json.loads(js.read_text(encoding="utf-8"))


REPRO_DOC = ROOT / "calibration" / "h200" / "runs" / "repro.json"


def gen_repro_section() -> str:
    """docs/validation.md's reproducibility section, rendered from calibration/h200/runs/repro.json: what
    `python -m sim.calibrate.repro` found fitting and validating the committed raw folders of
    calibration/h200/runs (the command it records rewrites the file; `--check` on the slow path)."""
    from sim.calibrate.repro import render_document
    from sim.validate.core import load_thresholds
    from sim.validate.fresh import FRESH_FILE_NAME, load_fresh

    doc = json.loads(REPRO_DOC.read_text(encoding="utf-8"))
    fresh = load_fresh(ROOT / "validation" / FRESH_FILE_NAME)["limits"]
    return render_document(doc, load_thresholds(ROOT / "validation" / "thresholds.yaml"), fresh)


def gen_validation_md() -> str:
    """docs/validation.md: the full tables of `kernelsim validate --markdown`, and the reproducibility
    section rendered from the committed calibrations."""
    from sim.calibrate.repro import BEGIN, END

    text = validation_run()[0]
    section = gen_repro_section().rstrip("\n")
    if BEGIN in text and END in text:
        return text[:text.index(BEGIN)] + section + "\n" + text[text.index(END) + len(END):].lstrip("\n")
    return text.rstrip("\n") + "\n\n" + section + "\n"


# -- figures in prose: one value each, from the same runs as the blocks -------------------------------

SEED = ROOT / "scenarios" / "bias_gelu_dropout.yaml"


@functools.cache
def seed_run() -> dict[str, Any]:
    """`kernelsim run scenarios/bias_gelu_dropout.yaml --hardware h200-measured --json`."""
    from sim import api

    return api.run(SEED, hardware=["h200-measured"]).to_dict()


@functools.cache
def seed_advice() -> dict[str, Any]:
    """`kernelsim advise scenarios/bias_gelu_dropout.yaml --hardware h200-measured --json`."""
    from sim import api

    return api.advise(SEED, hardware=["h200-measured"]).to_dict()


def _named(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(x for x in items if x["name"] == name)


def _seed_variant(name: str) -> dict[str, Any]:
    return _named(seed_run()["hardware"][0]["variants"], name)


def _pct_range(values: list[float], digits: int = 0) -> str:
    lo, hi = f"{min(values) * 100:.{digits}f}", f"{max(values) * 100:.{digits}f}"
    return f"{lo} %" if lo == hi else f"{lo}–{hi} %"


def fig_seed_b8192_loss() -> str:
    """How much the step loses with the fused kernels at BLOCK=8192 (64 elements per thread)."""
    return f"{-_seed_variant('fused_b8192')['gain_vs_baseline'] * 100:.0f} %"


def fig_seed_compiled_wins() -> str:
    """torch.compile's step gain in the buckets where it wins by 1 % or more."""
    return _pct_range([b["gain_vs_baseline"] for b in _seed_variant("compiled")["buckets"]
                       if b["gain_vs_baseline"] >= 0.01])


def fig_seed_compiled_worst_tokens() -> str:
    """The token count where torch.compile loses most."""
    worst = min(_seed_variant("compiled")["buckets"], key=lambda b: b["gain_vs_baseline"])
    return f"{worst['params']['tokens']:g}"


def fig_seed_auto_from_tokens() -> str:
    """The smallest token count from which dispatch_auto takes a new path in every larger bucket (the prose
    says "below N the eager ops, from N up the compiled path"; an error when that is no longer true)."""
    buckets = sorted(_seed_variant("dispatch_auto")["buckets"], key=lambda b: b["params"]["tokens"])
    paths = [b["path"] for b in buckets]
    first = next(i for i, p in enumerate(paths) if p != "fallback")
    if any(p == "fallback" for p in paths[first:]) or set(paths[first:]) != {"compiled"}:
        raise RuntimeError(f"dispatch_auto's paths per bucket changed ({paths}): rewrite the README sentence")
    return f"{buckets[first]['params']['tokens']:g}"


def fig_seed_auto_gain() -> str:
    """dispatch_auto's weighted step gain."""
    return f"{_seed_variant('dispatch_auto')['gain_vs_baseline'] * 100:+.1f} %"


def fig_band_example(kind: str) -> str:
    """docs/json.md: how tables print a band, on the seed run (compiled's step gain; the baseline at 128 tokens)."""
    from sim.validate.bands import band_us, fmt_gain

    if kind == "gain":
        v = _seed_variant("compiled")
        return f"`{fmt_gain(v['gain_vs_baseline'], v.get('gain_interval'))}`"
    b = _seed_variant("baseline")["buckets"][0]
    return f"`{b['time_us']:.1f} {band_us(b.get('time_interval_us'))}`"


def fig_seed_compute_share() -> str:
    """The compute share of the baseline step (advise's "where the time goes")."""
    return f"{seed_advice()['hardware'][0]['baseline']['breakdown_share']['compute'] * 100:.0f} %"


def fig_seed_gemm_attainable() -> str:
    """The baseline GEMMs' time over what this GPU attains at their shapes (advise's "vs attainable")."""
    xs = [k["attainable_headroom"] for k in seed_advice()["hardware"][0]["hot_kernels"] if k["kind"] == "gemm"]
    return f"{min(xs):.2f}–{max(xs):.2f}×"


def fig_seed_fused_hbm_less() -> str:
    """How much less HBM traffic per step the hand-written fused kernels move."""
    f = _named(seed_advice()["hardware"][0]["variants"], "fused_b512")["figures"]
    return f"{(1 - f['hbm_bytes'] / f['baseline_hbm_bytes']) * 100:.0f} %"


def _validation_summary(table: str, family: str, split: str) -> dict[str, Any]:
    doc = validation_run()[1]
    return next(x for x in doc["summaries"] if (x["table"], x["family"], x["split"]) == (table, family, split))


def _median_abs(table: str, families: list[str], split: str, digits: int = 0) -> str:
    """`kernelsim validate`'s median |error| of one family (or the range over several) on one split."""
    return _pct_range([_validation_summary(table, f, split)["median_abs"] for f in families], digits)


def _step_errors(family: str, split: str) -> list[float]:
    return [r["error"] for r in validation_run()[1]["rows"]
            if r["table"] == "step" and r["family"] == family and r["split"] == split]


def _val(table: str, families: list[str], split: str, digits: int = 0) -> Generator:
    return Generator(lambda: _median_abs(table, families, split, digits), slow=True)


FUSED_MLP = [f"bias_gelu_dropout/fused_b{b}" for b in (512, 2048, 8192)]
BOTH, UNSEEN = ("unseen", "calibrated"), ("unseen",)


def _host_rows(family: str, label: Callable[[str], bool] = lambda c: True) -> list[float]:
    """|error| of `kernelsim validate`'s held-out host-context rows of one family whose config matches."""
    return [abs(r["error"]) for r in validation_run()[1]["rows"] if r["table"] == "host" and r["family"] == family
            and r["split"] == "unseen" and label(r["label"].split("/", 1)[1])]


def gen_traces_host_context() -> str:
    """docs/traces.md: held-out host-context configs, median / max |error| per path and kind of config."""
    import statistics

    def cells(groups: list[list[float]]) -> tuple[str, str, str]:
        n = " + ".join(str(len(g)) for g in groups)
        med = " / ".join(f"{statistics.median(g) * 100:.1f} %" for g in groups)
        top = " / ".join(f"{max(g) * 100:.1f} %" for g in groups)
        return n, med, top

    def trace(pred: Callable[[str], bool]) -> list[float]:
        return _host_rows("trace_predict", pred)

    rows = [
        ("trace (default predict)", "all held-out", [trace(lambda c: True)]),
        ("trace", "decode, eager and CUDA graph", [trace(lambda c: c.startswith("decode_"))]),
        ("trace", "Llama training / inference", [trace(lambda c: c.startswith("llama_train")),
                                                  trace(lambda c: c.startswith("llama_infer"))]),
        ("trace", "MLP training", [trace(lambda c: c.startswith("mlp_train") and not c.endswith("_compiled"))]),
        ("trace", "compiled steps", [trace(lambda c: c.endswith("_compiled"))]),
        ("`--host model`", "decode eager / graph", [_host_rows("host_model/decode_eager"),
                                                    _host_rows("host_model/decode_graph")]),
        ("`--host model`", "inference eager / training eager", [_host_rows("host_model/infer_eager"),
                                                                _host_rows("host_model/train_eager")]),
        # no held-out compiled inference config: the GPT one fits host.compiled_in_context (issue 15)
        ("`--host model`", "training compiled", [_host_rows("host_model/train_compiled")]),
    ]
    lines = ["| path | configs | median | max |", "| --- | --- | ---: | ---: |"]
    for path, what, groups in rows:
        if not all(groups):
            raise RuntimeError(f"no held-out host-context rows for {path} {what}: rewrite docs/traces.md")
        n, med, top = cells(groups)
        lines.append(f"| {path} | {what} ({n}) | {med} | {top} |")
    return "\n".join(lines) + "\n"


def _host_machine_rows() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """`kernelsim validate`'s host rows and gains: fitted machines (A/B/C), held-out machine (F)."""
    from sim.hardware import load_profile
    from sim.validate.host import heldout_machine_rows, host_rows

    validation_run()  # host_rows caches per process: validate has replayed these traces already
    hw = load_profile("h200-measured", ROOT, path="hardware")
    rows, gains = host_rows(ROOT / "calibration" / "h200" / "host_context", hw)
    mrows, mgains = heldout_machine_rows(ROOT, hw)
    return rows, gains, mrows, mgains


def gen_host_validation() -> str:
    """docs/host.md: per prediction path and kind of step, |error| on the fitted machines' held-out configs
    and on the machine held out by machine (its held-out configs, and the configs fitted elsewhere)."""
    import statistics

    from sim.validate.host import HELDOUT_MACHINE, HELDOUT_MACHINE_FIT_CONFIG, gain_groups

    rows, gains, mrows, mgains = _host_machine_rows()

    def cell(errs: list[float]) -> str:
        if not errs:
            return "— | — | —"
        return f"{len(errs)} | {statistics.median(errs) * 100:.1f} % | {max(errs) * 100:.1f} %"

    def errs(rs: list[Any], family: str, split: str) -> list[float]:
        return [abs(r.error) for r in rs if r.family == family and r.split == split]

    lines = ["| path / kind | A–C held-out n | median | max | F held-out n | median | max | "
             "F fit-config n | median | max |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for fam in sorted({r.family for r in rows}, key=lambda f: (f != "trace_predict", f)):
        lines.append(f"| {fam} | {cell(errs(rows, fam, 'held-out'))} | {cell(errs(mrows, fam, HELDOUT_MACHINE))} | "
                     f"{cell(errs(mrows, fam, HELDOUT_MACHINE_FIT_CONFIG))} |")
    lines += ["", "| gain over eager (held-out pairs) | A–C pairs | median |error| | F pairs | median |error| |",
              "| --- | ---: | ---: | ---: | ---: |"]
    abc, f = gain_groups(gains), gain_groups([x for x in mgains if x.split == HELDOUT_MACHINE])
    def g(grp: dict[str, list[Any]], key: str) -> str:
        if key not in grp:
            return "— | —"
        return f"{len(grp[key])} | {statistics.median(abs(x.error_pp) for x in grp[key]):.1f} pp"

    for key in sorted(set(abc) | set(f)):
        lines.append(f"| {key} | {g(abc, key)} | {g(f, key)} |")
    return "\n".join(lines) + "\n"


def host_repeat_pairs() -> list[tuple[str, float, list[tuple[str, float, float, float, float]]]]:
    """Each held-out machine's steps measured twice on the same machine: in its calibration run's host_cold
    (calibration/h200/wave*_X or runs/X) and a minute or so later in its held-out run (validation/h200/machine_X),
    the configs both hold: (machine, minutes apart, [(config, sync_us first, sync_us second, clock first, clock
    second)]); the clock is `host_clock.after` (the clock read just before the step's trace), as own speed reads it."""
    from datetime import datetime

    from sim.validate.host import HELDOUT_MACHINE_DIRS, host_clock_us

    def steps(path: Path) -> tuple[datetime, dict[str, dict[str, Any]]]:
        doc = json.loads(path.read_text())
        return (datetime.fromisoformat(doc["meta"]["date_utc"]),
                {r["config"]: r for r in doc["records"] if r.get("bench") == "step" and "sync_us" in r})

    out = []
    for rel in HELDOUT_MACHINE_DIRS:
        machine = Path(rel).parent.name.removeprefix("machine_")
        cal = sorted((ROOT / "calibration" / "h200").glob(f"wave*_{machine}/host_cold/host_context.json"))
        cal += sorted((ROOT / "calibration" / "h200" / "runs" / machine / "host_cold").glob("host_context.json"))
        if not cal:
            continue
        t1, first = steps(cal[0])
        t2, second = steps(ROOT / rel / "host_context.json")
        rows = []
        for config in sorted(set(first) & set(second)):
            c1 = host_clock_us((first[config].get("host_clock") or {}).get("after", {}))
            c2 = host_clock_us((second[config].get("host_clock") or {}).get("after", {}))
            if c1 and c2:
                rows.append((config, float(first[config]["sync_us"]), float(second[config]["sync_us"]), c1, c2))
        if rows:
            out.append((machine, (t2 - t1).total_seconds() / 60, rows))
    return out


def gen_host_repeat() -> str:
    import math
    import statistics

    pairs = host_repeat_pairs()
    lines = ["| machine | held-out run − calibration run (min) | configs | median / max step change | median / max after the clock's change |",
             "| --- | ---: | ---: | ---: | ---: |"]
    xs: list[float] = []
    ys: list[float] = []
    for machine, minutes, rows in pairs:
        step = [abs(b / a - 1) for _, a, b, _, _ in rows]
        scaled = [abs((b / a) / (c2 / c1) - 1) for _, a, b, c1, c2 in rows]
        xs += [math.log(c2 / c1) for *_, c1, c2 in rows]
        ys += [math.log(b / a) for _, a, b, _, _ in rows]
        lines.append(f"| {machine} | {minutes:.1f} | {len(rows)} | {100 * statistics.median(step):.0f} / "
                     f"{100 * max(step):.0f} % | {100 * statistics.median(scaled):.0f} / {100 * max(scaled):.0f} % |")
    all_step = [abs(math.exp(y) - 1) for y in ys]
    all_scaled = [abs(math.exp(y - x) - 1) for x, y in zip(xs, ys, strict=True)]
    lines.append(f"| all | | {len(ys)} | {100 * statistics.median(all_step):.0f} / {100 * max(all_step):.0f} % | "
                 f"{100 * statistics.median(all_scaled):.0f} / {100 * max(all_scaled):.0f} % |")
    lines += ["", f"Least squares of log(step change) on log(clock change) over the {len(ys)} pairs: slope "
              f"{statistics.linear_regression(xs, ys).slope:.2f}, correlation {statistics.correlation(xs, ys):.2f}."]
    return "\n".join(lines) + "\n"


def gen_host_config_spread() -> str:
    """docs/host.md: trace predict's signed error of every traced config on each machine, and the
    spread of the traced steps' host span within one trace (max/min − 1 of its ProfilerStep spans)."""
    import gzip

    rows, _, mrows, _ = _host_machine_rows()
    by: dict[str, dict[str, float]] = {}
    for r in [*rows, *mrows]:
        if r.family == "trace_predict":
            machine, config = r.label.split("/", 1)
            by.setdefault(config, {})[machine] = r.error
    machines = sorted({m for v in by.values() for m in v})

    def step_spread(machine: str, config: str) -> float | None:
        base = ROOT / "calibration" / "h200" / "host_context" / machine / "traces"
        if not base.is_dir():
            base = ROOT / "validation" / "h200" / f"machine_{machine}" / "host_context" / "traces"
        p = base / f"{config}.json.gz"
        if not p.is_file():
            return None
        doc = json.loads(gzip.open(p).read())
        spans = [float(e["dur"]) for e in doc.get("traceEvents", [])
                 if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
        return max(spans) / min(spans) - 1.0 if len(spans) > 1 and min(spans) > 0 else None

    head = " | ".join(machines)
    lines = [f"| config | {head} | spread of errors | traced steps' span spread (max over machines) |",
             "| --- | " + " | ".join("---:" for _ in machines) + " | ---: | ---: |"]
    for config in sorted(by, key=lambda c: -max(abs(e) for e in by[c].values())):
        e = by[config]
        cells = " | ".join(f"{e[m] * 100:+.1f} %" if m in e else "—" for m in machines)
        spreads = [x for x in (step_spread(m, config) for m in machines) if x is not None]
        spread = f"{max(spreads) * 100:.0f} %" if spreads else "—"
        lines.append(f"| {config} | {cells} | {(max(e.values()) - min(e.values())) * 100:.1f} pp | {spread} |")
    return "\n".join(lines) + "\n"


def host_speed_folders() -> list[tuple[str, Path]]:
    """(machine, folder) of every host-context run with traces: the fitted machines, the machines held out
    by machine, and the calibration runs that traced their own host steps (runs/<X>/host_cold|host_warm)."""
    from sim.validate.host import HELDOUT_MACHINE_DIRS, machine_folders

    out = machine_folders(ROOT / "calibration" / "h200" / "host_context")
    out += [(Path(rel).parent.name.removeprefix("machine_"), ROOT / rel) for rel in HELDOUT_MACHINE_DIRS]
    for part in ("host_cold", "host_warm"):
        out += [(f"{d.parent.name} ({part})", d) for d in sorted((ROOT / "calibration" / "h200" / "runs").glob(f"*/{part}"))
                if (d / "host_context.json").is_file()]
    return out


FAST_HOST = 0.75  # a trace clock below this is the fast host state (the two levels sit near 0.6 and 0.9-1.0)


def gen_host_speed_bands() -> str:
    """docs/host.md: every eager decode step (the same work at B = 1, 8, 64) on each machine: its unprofiled
    time, the host speed of the trace taken right after it (median over its traced steps, against the
    profile's reference), and --host model's signed error at the reference speed and at the trace's."""
    import statistics

    from sim.costmodel.trace_host import trace_host_speed
    from sim.hardware import load_profile
    from sim.replay import replay
    from sim.validate.host import host_cases, traced_steps

    hw = load_profile("h200-measured", ROOT, path="hardware")
    rows = []
    for machine, folder in host_speed_folders():
        for c in host_cases(folder):
            if c.kind != "decode_eager":
                continue
            steps = traced_steps(c.trace)
            speed = statistics.median(trace_host_speed(st, hw.trace_clock_us) for st in steps)
            err = {k: float(replay(c.trace, hw, "predict", host="model", idle_start=True, imported=steps[0],
                                   host_speed=k)[0]["predicted_time_us"]) / c.measured_us - 1 for k in (1.0, "trace")}
            rows.append((machine, c.config.split("/")[-1], c.measured_us, speed, err))
    # the unprofiled time's band: below the midpoint of the config's fastest and slowest machine
    by_config: dict[str, list[float]] = {}
    for _, config, us, _, _ in rows:
        by_config.setdefault(config, []).append(us)
    lines = ["| machine | config | sync_us | its band | trace host speed | --host model, reference speed | "
             "--host model, trace's speed |", "| --- | --- | ---: | --- | ---: | ---: | ---: |"]
    agree = 0
    for machine, config, us, speed, err in rows:
        mid = (min(by_config[config]) + max(by_config[config])) / 2
        band = "fast" if us < mid else "slow"
        agree += (band == "fast") == (speed < FAST_HOST)
        lines.append(f"| {machine} | {config} | {us:.0f} | {band} | {speed:.2f} | {err[1.0] * 100:+.1f} % | "
                     f"{err['trace'] * 100:+.1f} % |")
    ref = [e[1.0] for *_, e in rows]
    own = [e["trace"] for *_, e in rows]
    lines += ["", f"The trace's host speed is in the same band as the unprofiled time (below {FAST_HOST} for the "
              f"fast one) in {agree} of {len(rows)} steps. Signed errors: at the reference speed "
              f"{min(ref) * 100:+.1f} to {max(ref) * 100:+.1f} %, median |error| "
              f"{statistics.median(abs(x) for x in ref) * 100:.1f} %; at the trace's speed {min(own) * 100:+.1f} to "
              f"{max(own) * 100:+.1f} %, median |error| {statistics.median(abs(x) for x in own) * 100:.1f} %."]
    return "\n".join(lines) + "\n"


def gen_host_own_speed() -> str:
    """docs/host.md: every clocked step of the held-out machines (records with a host clock): its host
    speed from the clock, --host model's signed error at the reference speed and at that speed."""
    from sim.hardware import load_profile
    from sim.validate.host import (
        HELDOUT_MACHINE_DIRS,
        host_cases,
        own_speed,
        own_speed_rows,
        reference_clock,
    )

    _, _, mrows, _ = _host_machine_rows()
    hw = load_profile("h200-measured", ROOT, path="hardware")
    ref = reference_clock(hw)
    clock = measured_profile()["host"].get("clock_us") or {}
    at_ref = {r.label: r for r in mrows if r.family.startswith("host_model/")}
    records = {}
    for rel in HELDOUT_MACHINE_DIRS:
        machine = Path(rel).parent.name.removeprefix("machine_")
        records.update({f"{machine}/{c.config}": c.record for c in host_cases(ROOT / rel)})
    spread = f", 90 % interval {clock['spread'][0]:.2f}–{clock['spread'][1]:.2f}" if clock.get("spread") else ""
    lines = [f"Reference clock (the profile's `host.clock_us`): {ref:.2f} us per op at the reference host speed "
             f"(median over {clock.get('n', '?')} calibration GPT steps{spread})."
             if ref is not None else "No reference clock (the profile has no `host.clock_us`).", "",
             "| step | kind | sync_us | host speed (its clock) | --host model, reference speed | at its own speed |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in own_speed_rows(ROOT, hw):
        speed = own_speed(records[r.label], ref) if ref is not None else None
        base = at_ref.get(r.label)
        lines.append(f"| {r.label} | {r.family.split('/', 1)[1]} | {r.measured_us:.0f} | "
                     f"{speed:.2f} | {base.error * 100:+.1f} % | {r.error * 100:+.1f} % |" if speed is not None and base
                     else f"| {r.label} | {r.family} | {r.measured_us:.0f} | — | — | {r.error * 100:+.1f} % |")
    return "\n".join(lines) + "\n"


# Machine K's calibration and host steps (wave 9), kept outside calibration/h200/runs/ so that no fit reads them:
# the host.clock_us fit is shown with and without them (gen_host_clock_runs).
OUTSIDE_CLOCK_RUNS = {"K": "calibration/h200/wave9_K/host_cold"}
CLOCK_SPLIT_US = 4.8  # a tight-loop clock below this is the fast host level (the levels sit near 3.5 and 6.5 us)


def gen_host_clock_runs() -> str:
    """docs/host.md: the samples host.clock_us is fitted from (each clocked eager GPT step of a calibration run: its
    clock just before its trace over the trace's host speed), the fit with machine K's steps added, the own-speed
    validation groups at both references, and each clocked inference step's implied reference (the clock at which
    --host model reproduces it)."""
    import dataclasses
    import statistics

    from sim.calibrate.host_fit import FIT_MODELS, fit_host_clock, host_clock_samples
    from sim.costmodel.trace_host import trace_host_speed
    from sim.hardware import load_profile
    from sim.replay import replay
    from sim.validate.host import host_cases, host_clock_us, own_speed_rows, traced_steps

    hw = load_profile("h200-measured", ROOT, path="hardware")
    runs = ROOT / "calibration" / "h200" / "runs"
    folders = [(d.parent.name, d, True) for d in sorted(runs.glob("*/host_cold"))]
    folders += [(name, ROOT / rel, False) for name, rel in OUTSIDE_CLOCK_RUNS.items()]
    lines = ["| run | in runs/ | step | clock before (us) | clock after (us) | trace host speed | sample (us) |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    extra: dict[str, list[float]] = {}
    for name, folder, inside in folders:
        for c in host_cases(folder):
            clock = c.record.get("host_clock") or {}
            before, after = host_clock_us(clock.get("before", {})), host_clock_us(clock.get("after", {}))
            if before is None or after is None or c.record.get("model") not in FIT_MODELS or c.record.get("mode") != "eager":
                continue
            speed = statistics.median(trace_host_speed(st, hw.trace_clock_us) for st in traced_steps(c.trace))
            if not inside:
                extra.setdefault(name, []).append(after / speed)
            lines.append(f"| {name} | {'yes' if inside else 'no'} | {c.config} | {before:.2f} | {after:.2f} | {speed:.2f} | "
                         f"{after / speed:.2f} |")
    samples = host_clock_samples(runs, hw.trace_clock_us)
    fits = {"runs/ (the profile's)": fit_host_clock(samples), "runs/ + K": fit_host_clock({**samples, **extra})}
    lines += ["", "| reference | host.clock_us (us) | 90 % interval | steps | own-speed `unseen` rows (F, Y), median / max "
              "|error|: decode_eager | infer_eager | infer_compiled |", "| --- | ---: | --- | ---: | --- | --- | --- |"]
    for label, fit in fits.items():
        if fit is None:
            continue
        rows = own_speed_rows(ROOT, dataclasses.replace(hw, host_clock_us=fit.value))
        cells = []
        for kind in ("decode_eager", "infer_eager", "infer_compiled"):
            # the gated groups whose tripwires the reference must hold (later machines have splits of their own)
            errs = [abs(r.error) for r in rows if r.family.endswith(f"/{kind}") and r.split == "unseen"]
            cells.append(f"{statistics.median(errs) * 100:.1f} / {max(errs) * 100:.1f} %" if errs else "—")
        spread = f"{fit.spread[0]:.2f}–{fit.spread[1]:.2f}" if fit.spread else "—"
        lines.append(f"| {label} | {fit.value:.2f} | {spread} | {fit.n} | {' | '.join(cells)} |")
    # the clock at which --host model reproduces each clocked eager inference step (its host part is linear in
    # the speed: two replays give the speed s* that matches the measurement; implied reference = clock / s*)
    lines += ["", "| run | step | host level | its clock (us) | sync_us | speed where --host model = sync_us | "
              "implied reference (us) |", "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    from sim.validate.host import HELDOUT_MACHINE_DIRS

    held = [(f"{Path(rel).parent.name.removeprefix('machine_')} (validation)", ROOT / rel, False) for rel in HELDOUT_MACHINE_DIRS]
    for name, folder, _ in folders + held:
        for c in host_cases(folder):
            clock = c.record.get("host_clock") or {}
            before, after = host_clock_us(clock.get("before", {})), host_clock_us(clock.get("after", {}))
            if (before is None or after is None or c.record.get("mode") != "eager"
                    or c.kind not in ("decode_eager", "infer_eager") or c.record.get("model") not in ("gpt", "gpt_decode")):
                continue
            if max(before, after) > CLOCK_SPLIT_US > min(before, after):
                continue  # the host changed level during the timing
            mine = (before * after) ** 0.5
            p = [float(replay(c.trace, hw, "predict", host="model", idle_start=True, imported=traced_steps(c.trace)[0],
                              host_speed=x)[0]["predicted_time_us"]) for x in (0.5, 1.0)]
            s = 0.5 + (c.measured_us - p[0]) / (p[1] - p[0]) * 0.5
            level = "fast" if mine < CLOCK_SPLIT_US else "slow"
            lines.append(f"| {name} | {c.config} | {level} | {mine:.2f} | {c.measured_us:.0f} | {s:.2f} | {mine / s:.2f} |")
    return "\n".join(lines) + "\n"


def gen_host_levels() -> str:
    """docs/host.md: how often each host level occurs in every committed host measurement that can tell: the
    tight-loop clock beside each clocked step (before and after its timing), the calibrations' tight-loop
    repetitions, and the eager decode steps' traces; and what a host-bound step costs at each level."""
    import math
    import statistics

    from sim.costmodel.trace_host import trace_host_speed
    from sim.hardware import load_profile
    from sim.validate.host import HELDOUT_MACHINE_DIRS, host_cases, host_clock_us, traced_steps

    hw = load_profile("h200-measured", ROOT, path="hardware")
    counts: list[tuple[str, int, int]] = []
    clocked = [(f"{d.parent.name} (host_cold)", d) for d in sorted((ROOT / "calibration" / "h200" / "runs").glob("*/host_cold"))]
    clocked += [(f"{k} (host_cold, outside runs/)", ROOT / rel) for k, rel in OUTSIDE_CLOCK_RUNS.items()]
    clocked += [(f"{Path(rel).parent.name.removeprefix('machine_')} (held-out validation)", ROOT / rel)
                for rel in HELDOUT_MACHINE_DIRS]
    for label, folder in clocked:
        vals = [v for c in host_cases(folder) for k in ("before", "after")
                if (v := host_clock_us((c.record.get("host_clock") or {}).get(k, {}))) is not None]
        if vals:
            counts.append((f"tight-loop clock beside each step, {label}", sum(v < CLOCK_SPLIT_US for v in vals),
                           sum(v >= CLOCK_SPLIT_US for v in vals)))
    # the calibrations' host-cost repetitions (as gen_host_speed_calibrations): below 1.5 x the shipped median is fast
    shipped = ROOT / "calibration" / "h200" / "raw" / "host_costs.json"

    def eager(path: Path) -> dict[int, dict[str, float]]:
        by: dict[int, dict[str, float]] = {}
        for r in json.loads(path.read_text())["records"]:
            if r.get("bench") == "eager_op":
                by.setdefault(int(r.get("run", 1)), {})[r["op"]] = float(r["host_us_per_op"])
        return by

    ref_runs = eager(shipped)
    ref = {op: statistics.median(run[op] for run in ref_runs.values() if op in run) for run in ref_runs.values() for op in run}
    speeds = []
    for path in [shipped, *sorted((ROOT / "calibration" / "h200" / "runs").glob("*/raw/host_costs.json"))]:
        for run in eager(path).values():
            logs = [math.log(v / ref[op]) for op, v in run.items() if op in ref and v > 0]
            speeds.append(math.exp(sum(logs) / len(logs)))
    counts.append(("calibrations' tight-loop repetitions (host_costs.json; fast below 1.5 x shipped)",
                   sum(x < 1.5 for x in speeds), sum(x >= 1.5 for x in speeds)))
    decode: dict[str, list[float]] = {"fast": [], "slow": []}
    n_fast = n_slow = 0
    for _, folder in host_speed_folders():
        for c in host_cases(folder):
            if c.kind != "decode_eager":
                continue
            speed = statistics.median(trace_host_speed(st, hw.trace_clock_us) for st in traced_steps(c.trace))
            level = "fast" if speed < FAST_HOST else "slow"
            n_fast += level == "fast"
            n_slow += level == "slow"
            decode[level].append(c.measured_us)
    counts.append((f"eager decode steps' traces (fast below trace speed {FAST_HOST})", n_fast, n_slow))
    lines = ["| measurements | fast level | slow level |", "| --- | ---: | ---: |"]
    lines += [f"| {label} | {f} | {s} |" for label, f, s in counts]
    tf, ts = sum(f for _, f, _ in counts), sum(s for _, _, s in counts)
    med_f, med_s = statistics.median(decode["fast"]), statistics.median(decode["slow"])
    lines += [f"| all | {tf} | {ts} |", "",
              f"An eager decode step (B = 1 to 64, the same host work) measured {med_f:.0f} us at the fast level and "
              f"{med_s:.0f} us at the slow one (medians over {len(decode['fast'])} and {len(decode['slow'])} steps): the "
              f"fast level takes {med_f / med_s:.2f} of the slow one's time."]
    return "\n".join(lines) + "\n"


def gen_host_speed_calibrations() -> str:
    """docs/host.md: the host speed of each calibration's tight loops (host_costs.json's eager ops, each
    repetition of the bench on its own): geometric mean over the ops of its time per op against the
    shipped calibration's median."""
    import math
    import statistics

    def eager(path: Path) -> tuple[dict[str, list[tuple[int, float]]], str]:
        doc = json.loads(path.read_text())
        by: dict[str, list[tuple[int, float]]] = {}
        for r in doc["records"]:
            if r.get("bench") == "eager_op":
                by.setdefault(r["op"], []).append((int(r.get("run", 1)), float(r["host_us_per_op"])))
        return by, str(doc["meta"].get("date_utc", ""))[:16]

    shipped = ROOT / "calibration" / "h200" / "raw" / "host_costs.json"
    ref = {op: statistics.median(v for _, v in xs) for op, xs in eager(shipped)[0].items()}
    lines = ["| calibration | measured (UTC) | host speed per repetition of the tight loops |", "| --- | --- | --- |"]
    for label, path in [("shipped (raw/)", shipped),
                        *((p.parent.parent.name, p) for p in sorted((ROOT / "calibration" / "h200" / "runs").glob("*/raw/host_costs.json")))]:
        by, date = eager(path)
        runs = sorted({k for xs in by.values() for k, _ in xs})
        speeds = []
        for run in runs:
            logs = [math.log(v / ref[op]) for op, xs in by.items() if op in ref for k, v in xs if k == run and v > 0]
            speeds.append(math.exp(sum(logs) / len(logs)))
        lines.append(f"| {label} | {date.replace('T', ' ')} | {' / '.join(f'{x:.2f}' for x in speeds)} |")
    return "\n".join(lines) + "\n"


def gen_host_optimizer() -> str:
    """docs/host.md: the optimizer's foreach calls per step, traced (in-context, less the profiler's
    in-context cost per event) against the table's price flat and per tensor, machines A/B/C."""
    from dataclasses import replace

    from sim.calibrate.host_fit import fit_foreach_bench, trace_op_samples
    from sim.costmodel.host import framework_op_s
    from sim.costmodel.trace_host import FOREACH_PREFIX, foreach_tensors
    from sim.hardware import load_profile
    from sim.ingest.kineto import read_step

    folder = ROOT / "calibration" / "h200" / "host_context"
    bench = fit_foreach_bench(folder)
    assert bench is not None
    per = load_profile("h200-measured")  # the shipped profile prices foreach ops per tensor
    ref = 53  # the GPT fit steps' AccumulateGrad nodes (checked below)
    flat = replace(per, framework_op_per_tensor_s={})
    lines = [f"Bench fit: {bench.fixed_us:.1f} us + {bench.per_tensor_us:.2f} us per tensor ({bench.n} steps).", "",
             "| model (tensors) | traced, A / B / C | flat table | per tensor |", "| --- | ---: | ---: | ---: |"]
    for model, config in (("MLP", "mlp_train_t128"), ("Llama", "llama_train_b1_s128"), ("GPT, the fit model", "gpt_train_b1_s128")):
        traced, tensors = [], 0
        for machine in ("A", "B", "C"):
            path = folder / machine / "traces" / f"{config}.json.gz"
            tensors = foreach_tensors(read_step(path, None)) or 0
            samples = {k: v for k, v in trace_op_samples(path, {"shapes": flat.trace_profiler_event_s["shapes"] * 1e6}).items()
                       if k.startswith(FOREACH_PREFIX)}
            steps = len(samples["aten::_foreach_sqrt"].plain)
            traced.append(sum(sum(v.plain) for v in samples.values()) / steps)
        if model.startswith("GPT"):
            assert tensors == ref
        price = [sum(len(v.plain) / steps * (framework_op_s(k, hw, tensors=tensors) or 0.0) for k, v in samples.items()) * 1e6
                 for hw in (flat, per)]
        lines.append(f"| {model} ({tensors}) | {' / '.join(f'{t:.0f}' for t in traced)} us | {price[0]:.0f} us | {price[1]:.0f} us |")
    return "\n".join(lines) + "\n"


def gen_host_profiler_sessions() -> str:
    """docs/host.md: the profiler's cost per recorded event in each eager (non-decode) step, at the
    reference host speed, in the first profiling session of each host_context process against the
    later ones (as host.trace_profiler is fitted: traced span less enqueue_us, per event, / host speed)."""
    import statistics

    from sim.costmodel.trace_host import trace_host_speed
    from sim.hardware import load_profile
    from sim.validate.host import machine_folders, trace_path, traced_steps

    clock = load_profile("h200-measured").trace_clock_us
    runs = [*machine_folders(ROOT / "calibration" / "h200" / "host_context"),
            ("F", ROOT / "validation" / "h200" / "machine_F" / "host_context")]
    lines = ["| machine | first session (its config), per step | later eager sessions: median (range) | sessions |",
             "| --- | --- | --- | ---: |"]
    for machine, base in runs:
        recs = [r for r in json.loads((base / "host_context.json").read_text())["records"]
                if r.get("bench") == "step" and r.get("trace") and r.get("enqueue_us")]
        per_config = []
        for order, r in enumerate(recs):
            path = trace_path(base, str(r["trace"]))
            if r.get("mode") != "eager" or r.get("phase") == "decode" or path is None:
                continue
            vals = [((st.events.step.end - st.events.step.ts) - float(r["enqueue_us"]))
                    / (sum(o.trace_events for o in st.ops) * trace_host_speed(st, clock)) for st in traced_steps(path)]
            per_config.append((order, str(r["config"]), vals))
        (first_order, first_config, first), later = per_config[0], per_config[1:]
        assert first_order == 0  # the process's first traced config is an eager one
        meds = [statistics.median(v) for _, _, v in later]
        lines.append(f"| {machine} | {' / '.join(f'{v:.2f}' for v in first)} us ({first_config}) | "
                     f"{statistics.median(meds):.2f} us ({min(meds):.2f}-{max(meds):.2f}) | {len(later)} |")
    return "\n".join(lines) + "\n"


def fig_traces_host_heldout_n() -> str:
    return str(len(_host_rows("trace_predict")))


def fig_val_attention_cases() -> str:
    return str(_validation_summary("kernel", "attention", "unseen")["n"])


def fig_val_gains(split: str) -> str:
    """Median |predicted − measured| gain, in percentage points, over the variant × bucket pairs of a split."""
    import statistics

    errs = [abs(g["error_pp"]) for g in validation_run()[1]["gains"] if g["split"] == split]
    return f"{statistics.median(errs):.1f} pp"


def fig_val_band_coverage(how: str) -> str:
    """The share of left-out time and gain cases inside their 90 % band (leave one out / a whole case out)."""
    cov = validation_run()[1]["band_coverage"]
    return _pct_range([cov[f"{kind}/{how}"]["share"] for kind in ("time", "gain")])


def fig_val_decode_eager_range() -> str:
    """The eager decode step's signed errors, lowest…highest (calibrated split)."""
    errs = _step_errors("serving_decode/baseline", "calibrated")
    return f"{min(errs) * 100:+.0f} %…{max(errs) * 100:+.0f} %".replace("-", "−")


def fig_val_decode_eager_median() -> str:
    """The eager decode step's median |error| (calibrated split)."""
    import statistics

    return f"{statistics.median(abs(e) for e in _step_errors('serving_decode/baseline', 'calibrated')) * 100:.0f} %"


def fig_val_decode_graph_range() -> str:
    """The CUDA-graph decode step's signed errors, lowest…highest (calibrated split)."""
    errs = _step_errors("serving_decode/cuda_graph", "calibrated")
    return f"{min(errs) * 100:+.0f} %…{max(errs) * 100:+.0f} %".replace("-", "−")


def fig_val_decode_graph_median() -> str:
    import statistics

    return f"{statistics.median(_step_errors('serving_decode/cuda_graph', 'calibrated')) * 100:+.0f} %".replace("-", "−")


def fig_val_sustained() -> str:
    """The |error| range of the MLP steps timed at the sustained clock, predicted with `clock: sustained`."""
    return _pct_range([abs(e) for e in _step_errors("bias_gelu_dropout@sustained/baseline", "calibrated")])


@functools.cache
def measured_profile() -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load((ROOT / "hardware_profiles" / "h200-measured.yaml").read_text(encoding="utf-8")))


def fig_power_limit() -> str:
    return f"{measured_profile()['power']['power_limit_w']['value']:g} W"


def fig_sustained_clock() -> str:
    return f"{measured_profile()['power']['sustained_clock_mhz']['value']:g} MHz"


def fig_sustained_slowdown() -> str:
    """How much slower GEMMs run at the measured sustained clock than at the maximum clock."""
    p = measured_profile()
    return f"{(p['sm']['clock_mhz']['value'] / p['power']['sustained_clock_mhz']['value'] - 1) * 100:.0f} %"


def fig_advice_default(field: str) -> Generator:
    """A default threshold of `kernelsim advise` (sim/schema AdviceSettings): a share in %, a factor in ×."""
    def make() -> str:
        from sim.schema.scenario import AdviceSettings

        value = AdviceSettings.model_fields[field].default
        return f"{value:g}×" if field == "near_ceiling_headroom" else f"{value * 100:g} %"
    return Generator(make, slow=False)


def fig_host_gain(key: str) -> Generator:
    """docs/traces.md: median |error| of held-out gains over eager in real models (host context), in pp;
    `key` is PATH/VARIANT as `kernelsim validate` prints it (`trace/cuda_graph`, `model/compiled`)."""
    def make() -> str:
        import statistics

        from sim.hardware import load_profile
        from sim.validate.host import gain_groups, host_rows

        validation_run()  # host_rows caches per process: validate has replayed these traces already
        hw = load_profile("h200-measured", ROOT, path="hardware")
        _, gains = host_rows(ROOT / "calibration" / "h200" / "host_context", hw)
        return f"{statistics.median(abs(g.error_pp) for g in gain_groups(gains)[key]):.1f} pp"
    return Generator(make, slow=True)


def fig_constant(module: str, name: str) -> Generator:
    """A modeling threshold of the code, in µs (the docs quote it; the code is where it lives)."""
    def make() -> str:
        import importlib

        return f"{float(getattr(importlib.import_module(module), name)):g} µs"
    return Generator(make, slow=False)


def fig_comm(family: str, stat: str) -> Generator:
    """docs/communication.md: held-out collectives' median or max |error| (kernelsim validate, table comm)."""
    def make() -> str:
        x = _validation_summary("comm", family, "unseen")[stat]
        return f"{x * 100:.1f} %" if x < 1 else f"{x * 100:.0f} %"
    return Generator(make, slow=True)


# -- docs/communication.md: contention and DDP on two H200s (issue 20) --------------------------------
COMM_DIR = ROOT / "calibration" / "h200x2" / "comm"


@functools.cache
def _contention_rows() -> tuple[Any, ...]:
    from sim.validate.comm import contention_rows

    return tuple(contention_rows(COMM_DIR))


@functools.cache
def _ddp_rows() -> tuple[Any, ...]:
    from sim.validate.comm import ddp_rows

    return tuple(ddp_rows(COMM_DIR))


def gen_comm_contention() -> str:
    """docs/communication.md: the contention cells' |predicted - measured| slowdowns per regime and split."""
    from sim.validate.comm import contention_quantities

    names = {"device_bound": "device-bound", "host_bound": "host-bound (a call alone shorter than two "
             "torch.distributed calls' host time)"}
    lines = ["| cells (pp = predicted − measured slowdown) | n | median | max |", "|---|---|---:|---:|"]
    for key, q in contention_quantities(list(_contention_rows())).items():
        _, regime, split = key.split("/")
        lines.append(f"| {names[regime]}, {split} | {int(q['n'])} | {q['median_abs_pp']:.1f} pp | {q['max_abs_pp']:.1f} pp |")
    return "\n".join(lines) + "\n"


def _cell(load: str, ar_mib: int, run: str) -> tuple[Any, Any]:
    rows = [r for r in _contention_rows() if r.label == f"{load} x all-reduce {ar_mib} MiB [{run}]"]
    if len(rows) != 2:
        raise RuntimeError(f"no contention cell {load} x {ar_mib} MiB in run {run}: rewrite docs/communication.md")
    return rows[0], rows[1]


def fig_comm_cell(load: str, ar_mib: int, run: str) -> Generator:
    """One cell: load / all-reduce slowdowns, predicted vs measured."""
    def make() -> str:
        ld, ar = _cell(load, ar_mib, run)
        return (f"{ld.predicted_pct:+.1f} % / {ar.predicted_pct:+.1f} % predicted vs "
                f"{ld.measured_pct:+.1f} % / {ar.measured_pct:+.1f} % measured")
    return Generator(make, slow=True)


def fig_comm_knife_edge() -> str:
    """The all-reduce slowdown beside GEMM 4096x16384x4096 when the GEMM's call alone is 2 % shorter
    or longer than measured (the cell w3, replayed as validate does)."""
    import json

    from sim.calibrate.comm_contention import simulate_cell
    from sim.hardware import load_profile

    hw = load_profile("h200-nvl2")
    doc = json.loads((COMM_DIR / "w3" / "comm.json").read_text())
    rec = next(r for r in doc["records"] if r.get("bench") == "contention_grid" and r.get("load") == "gemm_4096x16384x4096_bf16"
               and r["allreduce_bytes"] == 256 << 20 and len(r["load_ranks"]) == 2)
    load_us = rec["load_alone_us"] / rec["load_calls"]
    ar_us = rec["comm_alone_us"] / rec["allreduce_calls"]
    out = []
    for f in (0.98, 1.02):
        p = simulate_cell(hw, dict(rec["load_shape"]), rec["allreduce_bytes"], rec["load_calls"], rec["allreduce_calls"],
                          load_us * f, ar_us)
        out.append(f"{100 * (p.comm_slowdown - 1):+.1f} %")
    return f"{out[0]} with the GEMM's call 2 % shorter, {out[1]} with it 2 % longer"


def gen_comm_ddp() -> str:
    """docs/communication.md: DDP's exposed communication per workload and token count, measured vs predicted."""
    lines = ["| DDP workload [run] | split | measured | predicted | error |", "|---|---|---:|---:|---:|"]
    for r in _ddp_rows():
        err = r.predicted_us / r.measured_us - 1
        lines.append(f"| {r.label} | {r.split} | {r.measured_us:.0f} µs | {r.predicted_us:.0f} µs | {err * 100:+.1f} % |")
    return "\n".join(lines) + "\n"


def fig_comm_ddp(split: str) -> Generator:
    """DDP's exposed communication: median and max |error| of one split."""
    def make() -> str:
        import statistics

        errs = [abs(r.predicted_us / r.measured_us - 1) for r in _ddp_rows() if r.split == split]
        return f"median {statistics.median(errs) * 100:.1f} %, max {max(errs) * 100:.1f} %"
    return Generator(make, slow=True)


MACHINE_H_DIR = ROOT / "validation" / "h200x2" / "machine_H"
MACHINE_P_DIR = ROOT / "validation" / "h200x2" / "machine_P"


def gen_comm_machine_h() -> str:
    """docs/communication.md: the machines held out by machine (H; P and its repeat run Pr) — DDP's exposed
    communication per workload, the contention cells' |error| per regime and split, the all-reduces alone
    of the contention cells, replayed as validate does; and P's within-machine spread (P vs Pr)."""
    from sim.validate.comm import (
        contention_quantities,
        contention_rows,
        ddp_rows,
        heldout_collective_rows,
        heldout_machine_runs,
        repeat_spread,
    )

    runs = heldout_machine_runs(ROOT)
    lines = ["| DDP workload [machine] | split | measured | predicted | error |", "|---|---|---:|---:|---:|"]
    ddp = ddp_rows(COMM_DIR, runs=runs)
    for r in ddp:
        err = r.predicted_us / r.measured_us - 1
        lines.append(f"| {r.label} | {r.split} | {r.measured_us:.0f} µs | {r.predicted_us:.0f} µs | {err * 100:+.1f} % |")
    lines += ["", "| contention cells [held-out machines] (pp = predicted − measured slowdown) | n | median | max |",
              "|---|---|---:|---:|"]
    cells = contention_rows(COMM_DIR, runs=runs)
    for key, q in contention_quantities(cells).items():
        _, regime, split = key.split("/")
        lines.append(f"| {regime.replace('_', '-')}, {split} | {int(q['n'])} | {q['median_abs_pp']:.1f} pp | "
                     f"{q['max_abs_pp']:.1f} pp |")
    lines += ["", "| all-reduce alone, median of the contention cells [machine] | split | measured | predicted | error |",
              "|---|---|---:|---:|---:|"]
    coll = heldout_collective_rows(runs)
    for c in coll:
        lines.append(f"| {c.bytes >> 20} MiB{' (host-bound)' if c.host_bound else ''} [{c.run}] | {c.split} | "
                     f"{c.measured_us:.1f} µs | {c.predicted_us:.1f} µs | {c.error * 100:+.1f} % |")
    lines += ["", "| within-machine spread, repeat run vs first (measured only) | n | median | max |", "|---|---|---:|---:|"]
    for name, (n, med, top) in repeat_spread(coll, ddp, cells).items():
        unit = (lambda v: f"{v:.1f} pp") if name.endswith("(pp)") else (lambda v: f"{v * 100:.1f} %")
        lines.append(f"| {name} | {n} | {unit(med)} | {unit(top)} |")
    return "\n".join(lines) + "\n"


def gen_spill_regimes() -> str:
    """docs/spills.md: the spilling fused configs of the held-out machines and calibration folders by spill
    regime under the three spill rules (sim.validate.spills; scripts/spill_l1_check.py prints it)."""
    from sim.hardware import load_profile
    from sim.validate.spills import regime_rows, regime_table, shipped_rule

    hw = load_profile("h200-measured")
    return regime_table(regime_rows(hw, ROOT), shipped_rule(hw))


def gen_spill_wave_floor() -> str:
    """docs/spills.md: the spilling configs under compositions of the spill time as a floor per wave of resident
    blocks, each constant fitted on the calibration's configs (scripts/spill_wave_floor_check.py prints it)."""
    import importlib

    from sim.hardware import load_profile

    check = importlib.import_module("scripts.spill_wave_floor_check")
    lines, _ = check.table(check.parts(load_profile("h200-measured")))
    return "\n".join(lines) + "\n"


def gen_spill_traffic() -> str:
    """docs/spills.md: the spilling configs' local-memory traffic per thread, compiled offline
    (calibration/h200/spill_traffic, scripts/spill_traffic.py)."""
    from sim.calibrate.spill_traffic import TABLE
    from sim.resources import shipped

    rows = json.loads(shipped(TABLE).read_text())["records"]
    lines = ["| kernel | BLOCK × warps | elements per thread | registers | local size (words) | loads + stores (B) |"
             " loads + stores / (2 × local size) |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r["n_spills"]:
            moved = r["spill_store_bytes"] + r["spill_load_bytes"]
            lines.append(f"| {r['kernel'].rsplit('_', 1)[-1]} | {r['BLOCK']} × {r['num_warps']} | "
                         f"{r['elements_per_thread']:g} | {r['n_regs']} | {r['n_spills']} | {moved} | "
                         f"{moved / (8 * r['n_spills']):.2f} |")
    return "\n".join(lines) + "\n"


def gen_comm_release_loss() -> str:
    """docs/communication.md: topology.release_loss_units fitted on the single-GPU calibration data and on
    machine P's GPU 0 (held out), and each rule's rms log error on both with the calibration's value
    (sim.calibrate.gemm_release_fit)."""
    import json
    import math

    from sim.calibrate.comm_sm_share import gemm_units
    from sim.calibrate.gemm_release_fit import (
        RULES,
        fit_release_loss,
        release_cells,
        rms_log,
        slowdown,
    )
    from sim.hardware import load_profile

    hw = load_profile("h200-measured")
    files = (("calibration (calibration/h200/raw/gemm_release_gated)",
              ROOT / "calibration" / "h200" / "raw" / "gemm_release_gated" / "gemm_release.json"),
             ("machine P, held out (validation/h200x2/machine_P/gemm_release)",
              MACHINE_P_DIR / "gemm_release" / "gemm_release.json"))
    fits = {name: fit_release_loss(release_cells(json.loads(path.read_text())), hw) for name, path in files}
    calibrated = fits[files[0][0]]
    assert calibrated is not None
    loss = round(calibrated.value, 2)
    lines = ["| gemm_release cells | L fitted there (90 % bootstrap) | cells | rms log error with L = "
             f"{loss:g}, all cells: " + ", ".join(RULES) + " | more than one unit per CTA only |",
             "|---|---:|---:|---|---|"]
    for name, path in files:
        cells = release_cells(json.loads(path.read_text()))
        fit = fits[name]
        assert fit is not None
        errs: dict[str, list[tuple[bool, float]]] = {r: [] for r in RULES}
        for c in cells:
            units = gemm_units(hw, c.m, c.n, c.k)
            multi = math.ceil(units / min(units, hw.sm_count) - 1e-9) > 1
            for r in RULES:
                pred = slowdown(r, c.alone_us, units, hw.sm_count, c.spins, c.release_us, loss)
                errs[r].append((multi, math.log(pred) - math.log(c.measured)))
        every = ", ".join(f"{rms_log([e for _, e in errs[r]]):.3f}" for r in RULES)
        multi_only = ", ".join(f"{rms_log([e for m, e in errs[r] if m]):.3f}" for r in RULES)
        lines.append(f"| {name} | {fit.value:.2f} ({fit.spread[0]:.2f}–{fit.spread[1]:.2f}) | {fit.n} | {every} | "
                     f"{multi_only} |")
    return "\n".join(lines) + "\n"


def gen_comm_ddp_breakdown() -> str:
    """docs/communication.md: rank 0's profiled DDP steps split by sim.calibrate.ddp_timeline (runs w3, H)."""
    import json

    from sim.calibrate.ddp_timeline import kernel_breakdown

    lines = ["| DDP workload, 4096 tokens [run] | exposed (median steps) | all-reduce kernels | compute lost beside them "
             "| (no reference) | backward idle | tail |", "|---|---:|---:|---:|---:|---:|---:|"]
    for run, path in (("w3", COMM_DIR / "w3" / "comm.json"), ("H", MACHINE_H_DIR / "comm.json")):
        for rec in json.loads(path.read_text())["records"]:
            if rec.get("bench") != "ddp_variant" or not rec.get("timeline_rank0"):
                continue
            b = kernel_breakdown(rec["timeline_rank0"])
            if b is None:
                continue
            lines.append(f"| {rec['variant']} [{run}] | {rec['exposed_comm_us']:.0f} µs | {b.allreduce_kernels}: "
                         f"{b.allreduce_busy_us:.0f} µs | {b.beside_allreduce_loss_us:.0f} µs | "
                         f"{b.beside_allreduce_unpriced_us:.0f} µs | {b.backward_idle_us:.0f} µs | {b.tail_us:.0f} µs |")
    return "\n".join(lines) + "\n"


def fig_comm_ddp_machine_spread() -> str:
    """The widest ratio between machines w3 and H of one DDP workload's exposed communication."""
    import json

    def exposed(path: Path) -> dict[tuple[str, int], float]:
        return {(r["variant"], r["tokens"]): r["exposed_comm_us"] for r in json.loads(path.read_text())["records"]
                if r.get("bench") == "ddp_variant" and r.get("exposed_comm_us") is not None}

    w3, h = exposed(COMM_DIR / "w3" / "comm.json"), exposed(MACHINE_H_DIR / "comm.json")
    key = max(set(w3) & set(h), key=lambda k: max(w3[k], h[k]) / min(w3[k], h[k]))
    return f"{key[0]}, {key[1]} tokens: {w3[key]:.0f} µs exposed on w3, {h[key]:.0f} µs on H"


def _gemm_beside_ratios(calibrated: bool) -> list[float]:
    """Duration / the same kernel's median alone of every nvjet GEMM that starts while an all-reduce kernel
    runs, in rank 0's profiled DDP steps of runs w3 and H (the calibrated workload's, or the others')."""
    import json
    import statistics

    from sim.calibrate.comm_contention import CALIBRATED_DDP

    out = []
    for path in (COMM_DIR / "w3" / "comm.json", MACHINE_H_DIR / "comm.json"):
        for r in json.loads(path.read_text())["records"]:
            tl = r.get("timeline_rank0")
            if r.get("bench") != "ddp_variant" or not tl:
                continue
            key = (r["hidden"], r["ffn"], r.get("layers", 1), float(r["bucket_cap_mb"]), bool(r.get("gradient_as_bucket_view")))
            if (key in CALIBRATED_DDP) != calibrated:
                continue
            nccl = [(e["start_us"], e["start_us"] + e["dur_us"]) for e in tl if "nccl" in e["name"].lower()]
            gemms = [e for e in tl if e["name"].startswith("nvjet")]
            alone: dict[str, list[float]] = {}
            beside = []
            for e in gemms:
                s, t = e["start_us"], e["start_us"] + e["dur_us"]
                if not any(a < t and b > s for a, b in nccl):
                    alone.setdefault(e["name"], []).append(e["dur_us"])
                elif any(a <= s < b for a, b in nccl):
                    beside.append(e)
            out += [e["dur_us"] / statistics.median(alone[e["name"]]) for e in beside if e["name"] in alone]
    return out


def fig_comm_ddp_races() -> str:
    """How often a bucket's all-reduce started before the compute stream's next kernel when both were
    ready at once (sim.calibrate.ddp_timeline.collective_races over the profiled steps of w3, H, ranks)."""
    import json

    from sim.calibrate.ddp_timeline import (
        RACE_WINDOW_US,
        collective_races,
        profile_timelines,
        race_summary,
    )

    races, calibrated = [], []
    for path in (COMM_DIR / "w3" / "comm.json", MACHINE_H_DIR / "comm.json", COMM_DIR / "ranks" / "comm.json"):
        for rec in json.loads(path.read_text())["records"]:
            for tl in profile_timelines(rec):
                found = collective_races(tl)
                races += found
                if rec.get("variant") == "mlp4096_b25":
                    calibrated += found
    n, first, _ = race_summary(races)
    cn, cfirst, _ = race_summary(calibrated)
    return (f"in {first} of {n} races (the next kernel started within {RACE_WINDOW_US:g} µs of the bucket copy; "
            f"the calibrated workload's: {cfirst} of {cn})")


def fig_comm_gemm_beside_ar() -> str:
    """Median and range of the GEMM-beside-all-reduce ratios (workloads no fit uses; the calibrated one)."""
    import statistics

    unseen, cal = _gemm_beside_ratios(False), _gemm_beside_ratios(True)
    return (f"{min(unseen):.2f}–{max(unseen):.2f}× (median {statistics.median(unseen):.2f}×, {len(unseen)} kernels; "
            f"the calibrated workload's {min(cal):.2f}–{max(cal):.2f}×)")


def fig_comm_gemm_beside_ar_rule() -> str:
    """The engine's slowdown of a machine-filling kernel beside a resident collective: 1 / (1 - its SM share)."""
    from sim.hardware import load_profile

    hw = load_profile("h200-nvl2")
    sms = hw.sm_count
    channels = int(hw.fabric.channels)
    return f"{1 / (1 - channels / sms):.2f}× ({channels} of {sms} SMs)"


def fig_ddp_host(field_name: str) -> str:
    """A host.ddp value of the h200-nvl2 profile, in µs."""
    from sim.hardware import load_profile

    value = getattr(load_profile("h200-nvl2"), field_name)
    return f"{value * 1e6:.0f} µs"


def fig_ddp_host_unseen() -> str:
    """The DDP replay's host time per step against the measured one (cpu_enqueue, rank 0) on the 2-rank DDP
    steps of workloads no fit uses: median |error| with and without sync."""
    import json
    import statistics

    from sim.calibrate.comm_contention import CALIBRATED_DDP
    from sim.calibrate.comm_fit import ddp_listed_host_us
    from sim.hardware import load_profile

    hw = load_profile("h200-nvl2")
    coll_us = (hw.fabric.collective_host_s("all_reduce") or 0.0) * 1e6
    errs: dict[bool, list[float]] = {True: [], False: []}
    for run in sorted(p.name for p in COMM_DIR.iterdir() if (p / "comm.json").is_file()):
        for r in json.loads((COMM_DIR / run / "comm.json").read_text())["records"]:
            if r.get("bench") not in ("ddp_step", "ddp_variant") or r.get("world_size") != 2 or r.get("cpu_enqueue_us") is None:
                continue
            key = (r["hidden"], r["ffn"], r.get("layers", 1), float(r["bucket_cap_mb"]), bool(r.get("gradient_as_bucket_view")))
            if key in CALIBRATED_DDP:
                continue
            for sync, measured in ((True, r["cpu_enqueue_us"]), (False, r["cpu_enqueue_no_comm_us"])):
                listed, hooks = ddp_listed_host_us(*key[:4], r["tokens"], sync=sync, hw=hw, collective_host_us=coll_us)
                model = listed + (hw.ddp_forward_s + hooks * hw.ddp_hook_s) * 1e6
                errs[sync].append(abs(model / measured - 1))
    n = len(errs[True])
    return (f"{n} steps, median |error| {statistics.median(errs[True]) * 100:.0f} % with sync, "
            f"{statistics.median(errs[False]) * 100:.0f} % under no_sync")


PROSE: dict[str, Generator] = {
    "comm-gemm8192-ar256": fig_comm_cell("gemm_8192x8192x8192_bf16", 256, "w3"),
    "comm-gemm4096-ar256": fig_comm_cell("gemm_4096x4096x4096_bf16", 256, "w3"),
    "comm-knife-edge-cell": fig_comm_cell("gemm_4096x16384x4096_bf16", 256, "w3"),
    "comm-knife-edge-shifted": Generator(fig_comm_knife_edge, slow=True),
    "comm-host-bound-2048": fig_comm_cell("gemm_2048x2048x2048_bf16", 4, "w3"),
    "comm-ddp-calibrated": fig_comm_ddp("calibrated"),
    "comm-ddp-unseen": fig_comm_ddp("unseen"),
    "comm-ddp-machine-spread": Generator(fig_comm_ddp_machine_spread, slow=False),
    "comm-gemm-beside-ar": Generator(fig_comm_gemm_beside_ar, slow=False),
    "comm-ddp-races": Generator(fig_comm_ddp_races, slow=False),
    "comm-gemm-beside-ar-rule": Generator(fig_comm_gemm_beside_ar_rule, slow=False),
    "comm-ddp-host-forward": Generator(lambda: fig_ddp_host("ddp_forward_s"), slow=False),
    "comm-ddp-host-hook": Generator(lambda: fig_ddp_host("ddp_hook_s"), slow=False),
    "comm-ddp-host-unseen": Generator(fig_ddp_host_unseen, slow=False),
    "seed-b8192-loss": Generator(fig_seed_b8192_loss, slow=False),
    "seed-compiled-wins": Generator(fig_seed_compiled_wins, slow=False),
    "seed-compiled-worst-tokens": Generator(fig_seed_compiled_worst_tokens, slow=False),
    "seed-auto-from-tokens": Generator(fig_seed_auto_from_tokens, slow=False),
    "seed-auto-gain": Generator(fig_seed_auto_gain, slow=False),
    "band-example-gain": Generator(lambda: fig_band_example("gain"), slow=False),
    "band-example-time": Generator(lambda: fig_band_example("time"), slow=False),
    "seed-compute-share": Generator(fig_seed_compute_share, slow=True),
    "seed-gemm-attainable": Generator(fig_seed_gemm_attainable, slow=True),
    "seed-fused-hbm-less": Generator(fig_seed_fused_hbm_less, slow=True),
    # kernelsim validate (slow: about a minute)
    **{f"val-kernel-{f}": _val("kernel", [f], "unseen") for f in
       ("copy", "elementwise", "fused_elementwise", "gemm", "attention", "layout", "reduction")},
    "val-kernel-attention-n": Generator(fig_val_attention_cases, slow=True),
    **{f"val-step-{name}-{split}": _val("step", fams, split, digits) for name, fams, digits, splits in (
        ("mlp-eager", ["bias_gelu_dropout/baseline"], 1, BOTH), ("mlp-fused", FUSED_MLP, 0, BOTH),
        ("mlp-compiled", ["bias_gelu_dropout/compiled"], 0, BOTH),
        ("block-eager", ["transformer_block/baseline"], 0, UNSEEN),
        ("block-compiled", ["transformer_block/compiled"], 0, UNSEEN),
        ("decode-graph", ["serving_decode/cuda_graph"], 0, BOTH),
        ("decode-eager", ["serving_decode/baseline"], 0, UNSEEN)) for split in splits},
    **{f"val-gains-{split}": Generator((lambda s: lambda: fig_val_gains(s))(split), slow=True)
       for split in ("unseen", "calibrated")},
    "val-bands-loo": Generator(lambda: fig_val_band_coverage("leave_one_out"), slow=True),
    "val-bands-case-out": Generator(lambda: fig_val_band_coverage("leave_case_out"), slow=True),
    "val-decode-eager-range": Generator(fig_val_decode_eager_range, slow=True),
    "val-decode-eager-median": Generator(fig_val_decode_eager_median, slow=True),
    "val-decode-graph-range": Generator(fig_val_decode_graph_range, slow=True),
    "val-decode-graph-median": Generator(fig_val_decode_graph_median, slow=True),
    "val-sustained": Generator(fig_val_sustained, slow=True),
    "traces-host-heldout-n": Generator(fig_traces_host_heldout_n, slow=True),
    # held-out traces predicted against their unprofiled step (docs/traces.md)
    "heldout-trace-median": fig_heldout("trace", "median"),
    "decode-unprofiled-ms": fig_profiled_decode("unprofiled"),
    "measured-replay-max": Generator(fig_measured_replay_max, slow=True),
    "decode-profiled-ms": fig_profiled_decode("profiled"),
    "heldout-trace-max": fig_heldout("trace", "max"),
    "heldout-model-median": fig_heldout("model", "median"),
    "heldout-model-max": fig_heldout("model", "max"),
    "heldout-model-range": fig_heldout("model", "range"),
    "heldout-trace-range-device-right": fig_heldout("trace", "range", device_right=True),
    **{f"comm-{kind}-{stat.split('_')[0]}": fig_comm(f"collective_{kind.replace('-', '_')}", stat)
       for kind in ("device-bound", "host-bound") for stat in ("median_abs", "max_abs")},
    **{f"host-gain-{k.replace('/', '-').replace('_', '-')}": fig_host_gain(k)
       for k in ("trace/cuda_graph", "model/cuda_graph", "trace/compiled", "model/compiled")},
    # thresholds of the trace importer and the host model (docs/traces.md)
    "gap-min-us": fig_constant("sim.ingest.build", "GAP_MIN_US"),
    "kernelless-work-us": fig_constant("sim.ingest.build", "KERNELLESS_WORK_US"),
    "default-launch-latency-us": fig_constant("sim.ingest.build", "DEFAULT_LAUNCH_LATENCY_US"),
    "gap-cap-us": fig_constant("sim.costmodel.host", "GAP_CAP_US"),
    # advise's default thresholds (docs/advise.md)
    **{f"advise-default-{f.replace('_', '-')}": fig_advice_default(f) for f in (
        "min_hotspot_share", "near_ceiling_headroom", "dispatch_margin", "max_bucket_regression", "min_coverage")},
    # the measured profile
    "h200-power-limit": Generator(fig_power_limit, slow=False),
    "h200-sustained-clock": Generator(fig_sustained_clock, slow=False),
    "h200-sustained-slowdown": Generator(fig_sustained_slowdown, slow=False),
}


def generated_files() -> dict[str, Generator]:
    """Whole generated files: path relative to the repository → its generator."""
    from sim.reference import SCHEMA_KINDS, json_schema_text, reference_markdown

    files: dict[str, Generator] = {"docs/reference.md": Generator(reference_markdown, slow=False),
                                   "docs/validation.md": Generator(gen_validation_md, slow=True)}
    for kind in SCHEMA_KINDS:
        files[f"docs/schema/{kind}.schema.json"] = Generator((lambda k: lambda: json_schema_text(k))(kind), slow=False)
    return files


def refresh(only: set[str] | None = None, include_slow: bool = True) -> dict[str, tuple[str, str]]:
    """Every target (block name or file path) → (committed text, generated text); blocks are computed once."""
    out: dict[str, tuple[str, str]] = {}
    for rel, gen in generated_files().items():
        if only and rel not in only and not ("reference" in only and rel != "docs/validation.md"):
            continue
        if gen.slow and not include_slow:
            continue
        path = ROOT / rel
        out[rel] = (path.read_text(encoding="utf-8") if path.exists() else "", gen.make())
    cache: dict[str, str] = {}
    for rel in DOC_FILES:
        text = (ROOT / rel).read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            name = m["name"]
            if name not in BLOCKS:
                raise SystemExit(f"{rel}: unknown generated block {name!r} (known: {', '.join(BLOCKS)})")
            if (only and name not in only) or (BLOCKS[name].slow and not include_slow):
                continue
            if name not in cache:
                cache[name] = BLOCKS[name].make()
            out[f"{rel}#{name}"] = (m["body"], cache[name])
        for m in FIG.finditer(text):
            name = m["name"]
            if name not in PROSE:
                raise SystemExit(f"{rel}: unknown prose figure {name!r} (known: {', '.join(PROSE)})")
            if (only and name not in only) or (PROSE[name].slow and not include_slow):
                continue
            if name not in cache:
                cache[name] = PROSE[name].make()
            out[f"{rel}@{name}"] = (m["body"], cache[name])
    return out


def write(results: dict[str, tuple[str, str]]) -> list[str]:
    """Rewrite the stale targets; returns their names."""
    stale = [k for k, (old, new) in results.items() if old != new]
    for rel in generated_files():
        if rel in stale:
            (ROOT / rel).parent.mkdir(parents=True, exist_ok=True)
            (ROOT / rel).write_text(results[rel][1], encoding="utf-8")
    for rel in DOC_FILES:
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")

        def repl(m: re.Match[str], rel: str = rel) -> str:
            key = f"{rel}#{m['name']}"
            body = results[key][1] if key in results else m["body"]
            return m.group(1) + body + m.group(4)

        def fig(m: re.Match[str], rel: str = rel) -> str:
            key = f"{rel}@{m['name']}"
            body = results[key][1] if key in results else m["body"]
            return m.group(1) + body + m.group(4)

        new = FIG.sub(fig, BLOCK.sub(repl, text))
        if new != text:
            path.write_text(new, encoding="utf-8")
    for rel, data in FIGURES.items():
        (ROOT / rel).write_bytes(data)
    return stale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1] if __doc__ else None)
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when something is stale")
    p.add_argument("--fast", action="store_true", help="skip the slow blocks (advise, serve)")
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help="only these blocks or files ('reference': the reference and schemas)")
    args = p.parse_args(argv)
    results = refresh(set(args.only) if args.only else None, include_slow=not args.fast)
    stale = [k for k, (old, new) in results.items() if old != new]
    if args.check:
        for k in stale:
            print(f"stale: {k}")
        if stale:
            print("run: python scripts/gen_docs.py")
        return 1 if stale else 0
    write(results)
    for k in stale:
        print(f"updated {k}")
    print(f"{len(results)} generated targets, {len(stale)} updated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
