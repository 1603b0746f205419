"""kernelsim: a what-if simulator for GPU kernel decisions.

The import name is `sim` (the package layout the project was asked for; the distribution is
`kernelsim`). The public API is `sim.api`, re-exported here:

    import sim
    result = sim.run("scenarios/bias_gelu_dropout.yaml")
    result.to_dataframe()
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
    advise,
    load_scenario,
    replay,
    run,
    sweep,
)

__all__ = ["AdviceResult", "BucketResult", "HardwareResult", "ReplayResult", "RunResult", "SweepResult",
           "VariantResult", "__version__", "advise", "load_scenario", "replay", "run", "sweep"]
