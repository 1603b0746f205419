"""Running scenarios: load (a scenario's workload, profiles and buckets), variants (each variant's
graph per bucket, `choose` by simulation), simulate (one bucket's step on one or every rank) and
results (every (hardware, variant, bucket) aggregated into the `kernelsim.run/v1` JSON).

Pricing is the cost model's (sim.costmodel.pricing, with the CostCache a run owns); scheduling is
the engine's. Results are plain data; reports render them.
"""

from sim.run.load import Scenario, check_math_names, load_scenario, with_parameters
from sim.run.results import RUN_SCHEMA, run_scenario
from sim.run.simulate import comm_result, run_graph, simulate_bucket
from sim.run.variants import GraphCache, choose_from, inline_choose, variant_graph

__all__ = ["RUN_SCHEMA", "GraphCache", "Scenario", "check_math_names", "choose_from", "comm_result", "inline_choose",
           "load_scenario", "run_graph", "run_scenario", "simulate_bucket", "variant_graph", "with_parameters"]
