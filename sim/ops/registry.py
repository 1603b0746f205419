"""The shipped op-kind plugins: importing a plugin file defines its kinds (sim.ops.define). One line per
plugin; the order is the order the workload schema and the reference list them in."""

from sim.ops import gemm  # noqa: F401,I001 - gemm
from sim.ops import elementwise  # noqa: F401,I001 - elementwise
from sim.ops import reduction  # noqa: F401,I001 - reduction
from sim.ops import attention  # noqa: F401,I001 - attention
from sim.ops import copy  # noqa: F401,I001 - copy
from sim.ops import layout  # noqa: F401,I001 - layout
from sim.ops import collective  # noqa: F401,I001 - collective
from sim.ops import host  # noqa: F401,I001 - host
from sim.ops import sync  # noqa: F401,I001 - sync
from sim.ops import sortscan  # noqa: F401,I001 - sort, scan, unique
