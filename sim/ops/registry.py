"""The shipped op-kind plugins: importing a plugin file defines its kinds (sim.ops.define). One line per
plugin; the order is the order the workload schema and the reference list them in (a kind moved out of the
built-in lists keeps its place there: OpKind.listed_after)."""

from sim.ops import attention  # noqa: F401,I001 - attention
from sim.ops import layout  # noqa: F401,I001 - layout
from sim.ops import host  # noqa: F401,I001 - host
from sim.ops import sync  # noqa: F401,I001 - sync
from sim.ops import sortscan  # noqa: F401,I001 - sort, scan, unique
