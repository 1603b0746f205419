"""The shipped op-kind plugins: importing a plugin file defines its kinds (sim.ops.define). One line per
plugin; the order is the order the workload schema and the reference list them in."""

from sim.ops import sortscan  # noqa: F401 - sort, scan, unique
