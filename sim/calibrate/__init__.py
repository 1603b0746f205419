"""Calibration: GPU microbenchmarks (sim.calibrate.gpu, torch/triton) and fitting (no GPU)."""
