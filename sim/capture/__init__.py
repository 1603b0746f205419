"""Capture: a PyTorch model's step, recorded on the meta device, lowered to a workload file.

`record` (sim.capture.record) needs torch; `lower`, `shapes` and the YAML output do not, so a
committed recording can be lowered anywhere.
"""

from sim.capture.api import CaptureResult, capture, capture_factory, dump_workload, from_recordings

__all__ = ["CaptureResult", "capture", "capture_factory", "dump_workload", "from_recordings"]
