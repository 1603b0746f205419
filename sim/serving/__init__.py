"""Serving: requests arrive, batches form, and each engine step is a workload graph simulated at its shapes.

Modules (the scenario's `serving:` section is sim.schema.serving): `requests` (Poisson arrivals, request
logs), `batching` (static and continuous policies), `steps` (step graphs priced per shape,
CUDA-graph capture and padding), `loop` (the simpy serving loop), `metrics` (TTFT, TPOT,
e2e percentiles, throughput, GPU busy share), `run` (rates, sweeps, comparison),
`report` (tables and the latency–throughput plot). This file imports nothing.
"""
