"""Op kind sync (a plugin, sim/ops/; a host kind): the host waits until the device has finished the work
issued before it (torch.cuda.synchronize, a `.item()`).

The engine runs it (the host thread blocks until every stream drains, then pays the profile's
`host.sync_us`); this file lists the kind: its workload keys (none beyond an op's) and its example.
"""

from __future__ import annotations

from typing import Literal

from sim.ops import OpKind, define
from sim.schema.workload import OpBase


class SyncOp(OpBase):
    kind: Literal["sync"]


define(OpKind(
    spec=SyncOp,
    cost=None,
    examples={"sync": "{name: step_end, kind: sync}"},
    host_kind=True,
))
