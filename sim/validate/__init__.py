"""Validation: kernelsim's predictions against committed GPU measurements (`kernelsim validate`).

- core: kernel-level rows (calibration records split calibrated / unseen by shape), summaries,
  the thresholds gate and the Markdown tables;
- steps: shipped scenarios against their measured counterparts (step times, gains, rankings);
- host: host time in real models (replay of their traces against profiler-free steps);
- comm: the two-GPU profile's collectives against measurements;
- wave2: the second measurement wave's held-out kernels and collectives;
- bands: error bands fitted from the validated errors, read by run, sweep, advise and serve.

Nothing is imported here, so that `sim.validate.bands` (read by every run) does not load the
validation code above the run layer.
"""
