"""nccl-tests' bus-bandwidth factor, shared by the collective cost model (sim.costmodel.nccl) and the
GPU measurement harness (sim.calibrate.gpu.comm, which runs where only torch is installed)."""


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' factor between algorithm bandwidth (S / t) and bus bandwidth."""
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0
