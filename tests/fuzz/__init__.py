"""Fuzzing kernelsim's inputs: YAML files, expressions, traces, command lines and file-system cases.

`python -m tests.fuzz.run --n 10000` runs a long campaign and reports its figures;
tests/fuzz/test_fuzz.py runs a fixed-seed sample in the default test run.
"""
