"""kernelsim: a what-if simulator for GPU kernel decisions.

The import name is `sim` (the package layout the project was asked for; the distribution is
`kernelsim`). The public API is `sim.api`:

    from sim import api
    result = api.run("scenarios/bias_gelu_dropout.yaml")
    result.to_dataframe()

`run`, `load_scenario` and the result types are also re-exported here. `advise`, `sweep` and
`replay` are not: those names are subpackages of `sim` (importing one replaces the attribute).
`run` is also the name of the run-pipeline package (sim/run/): it is loaded first, so that the
attribute `sim.run` stays the function; reach the package with `from sim.run import ...`.
"""

import importlib

from sim.version import __version__

try:
    importlib.import_module("sim.ops")  # the op kinds defined as plugins, listed in every layer before any use
    importlib.import_module("sim.run")  # before `run` is bound below: loading a subpackage sets the attribute
except ModuleNotFoundError:
    # The GPU measurement harness (sim.calibrate.gpu) runs on machines that have torch but not
    # kernelsim's dependencies (pydantic, simpy): it never needs the run package.
    pass
from sim.api import (  # noqa: E402 - after the run package is loaded (above)
    AdviceResult,
    BucketResult,
    HardwareResult,
    ReplayResult,
    RunResult,
    SweepResult,
    VariantResult,
    load_scenario,
    run,
)

__all__ = ["AdviceResult", "BucketResult", "HardwareResult", "ReplayResult", "RunResult", "SweepResult",
           "VariantResult", "__version__", "load_scenario", "run"]
