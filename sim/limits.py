"""Input limits checked at the boundary: file sizes, nesting, number sizes, graph size.

Each limit can be raised for one run with an environment variable of the same name
prefixed `KERNELSIM_` (e.g. `KERNELSIM_MAX_GRAPH_OPS=2000000`). The defaults are far above
any real workload or trace and far below what exhausts memory or time.
"""

from __future__ import annotations

import os


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(f"KERNELSIM_{name}")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        return default
    return value if value > 0 else default


# Files.
MAX_YAML_BYTES = _env_int("MAX_YAML_BYTES", 32 << 20)  # scenario, workload and profile files
MAX_YAML_DEPTH = _env_int("MAX_YAML_DEPTH", 64)  # nested mappings/sequences
MAX_YAML_NODES = _env_int("MAX_YAML_NODES", 2_000_000)  # nodes after alias expansion (alias bombs)
MAX_TRACE_BYTES = _env_int("MAX_TRACE_BYTES", 16 << 30)  # a trace file on disk (plain or gzip)
MAX_JSON_DEPTH = _env_int("MAX_JSON_DEPTH", 64)  # nesting inside one trace event
MAX_RAW_BYTES = _env_int("MAX_RAW_BYTES", 256 << 20)  # one raw calibration group file (JSON, read whole)
MAX_RECORDING_BYTES = _env_int("MAX_RECORDING_BYTES", 512 << 20)  # a capture recording (JSON, read whole)
MAX_TRACE_NUMBER = 1e18  # a trace's ts/dur (microseconds) and sizes stay within this magnitude
MAX_TRACE_INT = 2**62  # ids, streams, launch sizes in a trace
MAX_INT_DIGITS = 30  # an integer literal longer than this in a YAML file is rejected

# Expressions.
MAX_EXPR_CHARS = _env_int("MAX_EXPR_CHARS", 2000)
MAX_EXPR_DEPTH = _env_int("MAX_EXPR_DEPTH", 64)
MAX_MAGNITUDE = float(2**63)  # every value an expression computes stays within +-2**63

# Graphs.
# A repeat block expands into copies of its ops; every copy is simulated per bucket, variant and
# profile (about 0.3 ms per op and simulation on a 2-core VM in Nov 2026), so these bound the run
# time of a scenario as well as its memory. Layers of real models are tens to a few hundred.
MAX_REPEAT = _env_int("MAX_REPEAT", 1024)  # count of one repeat block
MAX_GRAPH_OPS = _env_int("MAX_GRAPH_OPS", 20_000)  # ops of a workload graph once its repeat blocks are expanded

# Messages.
MAX_VALUE_CHARS = 120  # an offending value is shown cut to this length
MAX_MESSAGE_CHARS = 600  # one error line is cut to this length
