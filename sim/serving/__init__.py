"""Serving: requests arrive, batches form, and each engine step is a workload graph simulated at its shapes.

Modules: `schema` (the scenario's `serving:` section), `requests` (Poisson arrivals, request
logs), `batching` (static and continuous policies), `steps` (step graphs priced per shape,
CUDA-graph capture and padding), `loop` (the simpy serving loop), `metrics` (TTFT, TPOT,
e2e percentiles, throughput, GPU busy share), `run` (rates, sweeps, comparison),
`report` (tables and the latency–throughput plot). This file imports nothing, so the
scenario schema can import `sim.serving.schema` without a cycle.
"""
