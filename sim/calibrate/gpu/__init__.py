"""GPU measurement harness (torch/triton imported lazily): microbenchmarks, validation workloads and traces."""
