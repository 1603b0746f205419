"""kernelsim: a what-if simulator for GPU kernel decisions.

The import name is `sim` (the package layout the project was asked for; the distribution is
`kernelsim`). The public API is `sim.api`:

    from sim import api
    result = api.run("scenarios/bias_gelu_dropout.yaml")
    result.to_dataframe()

`run`, `load_scenario` and the result types are also re-exported here. `advise`, `sweep` and
`replay` are not: those names are subpackages of `sim` (importing one replaces the attribute).
"""

__version__ = "0.1.0"

from sim.api import (  # noqa: E402 - the version first: sim.cli reads it without loading the API's imports
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
