"""The kernelsim command line: the only place that parses arguments and creates output folders.

Exit codes: 0 success, 2 bad input (a clear message, nothing written), 1 internal error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from sim.errors import InfeasibleError, InputError, KernelsimError
from sim.version import __version__

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise InputError(f"{self.prog}: {message}")


def _busy(text: str) -> AbstractContextManager[Any]:
    from sim.report.progress import busy

    return busy(text)


def _out_path(value: str, flag: str) -> Path:
    from sim.outputs import check_output_path

    return check_output_path(value, flag)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from sim.outputs import dumps, write_files_atomic
    from sim.report.perfetto import trace_events
    from sim.report.tables import render_run
    from sim.run import load_scenario, run_scenario

    json_out = _out_path(args.json, "--json") if args.json is not None else None
    trace_out = _out_path(args.trace, "--trace") if args.trace is not None else None
    plots_dir = _out_dir(args.plots, "--plots") if args.plots is not None else None
    report_dir = _out_dir(args.report, "--report") if args.report is not None else None
    scn = load_scenario(Path(args.scenario), args.hardware or None)
    if args.trace_bucket is not None and not 0 <= args.trace_bucket < len(scn.buckets):
        raise InputError("--trace-bucket out of range", value=args.trace_bucket,
                         expected=f"0..{len(scn.buckets) - 1}")
    kineto_dir = _out_dir(args.kineto, "--kineto") if args.kineto is not None else None
    n = len(scn.hardware) * (len(scn.spec.variants) + 1) * len(scn.buckets)
    with _busy(f"simulating {n} hardware × variant × bucket steps"):
        result, traces = run_scenario(scn, keep_traces=trace_out is not None or bool(plots_dir or report_dir)
                                      or args.kernels or kineto_dir is not None)
    _check_finite(result, [args.scenario, *(args.hardware or [])])
    if args.kernels:
        result = {**result, "kernels": _kernel_figures(scn, result, traces, args.trace_bucket)}
    # Everything computed: now write outputs, --json and --trace together (both or neither).
    files: list[tuple[Path, bytes]] = []
    if trace_out is not None:
        bi = args.trace_bucket
        if bi is None:
            bi = max(range(len(scn.buckets)), key=lambda i: (scn.buckets[i].weight, -i))
        names = [b["name"] for b in result["hardware"][0]["variants"][0]["buckets"]]  # "tokens=128", not a dict
        chosen = [(f"{hw} / {var} / {names[b]}", tr)
                  for (hw, var, b), tr in traces.items() if b == bi]
        files.append((trace_out, dumps(trace_events(chosen), trace_out).encode("utf-8")))
    if json_out is not None:
        files.append((json_out, dumps(result, json_out).encode("utf-8")))
    write_files_atomic(files)
    if not args.quiet:
        render_run(result, console, buckets=args.buckets, wide=args.wide)
        if args.kernels:
            from sim.report.tables import render_kernels

            render_kernels(result["kernels"], console, wide=args.wide)
    if json_out is not None:
        console.print(f"wrote {json_out}", markup=False)
    if trace_out is not None:
        console.print(f"wrote {trace_out} (open it at https://ui.perfetto.dev)", markup=False)
    _write_run_plots_and_report(scn, result, traces, plots_dir, report_dir, args.trace_bucket, console)
    if kineto_dir is not None:
        _write_kineto(scn, result, traces, kineto_dir, args.trace_bucket, console)
    return EXIT_OK


def _write_kineto(scn: Any, result: dict[str, Any], traces: dict[Any, Any], out_dir: Path, bucket: int | None,
                  console: Console) -> None:
    """`run --kineto DIR`: one Kineto trace per hardware × variant (× rank) of one bucket."""
    from sim.outputs import dumps, write_text_atomic
    from sim.ranks import split_ranks
    from sim.report.kineto import kineto_trace

    bi = bucket if bucket is not None else max(range(len(scn.buckets)), key=lambda i: (scn.buckets[i].weight, -i))
    gpus = {hw.name: hw.gpu for hw in scn.hardware}
    name = result["hardware"][0]["variants"][0]["buckets"][bi]["name"]
    written = 0
    with _busy(f"writing Kineto traces into {escape(str(out_dir))}"):
        for (hw, var, b), tr in traces.items():
            if b != bi:
                continue
            for rank, sub in split_ranks(tr):
                suffix = f"__{rank.replace(' ', '')}" if rank else ""
                label = f"{hw} / {var} / {name}" + (f" / {rank}" if rank else "")
                write_text_atomic(out_dir / f"{hw}__{var}{suffix}.json", dumps(kineto_trace(sub, gpus[hw], label)))
                written += 1
    console.print(f"wrote {written} Kineto traces of {name} to {out_dir}", markup=False)


def _kernel_figures(scn: Any, result: dict[str, Any], traces: dict[Any, Any], bucket: int | None) -> dict[str, Any]:
    """`run --kernels`: per hardware and variant, every kernel of one bucket (the --trace bucket)."""
    from sim.report.kernels import kernel_rows

    bi = bucket if bucket is not None else max(range(len(scn.buckets)), key=lambda i: (scn.buckets[i].weight, -i))
    profiles = {hw.name: hw for hw in scn.hardware}
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for (hw_name, var, b), tr in traces.items():
        if b == bi:
            out.setdefault(hw_name, {})[var] = kernel_rows(tr, profiles[hw_name])
    return {"bucket": result["hardware"][0]["variants"][0]["buckets"][bi]["name"], "hardware": out}


def _check_finite(result: Any, inputs: Sequence[str]) -> None:
    """A result with an inf or NaN (an input value too extreme for the model) is bad input, named."""
    import math

    stack: list[tuple[str, Any]] = [("", result)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{path}.{k}" if path else str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", x) for i, x in enumerate(v))
        elif isinstance(v, float) and not math.isfinite(v):
            raise InputError(f"the result {path} is {v}: an input value is too extreme for the model",
                             file=", ".join(inputs), expected="profile and workload values of realistic size")


def _out_dir(value: str, flag: str) -> Path:
    from sim.outputs import check_output_path

    return check_output_path(value, flag, folder=True)


def _write_run_plots_and_report(scn: Any, result: dict[str, Any], traces: dict[Any, Any], plots_dir: Path | None,
                                report_dir: Path | None, bucket: int | None, console: Console) -> None:
    """`run --plots DIR` and `--report DIR` (the report embeds the plots; without --plots they go in DIR/plots)."""
    if plots_dir is None and report_dir is None:
        return
    from sim.outputs import write_text_atomic
    from sim.report.html import render_page, run_tables
    from sim.report.plots import write_run_plots

    target = plots_dir if plots_dir is not None else Path(report_dir or ".") / "plots"
    with _busy(f"drawing plots into {escape(str(target))}"):
        infos = write_run_plots(result, traces, target, timeline_bucket=bucket)
        if report_dir is not None:
            page = render_page(f"kernelsim: {result['scenario']}", run_tables(result), infos, target,
                               Path(scn.file).read_text(encoding="utf-8"), scn.file)
            write_text_atomic(report_dir / "index.html", page)
    console.print(f"wrote {len(infos)} plots to {target}", markup=False)
    if report_dir is not None:
        console.print(f"wrote {report_dir / 'index.html'}", markup=False)


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    from sim.outputs import write_text_atomic
    from sim.report.html import render_page, sweep_tables
    from sim.report.plots import write_sweep_plots
    from sim.sweep import load_sweep, run_sweep
    from sim.sweep.tables import render_sweep_summary

    for flag, value in (("--out", args.out), ("--plots", args.plots), ("--report", args.report)):
        if value is not None:
            _out_dir(value, flag)
    plan = load_sweep(Path(args.scenario))
    out = _out_dir(args.out if args.out is not None else f"sweep_{plan.scenario.spec.name}", "--out")
    plots_dir = None if args.no_plots else _out_dir(args.plots, "--plots") if args.plots is not None else out / "plots"
    report_dir = _out_dir(args.report, "--report") if args.report is not None else None
    err = Console(stderr=True)
    outcome = run_sweep(plan, out, workers=args.workers, executor=args.executor, scheduler=args.scheduler,
                        resume=args.resume, progress=not args.quiet, console=err)
    manifest = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    with _busy("drawing plots") if not args.quiet else nullcontext():
        infos = write_sweep_plots(outcome.records, plan.axes, list(plan.variants), plots_dir) if plots_dir else []
        if report_dir is not None:
            page = render_page(f"kernelsim sweep: {plan.scenario.spec.name}", sweep_tables(manifest), infos,
                               plots_dir, plan.text, str(plan.file))
            write_text_atomic(report_dir / "index.html", page)
    render_sweep_summary(plan, outcome, console)
    console.print(f"wrote {', '.join(str(f) for f in outcome.files)}", markup=False)
    if plots_dir is not None:
        console.print(f"wrote {len(infos)} plots to {plots_dir}", markup=False)
    if report_dir is not None:
        console.print(f"wrote {report_dir / 'index.html'}", markup=False)
    if plan.points and not outcome.summary["counts"]["ok"]:
        counts = outcome.summary["counts"]
        first = (outcome.summary["not_run"] or [{"reason": "?"}])[0]["reason"]
        raise InputError(f"no point of the sweep ran ({counts['invalid']} invalid, {counts['infeasible']} infeasible; "
                         f"see {out / 'sweep.json'}); the first: {first}", file=str(plan.file))
    return EXIT_OK


def cmd_profiles(args: argparse.Namespace, console: Console) -> int:
    from sim.hardware import list_profiles, load_profile
    from sim.report.tables import Col, print_table

    rows = [(name, path, load_profile(str(path))) for name, path in list_profiles().items()]
    print_table(console, "hardware profiles", [
        Col("name", lambda r: r[0], numeric=False),
        Col("gpu", lambda r: r[2].gpu, numeric=False),
        Col("SMs", lambda r: str(r[2].sm_count)),
        Col("HBM GB/s", lambda r: f"{r[2].hbm_peak_bps / 1e9:.0f}"),
        Col("bf16 TFLOP/s", lambda r: f"{r[2].tensor_flops.get('bf16', 0) / 1e12:.0f}"),
        Col("measured", lambda r: "yes" if r[2].measured else "no", numeric=False),
        Col("file", lambda r: str(r[1]), numeric=False),
    ], rows)
    return EXIT_OK


def cmd_diff(args: argparse.Namespace, console: Console) -> int:
    from sim.outputs import write_json_atomic
    from sim.report.diff import diff_runs, load_run
    from sim.report.tables import render_diff

    json_out = _out_path(args.json, "--json") if args.json is not None else None
    a, b = load_run(Path(args.a)), load_run(Path(args.b))
    pair = False
    if args.pair_profiles:
        for path, doc in ((args.a, a), (args.b, b)):
            if len(doc["hardware"]) != 1:
                raise InputError("--pair-profiles needs one hardware profile per file", file=path,
                                 value=", ".join(h["name"] for h in doc["hardware"]))
        pair = True
    diff = diff_runs(a, b, pair_profiles=pair)
    if not diff["rows"]:
        raise InputError("the two runs have no hardware × variant × bucket in common", file=args.b,
                         expected="two runs of one scenario (or --pair-profiles for one profile each)")
    if json_out is not None:
        write_json_atomic(json_out, diff)
    render_diff(diff, args.a, args.b, console)
    if json_out is not None:
        console.print(f"wrote {json_out}", markup=False)
    return EXIT_OK


def cmd_schema(args: argparse.Namespace, console: Console) -> int:
    from sim.outputs import write_text_atomic
    from sim.reference import json_schema_text

    text = json_schema_text(args.kind)
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    out = _out_path(args.output, "-o")
    write_text_atomic(out, text)
    console.print(f"wrote {out}", markup=False)
    return EXIT_OK


# -- traces (import-trace, replay): sim/ingest and sim/replay ---------------------------------
def cmd_import_trace(args: argparse.Namespace, console: Console) -> int:
    from sim.ingest import import_trace, workload_yaml
    from sim.outputs import write_text_atomic
    from sim.replay import step_graph

    out = _out_path(args.output, "-o")
    trace = Path(args.trace)
    with _busy(f"reading {escape(str(trace))}"):
        step = import_trace(trace, args.step)
        step_graph(step, trace)  # the workload must build through kernelsim's own schema and loader
    write_text_atomic(out, workload_yaml(step, trace))
    fam = step.family_counts()
    console.print(f"{trace} · {step.events.step.name}: {sum(fam.values())} GPU activities "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(fam.items()))}), {len(step.unpriced())} unpriced, "
                  f"measured step {step.measured_time_us:.1f} us", markup=False)
    for note in step.notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"wrote {out}", markup=False)
    return EXIT_OK


def _host_speed(value: str | None, host: str, mode: str) -> float | str | None:
    """--host-speed: "trace" or a positive number (1, the profile's reference host speed); None (not given): the
    reference speed with the table as fitted; only with --mode predict --host model."""
    if value is None:
        return None
    if host != "model" or mode != "predict":
        raise InputError("--host-speed prices the host model's costs", value=value,
                         expected="--mode predict --host model with it")
    if value == "trace":
        return value
    try:
        speed = float(value)
    except ValueError:
        speed = float("nan")
    if not 0 < speed < float("inf"):
        raise InputError("--host-speed is not a host speed", value=value,
                         expected="'trace' or a number > 0 (1 = the profile's reference host speed)")
    return speed


def _clock_speed(clock_us: float, host_speed: str | None, host: str, mode: str, hw: Any) -> float:
    """--host-clock: the host speed of a host whose clock reads `clock_us` (sim.costmodel.host.speed_at_clock);
    only with --mode predict --host model, not with --host-speed, on a profile with a reference clock."""
    from sim.costmodel.host import speed_at_clock

    if host != "model" or mode != "predict":
        raise InputError("--host-clock prices the host model's costs", path="--host-clock", value=clock_us,
                         expected="--mode predict --host model with it")
    if host_speed is not None:
        raise InputError("--host-clock and --host-speed both set the host speed", path="--host-clock", value=clock_us,
                         expected="one of them")
    if not 0 < clock_us < float("inf"):
        raise InputError("--host-clock is not a host clock", path="--host-clock", value=clock_us, expected="us per call > 0")
    speed = speed_at_clock(clock_us, hw)
    if speed is None:
        raise InputError("the profile has no reference host clock", path="host.clock_us", value=None,
                         expected="a profile fitted from clocked host steps (e.g. h200-measured)")
    return speed


def cmd_replay(args: argparse.Namespace, console: Console) -> int:
    from sim.hardware import load_profile
    from sim.outputs import dumps, write_files_atomic
    from sim.replay import replay
    from sim.report.replay import render_replay

    json_out = _out_path(args.json, "--json") if args.json is not None else None
    trace_out = _out_path(args.trace_out, "--trace") if args.trace_out is not None else None
    hw = load_profile(args.hardware, Path.cwd(), path="--hardware")
    if args.unprofiled_us is not None and not 0 < args.unprofiled_us < float("inf"):
        raise InputError("--unprofiled-us is not a step time", value=args.unprofiled_us,
                         expected="microseconds > 0")
    host_speed = _host_speed(args.host_speed, args.host, args.mode)
    if args.host_clock is not None:
        host_speed = _clock_speed(args.host_clock, args.host_speed, args.host, args.mode, hw)
    with _busy(f"replaying {escape(args.trace)}"):
        result, sim_trace = replay(Path(args.trace), hw, args.mode, args.step, host=args.host,
                                   keep_profiler=args.keep_profiler_cost, unprofiled_us=args.unprofiled_us,
                                   host_speed=host_speed)
    _check_finite(result, [args.trace, args.hardware])
    files: list[tuple[Path, bytes]] = []
    if trace_out is not None:
        from sim.report.perfetto import trace_events

        label = f"{result['step']} / {result['mode']} / {hw.name}"
        files.append((trace_out, dumps(trace_events([(label, sim_trace)]), trace_out).encode("utf-8")))
    if json_out is not None:
        files.append((json_out, dumps(result, json_out).encode("utf-8")))
    write_files_atomic(files)
    if not args.quiet:
        render_replay(result, console)
    for p in (json_out, trace_out):
        if p is not None:
            console.print(f"wrote {p}", markup=False)
    return EXIT_OK


def _add_trace_commands(sub: argparse._SubParsersAction) -> None:
    i = sub.add_parser("import-trace", help="turn one step of a PyTorch profiler trace into a workload YAML",
                       description="Import one step of a PyTorch profiler (Kineto) trace, plain or gzip JSON, "
                                   "as a workload file (docs/traces.md).")
    i.add_argument("trace", metavar="TRACE.json[.gz]", help="Chrome-format trace from torch.profiler")
    i.add_argument("-o", "--output", required=True, metavar="WORKLOAD.yaml", help="workload file to write")
    i.add_argument("--step", metavar="N", help="ProfilerStep#N, or a step index (default: the last step; "
                                               "the whole trace when it has no ProfilerStep# markers)")
    i.set_defaults(func=cmd_import_trace)
    r = sub.add_parser("replay", help="replay a profiler trace's step: measured durations or the cost model",
                       description="Replay one step of a PyTorch profiler trace through the engine and compare "
                                   "with its measured step time (docs/traces.md).")
    r.add_argument("trace", metavar="TRACE.json[.gz]", help="Chrome-format trace from torch.profiler")
    r.add_argument("--hardware", required=True, metavar="PROFILE", help="hardware profile name or YAML path")
    r.add_argument("--mode", choices=("measured", "predict"), default="measured",
                   help="measured: the trace's own durations; predict: kernels from the cost model")
    r.add_argument("--host", choices=("trace", "model"), default="trace",
                   help="predict mode's host time: trace (default) keeps the trace's own host timeline less the "
                        "profiler's per-event cost; model prices it from the profile (another CPU or framework)")
    r.add_argument("--host-speed", metavar="X|trace",
                   help="with --host model: how slow the host runs against the profile's reference host speed "
                        "(1, the default: the speed its host table was fitted at; 1.5 = every priced host cost "
                        "x 1.5); trace: the trace's own, from its clock ops (aten::empty, cudaLaunchKernel)")
    r.add_argument("--host-clock", type=float, metavar="US",
                   help="with --host model, instead of --host-speed: the host clock measured beside the step (us "
                        "per call of sim.calibrate.gpu.host_context.host_clock's tight loop); its host speed is the "
                        "profile's host.clock_level relation where applied, else US / host.clock_us")
    r.add_argument("--keep-profiler-cost", action="store_true",
                   help="with --host trace: keep the profiler's cost (predict the step as it was recorded)")
    r.add_argument("--unprofiled-us", type=float, metavar="US",
                   help="the step's time measured without the profiler: adds unprofiled_error to the result")
    r.add_argument("--step", metavar="N", help="ProfilerStep#N or a step index (default: the last step)")
    r.add_argument("--json", metavar="OUT", help="write the result as JSON (schema kernelsim.replay/v1)")
    r.add_argument("--trace", dest="trace_out", metavar="OUT.json", help="write a Perfetto/Chrome trace of the replay")
    r.add_argument("--quiet", action="store_true", help="print no tables")
    r.set_defaults(func=cmd_replay)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kernelsim", description=(
        "What-if simulator for GPU kernel decisions: predicts what fusing, specializing, re-laying-out or "
        "swapping a kernel does to the end-to-end step or request, per shape bucket, on a given GPU."))
    p.add_argument("--version", action="version", version=f"kernelsim {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    r = sub.add_parser("run", help="simulate a scenario: every variant × bucket × hardware profile",
                       description="Simulate a scenario file and print per-bucket and weighted results.")
    r.add_argument("scenario", help="scenario YAML file")
    r.add_argument("--hardware", action="append", metavar="PROFILE",
                   help="hardware profile name or YAML path (repeatable); replaces the scenario's list")
    r.add_argument("--json", metavar="OUT", help="write results as JSON (schema kernelsim.run/v1, docs/json.md)")
    r.add_argument("--trace", metavar="OUT.json", help="write a Perfetto/Chrome trace of one bucket")
    r.add_argument("--trace-bucket", type=int, metavar="INDEX",
                   help="bucket index for --trace and --kernels (default: the heaviest bucket)")
    r.add_argument("--kineto", metavar="DIR", help="write one bucket (--trace-bucket) per hardware × variant as "
                   "PyTorch profiler (Kineto) traces, for tools that read them (HTA, kernelsim import-trace)")
    r.add_argument("--quiet", action="store_true", help="print no tables")
    r.add_argument("--buckets", action="store_true",
                   help="also print every variant × bucket (split into column groups to fit the terminal)")
    r.add_argument("--kernels", action="store_true",
                   help="per kernel of one bucket: time, achieved GB/s and TFLOP/s, %% of peak, occupancy, registers, "
                   "limiter (also in --json as `kernels`)")
    r.add_argument("--wide", action="store_true",
                   help="print every variant × bucket as single wide tables, whatever the terminal width")
    r.add_argument("--plots", metavar="DIR", help="write plots (PNG) and plots.json to DIR")
    r.add_argument("--report", metavar="DIR", help="write a self-contained HTML report, DIR/index.html")
    r.set_defaults(func=cmd_run)
    pr = sub.add_parser("profiles", help="list hardware profiles", description="List shipped and local hardware profiles.")
    pr.set_defaults(func=cmd_profiles)
    d = sub.add_parser("diff", help="two run results (--json files) side by side per bucket",
                       description="Compare two `kernelsim run --json` files per hardware × variant × bucket: "
                       "before/after a model or profile change, or one scenario on two profiles "
                       "(--pair-profiles).")
    d.add_argument("a", metavar="A.json", help="first run result")
    d.add_argument("b", metavar="B.json", help="second run result")
    d.add_argument("--pair-profiles", action="store_true",
                   help="each file has one profile: compare them with each other whatever their names")
    d.add_argument("--json", metavar="OUT", help="write the rows as JSON (schema kernelsim.diff/v1)")
    d.set_defaults(func=cmd_diff)
    sc = sub.add_parser("schema", help="write the JSON Schema of a workload, scenario or hardware file (for editors)",
                        description="JSON Schema of one file kind, generated from kernelsim's own models; point "
                        "your editor's YAML support at it. The full reference: docs/reference.md.")
    sc.add_argument("kind", choices=("workload", "scenario", "hardware"), help="which file kind")
    sc.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: standard output)")
    sc.set_defaults(func=cmd_schema)
    sw = sub.add_parser("sweep", help="run a scenario's sweep grid (hardware × parameters) on all cores or Dask",
                        description="Expand the scenario's `sweep:` axes and run every point; docs/sweeps.md.")
    sw.add_argument("scenario", help="scenario YAML file with a `sweep:` section")
    sw.add_argument("--workers", type=int, metavar="N", help="processes (default: all cores)")
    sw.add_argument("--executor", choices=["local", "dask"], default="local",
                    help="local process pool, or dask.distributed (extra: kernelsim[distributed])")
    sw.add_argument("--scheduler", metavar="ADDRESS", help="with --executor dask: an existing scheduler "
                    "(default: start a LocalCluster)")
    sw.add_argument("--out", metavar="DIR", help="output folder (default: ./sweep_<scenario name>)")
    sw.add_argument("--resume", action="store_true", help="skip points already finished in --out")
    sw.add_argument("--plots", metavar="DIR", help="plots folder (default: OUT/plots)")
    sw.add_argument("--no-plots", action="store_true", help="write no plots")
    sw.add_argument("--report", metavar="DIR", help="write a self-contained HTML report, DIR/index.html")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    sw.set_defaults(func=cmd_sweep)
    _add_trace_commands(sub)
    _add_capture_command(sub)
    _add_calibration_commands(sub)
    _add_advise_command(sub)
    _add_serve_command(sub)
    return p


def _add_calibration_commands(sub: Any) -> None:
    from sim.commands_calibrate import cmd_calibrate, cmd_validate
    from sim.resources import data_path

    c = sub.add_parser("calibrate", help="measure a GPU (needs CUDA + kernelsim[gpu]) or refit raw data into a profile",
                       description="Measure microbenchmarks on this machine's GPU and fit a hardware profile, or fit "
                       "one from a raw folder on any machine (--from-raw).")
    c.add_argument("--out", required=True, metavar="PROFILE.yaml", help="the profile to write")
    c.add_argument("--from-raw", metavar="DIR", help="fit from this raw folder instead of measuring")
    c.add_argument("--raw", metavar="DIR", help="where to keep the raw measurements (default: a temporary folder)")
    c.add_argument("--quick", action="store_true",
                   help="measure only the groups that matter most (at most 90 s of GPU time); the rest keep the "
                   "shipped measured profile's numbers")
    c.add_argument("--base", default=None, metavar="PROFILE",
                   help="profile whose unmeasured numbers are kept (default: h200-sxm, the datasheet; for a quick "
                   "calibration h200-measured, so that the groups it skips keep measured numbers)")
    c.add_argument("--name", help="profile name (default: the file name)")
    c.add_argument("--host", choices=("fitted", "reference"), default="fitted",
                   help="host constants: 'fitted' (default) from this machine's host benchmarks, at its host's speed "
                   "of the moment; 'reference': keep --host-reference's whole host section (one calibration does not "
                   "pin host costs on VMs whose host speed flips between levels; what it measured goes into the notes)")
    c.add_argument("--host-reference", default="h200-measured", metavar="PROFILE",
                   help="profile whose host section --host reference keeps (default: h200-measured)")
    c.set_defaults(func=cmd_calibrate)
    v = sub.add_parser("validate", help="compare predictions with committed GPU measurements (error tables, thresholds)",
                       description="Offline (default): price every committed calibration record and simulate every "
                       "measured workload run, print error tables and check validation/thresholds.yaml (exit 3 when a "
                       "threshold is exceeded). --measure re-measures the workloads on a GPU first.")
    v.add_argument("--offline", action="store_true", help="compare committed measurements (the default)")
    v.add_argument("--measure", action="store_true", help="measure the validation workloads on this GPU first")
    v.add_argument("--profile", default="h200-measured", help="measured profile to validate (default: h200-measured)")
    v.add_argument("--base", default="h200-sxm", help="datasheet profile the fit started from (default: h200-sxm)")
    v.add_argument("--raw", default="calibration/h200/raw", type=data_path,
                   help="raw calibration folder (kernel-level rows; default: the shipped one)")
    v.add_argument("--cases", default="validation/h200/cases.yaml", type=data_path,
                   help="step-level cases file (default: the shipped one)")
    v.add_argument("--traces-out", default="tests/fixtures/traces", help="with --measure: where traces go")
    v.add_argument("--thresholds", default="validation/thresholds.yaml", type=data_path,
                   help="versioned thresholds file (default: the shipped one)")
    v.add_argument("--markdown", metavar="OUT.md", help="write the full tables as Markdown")
    v.add_argument("--json", metavar="OUT.json", help="write every row as JSON")
    v.add_argument("--write-bands", nargs="?", const="validation/bands.yaml", metavar="BANDS.yaml",
                   help="write the error-band table from this run (default path: validation/bands.yaml)")
    v.set_defaults(func=cmd_validate)


# -- capture: sim/capture (a PyTorch model's step -> a workload file; docs/capture.md) ------------
def _capture_params(items: list[str], flag: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        key, sep, val = item.partition("=")
        try:
            out[key.strip()] = float(val) if sep else float("nan")
        except ValueError:
            out[key.strip()] = float("nan")
        if not sep or not key.strip() or out[key.strip()] != out[key.strip()]:
            raise InputError("bad parameter", path=flag, value=item, expected="NAME=NUMBER")
        if out[key.strip()].is_integer():
            out[key.strip()] = int(out[key.strip()])
    return out


def cmd_capture(args: argparse.Namespace, console: Console) -> int:
    from sim.capture.cli import run_capture

    out = _out_path(args.output, "-o")
    params = _capture_params(args.param or [], "--param")
    buckets = []
    for spec in args.bucket or []:
        values, _, weight = spec.rpartition(":")
        try:
            w = float(weight)
        except ValueError:
            raise InputError("bad bucket", path="--bucket", value=spec, expected="NAME=V,NAME=V:WEIGHT") from None
        buckets.append({"params": _capture_params(values.split(","), "--bucket"), "weight": w})
    vary = [v for v in args.vary.split(",") if v] if args.vary is not None else None
    with _busy(f"capturing {escape(args.source)} on the meta device"):
        result = run_capture(args.source, params, vary=vary, buckets=buckets or None, name=args.name,
                             module_calls=not args.no_module_calls, keep_recordings=args.save_recording is not None,
                             sdpa_backend=args.sdpa_backend)
    if result.uncosted and args.strict:
        raise InputError("aten ops with no lowering (add them to sim/capture/lowering.yaml)", path=args.source,
                         value=sorted(result.uncosted), expected="every op costed (--strict)")
    from sim.outputs import write_text_atomic

    write_text_atomic(out, result.yaml())
    if args.scenario_out is not None:
        from sim.capture.api import scenario_yaml

        scn = _out_path(args.scenario_out, "--scenario")
        write_text_atomic(scn, scenario_yaml(result.workload["name"], out, scn,
                                             args.hardware or ["h200-measured", "h100-sxm"]))
    if args.save_recording is not None and result.bundle:
        write_text_atomic(_out_path(args.save_recording, "--save-recording"), json.dumps(result.bundle))
    kinds: dict[str, int] = {}
    for op in result.workload["ops"]:
        kinds[op["kind"]] = kinds.get(op["kind"], 0) + 1
    console.print(f"{args.source}: {len(result.workload['ops'])} ops "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), "
                  f"{len(result.workload['tensors'])} tensors, parameters: "
                  f"{', '.join(result.workload['parameters']) or 'none (fixed shapes)'}")
    if result.uncosted:
        console.print(f"warning: uncosted aten ops (host time only): "
                      f"{', '.join(f'{k} x{v}' for k, v in sorted(result.uncosted.items()))}")
    if result.unsolved:
        console.print(f"warning: {len(result.unsolved)} sizes vary with the parameters but fit no expression "
                      f"(kept as numbers), e.g. {result.unsolved[0]}")
    console.print(f"wrote {out}")
    if args.scenario_out is not None:
        console.print(f"wrote {args.scenario_out} (kernelsim run {args.scenario_out})")
    if args.save_recording is not None and result.bundle:
        console.print(f"wrote {args.save_recording}")
    return EXIT_OK


def _add_capture_command(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("capture", help="record a PyTorch model's step on the meta device as a workload YAML (needs torch)",
                       description="Run FACTORY(**params) (a function returning (model, inputs) or a dict with model, "
                       "inputs, loss, optimizer, train) on the meta device, record its forward, backward and "
                       "optimizer step, and write the workload. A .json recording is lowered without torch. "
                       "docs/capture.md.")
    c.add_argument("source", metavar="MODULE:FACTORY|RECORDING.json",
                   help="e.g. sim.capture.examples:gpt, or mypkg/models.py:build")
    c.add_argument("-o", "--output", required=True, metavar="WORKLOAD.yaml", help="workload file to write")
    c.add_argument("--param", action="append", metavar="NAME=VALUE", help="factory argument (repeatable)")
    c.add_argument("--vary", metavar="A,B", help="parameters whose sizes become expressions (default: all --param)")
    c.add_argument("--bucket", action="append", metavar="NAME=V,...:WEIGHT",
                   help="a bucket of the distribution (repeatable; default: one bucket at --param)")
    c.add_argument("--name", help="workload name (default: the factory's name)")
    c.add_argument("--no-module-calls", action="store_true",
                   help="leave out nn.Module call overhead (host ops' module_calls)")
    c.add_argument("--sdpa-backend", choices=["cudnn", "flash", "efficient", "math"],
                   help="run SDPA on this backend (default: the one PyTorch picks by shape, lowering.yaml sdpa)")
    c.add_argument("--strict", action="store_true", help="fail (exit 2) when an aten op has no lowering")
    c.add_argument("--save-recording", metavar="RECORDING.json", help="also write the base recording")
    c.add_argument("--scenario", dest="scenario_out", metavar="SCENARIO.yaml",
                   help="also write a scenario that runs the captured workload (kernelsim run SCENARIO.yaml)")
    c.add_argument("--hardware", action="append", metavar="PROFILE",
                   help="with --scenario: its profiles (repeatable; default: h200-measured, h100-sxm)")
    c.set_defaults(func=cmd_capture)


# -- serving (serve): sim/serving ----------------------------------------------------------------
def _rates(value: str) -> list[float]:
    rates = []
    for part in value.split(","):
        try:
            r = float(part)
        except ValueError:
            raise InputError("--rates: not a number", value=part, expected="comma-separated requests/s, e.g. 50,100,200") from None
        if not r > 0 or r == float("inf"):
            raise InputError("--rates: a rate must be > 0 and finite", value=part)
        rates.append(r)
    return rates


def cmd_serve(args: argparse.Namespace, console: Console) -> int:
    import dataclasses

    from sim.outputs import write_json_atomic
    from sim.serving.report import render_serve, write_serve_plots
    from sim.serving.run import load_serving, run_serving

    json_out = _out_path(args.json, "--json") if args.json is not None else None
    plots_dir = _out_dir(args.plots, "--plots") if args.plots is not None else None
    rates = _rates(args.rates) if args.rates else None
    from sim.schema.serving import MAX_REQUESTS

    if args.requests is not None and not 1 <= args.requests <= MAX_REQUESTS:
        raise InputError(f"--requests must be between 1 and {MAX_REQUESTS}", value=args.requests)
    if rates is not None and len(rates) > 100:
        raise InputError("--rates: at most 100 rates", value=len(rates))
    ss = load_serving(Path(args.scenario), args.hardware or None)
    updates: dict[str, Any] = {}
    if args.requests is not None:
        if args.requests <= ss.spec.warmup_requests:
            raise InputError("--requests must exceed the scenario's warmup_requests", value=args.requests,
                             expected=f"more than {ss.spec.warmup_requests}")
        updates["requests"] = args.requests
    if args.seed is not None:
        updates["seed"] = args.seed
    if updates:
        ss = dataclasses.replace(ss, spec=ss.spec.model_copy(update=updates))
    with _busy("serving: simulating requests per variant and arrival rate"):
        result = run_serving(ss, rates)
    # Everything computed: now write outputs (each atomically).
    if json_out is not None:
        write_json_atomic(json_out, result)
    with _busy("drawing plots"):
        files = write_serve_plots(result, plots_dir) if plots_dir is not None else []
    if not args.quiet:
        render_serve(result, console)
    for f in [json_out, *files]:
        if f is not None:
            console.print(f"wrote {f}", markup=False)
    return EXIT_OK


def _add_serve_command(sub: Any) -> None:
    s = sub.add_parser("serve", help="serve requests: arrivals, batching, CUDA graphs → TTFT/TPOT/e2e p50/p99 per variant",
                       description="Simulate a scenario's `serving:` section (docs/serving.md): requests arrive, batches "
                       "form, each engine step is the workload graph at the batch's shapes; latency percentiles, "
                       "throughput and GPU busy share per variant and arrival rate, and the highest rate meeting a "
                       "p99 target.")
    s.add_argument("scenario", help="scenario YAML file with a `serving:` section")
    s.add_argument("--hardware", action="append", metavar="PROFILE",
                   help="hardware profile name or YAML path (repeatable); replaces the scenario's list")
    s.add_argument("--rates", metavar="R[,R...]", help="arrival rates in requests/s (replaces serving.sweep.rates_per_s)")
    s.add_argument("--requests", type=int, metavar="N", help="requests per simulation (Poisson arrivals)")
    s.add_argument("--seed", type=int, metavar="S", help="random seed (replaces serving.seed)")
    s.add_argument("--json", metavar="OUT", help="write results as JSON (schema kernelsim.serve/v1, docs/serving.md)")
    s.add_argument("--plots", metavar="DIR", help="write the latency-throughput plot (PNG) per hardware profile to DIR")
    s.add_argument("--quiet", action="store_true", help="print no tables")
    s.set_defaults(func=cmd_serve)


# -- advise: sim/advise (decisions, acceptance criteria, dispatch table; docs/advise.md) ---------
def cmd_advise(args: argparse.Namespace, console: Console) -> int:
    from sim.advise import advise
    from sim.advise.plan import dispatch_document
    from sim.outputs import dumps, write_files_atomic
    from sim.report.advice import render_advice

    json_out = _out_path(args.json, "--json") if args.json is not None else None
    table_out = _out_path(args.dispatch_table, "--dispatch-table") if args.dispatch_table is not None else None
    with _busy("simulating and advising"):
        result = advise(Path(args.scenario), args.hardware or None)
    _check_finite(result, [args.scenario, *(args.hardware or [])])
    # Everything computed: now write outputs (both or neither).
    files: list[tuple[Path, bytes]] = []
    if json_out is not None:
        files.append((json_out, dumps(result, json_out).encode("utf-8")))
    if table_out is not None:
        files.append((table_out, dumps(dispatch_document(result), table_out).encode("utf-8")))
    write_files_atomic(files)
    if not args.quiet:
        render_advice(result, console)
    for p in (json_out, table_out):
        if p is not None:
            console.print(f"wrote {p}", markup=False)
    return EXIT_OK


def _add_advise_command(sub: Any) -> None:
    a = sub.add_parser("advise", help="decide per variant: fuse, specialize, dispatch by bucket, keep the library, "
                       "or don't write a kernel", description="Simulate a scenario and advise, per variant and hardware "
                       "profile, with the figures behind each decision, acceptance criteria and a dispatch table "
                       "(docs/advise.md).")
    a.add_argument("scenario", help="scenario YAML file")
    a.add_argument("--hardware", action="append", metavar="PROFILE",
                   help="hardware profile name or YAML path (repeatable); replaces the scenario's list")
    a.add_argument("--json", metavar="OUT", help="write the advice as JSON (schema kernelsim.advice/v1)")
    a.add_argument("--dispatch-table", metavar="OUT.json",
                   help="write the recommended plan per hardware as a dispatch table (schema kernelsim.dispatch/v1)")
    a.add_argument("--quiet", action="store_true", help="print nothing but the files written")
    a.set_defaults(func=cmd_advise)


#: Piped or redirected (not a terminal, no $COLUMNS), output is this wide. Every table fits any width
#: without cutting a number (sim/report/tables.print_table): too narrow, it is split into column groups.
PIPE_COLUMNS = 100


def _width(stream: Any) -> int | None:
    """None (rich reads the terminal's width, or $COLUMNS) on a terminal or with $COLUMNS set; else 100."""
    import os

    if stream.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return None
    return PIPE_COLUMNS


def _note_inputs(args: argparse.Namespace) -> None:
    """Register the command's input files (positional files, profile paths), so no output replaces them."""
    from sim.outputs import note_input, reset_inputs

    reset_inputs()
    names = ["scenario", "from_raw", "cases", "thresholds", "base"]
    if args.command in ("replay", "import-trace"):
        names.append("trace")  # positional there; in `run`, --trace is an output
    for name in names:
        value = getattr(args, name, None)
        if isinstance(value, str) and value:
            note_input(value)
    for value in getattr(args, "hardware", None) or []:
        if isinstance(value, str) and value and Path(value).exists():
            note_input(value)


def _error_line(text: str) -> str:
    from rich.markup import escape

    from sim.errors import one_line

    return "[red]error:[/red] " + escape(one_line(text))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    err = Console(stderr=True, width=_width(sys.stderr))
    console = Console(width=_width(sys.stdout))
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_usage(sys.stderr)
            err.print(_error_line("a command is required (run, sweep, replay, import-trace, advise, serve, "
                                  "profiles, calibrate, validate); see kernelsim --help"),
                      highlight=False, soft_wrap=True)
            return EXIT_INPUT
        _note_inputs(args)
        return int(args.func(args, console))
    except InfeasibleError as exc:
        err.print(_error_line(f"infeasible: {exc}"), highlight=False, soft_wrap=True)
        return EXIT_INPUT
    except KernelsimError as exc:  # InputError, OutputError, UncostedOpError...
        err.print(_error_line(str(exc)), highlight=False, soft_wrap=True)
        return EXIT_INPUT
    except OSError as exc:  # reading or writing a file the checks above could not foresee (disk full, ...)
        from sim.errors import shorten

        where = f"{shorten(str(exc.filename))}: " if exc.filename else ""
        err.print(_error_line(f"{where}{exc.strerror or exc}"), highlight=False, soft_wrap=True)
        return EXIT_INPUT
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except SystemExit as exc:  # argparse --help / --version
        return int(exc.code or 0)
    except Exception as exc:  # noqa: BLE001 - the last resort: an internal error, reported as such
        import traceback

        err.print(f"[red]internal error:[/red] {type(exc).__name__}: {escape(str(exc))}", highlight=False,
                  soft_wrap=True)
        err.print(traceback.format_exc(), highlight=False, markup=False)
        return EXIT_INTERNAL
