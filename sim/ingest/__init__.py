"""Profiler traces in: a PyTorch profiler (Kineto) trace → one step as a kernelsim workload.

`import_trace(path, step)` reads the trace in two streaming passes (sim.ingest.kineto),
rebuilds the host timeline, streams, launches and dependencies (sim.ingest.build), and
returns an ImportedStep; `workload_yaml` renders it as a workload file that
`sim.workload.load_workload` accepts. See docs/traces.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sim.ingest.build import ImportedStep, build_step, workload_doc
from sim.ingest.kineto import read_step


def import_trace(path: Path, step: str | None = None) -> ImportedStep:
    """One step of a Kineto trace (plain or gzip JSON) as an imported workload."""
    return build_step(read_step(path, step))


def _flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 30).strip()
    return text[: -len("...")].strip() if text.endswith("\n...") else text


def workload_yaml(step: ImportedStep, source: Path) -> str:
    """The workload file text: one line per tensor and per op, so diffs and greps stay readable."""
    doc = workload_doc(step, source)
    ev = step.events
    lines = [
        f"# Imported by `kernelsim import-trace` from {source.name}, step {ev.step.name}.",
        f"# Measured step time {step.measured_time_us:.3f} us (first CPU op to the end of the last GPU activity).",
        "# measured_us/device_gap_us/host_us are the trace's; `unpriced` ops have shapes the importer could",
        "# not infer and always keep their measured time. See docs/traces.md.",
    ]
    if step.launch_latency_us is not None:
        lines.append(f"# Measured launch latency (runtime call start to kernel start, idle stream): "
                     f"{step.launch_latency_us:.3f} us.")
    for note in step.notes:
        lines.append(f"# Note: {note}.")
    head = {k: v for k, v in doc.items() if k not in ("tensors", "ops", "distribution")}
    lines.append(yaml.safe_dump(head, sort_keys=False, width=1 << 30).rstrip())
    lines.append("distribution: " + _flow(doc["distribution"]))
    if doc["tensors"]:
        lines.append("tensors:")
        lines.extend(f"  {_flow(name)}: {_flow(t)}" for name, t in doc["tensors"].items())
    else:
        lines.append("tensors: {}")
    lines.append("ops:")
    lines.extend(f"  - {_flow(o)}" for o in doc["ops"])
    return "\n".join(lines) + "\n"


__all__ = ["ImportedStep", "import_trace", "workload_doc", "workload_yaml"]
