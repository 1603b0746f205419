"""Critical path of a simulated step, and each kernel's exposed time on it.

A kernel is on the critical path when the step's end, walked backwards through what each
piece of work waited for, passes through it: a kernel waited for the kernel before it on
its stream, for a dependency on another stream, or for its launch (then the host is on the
path); a host interval waited for the host work before it, except a blocked launch or a
sync, which waited for a kernel to finish. A kernel's **exposed** time is the part of its
interval where it is on that path and runs alone on the GPU: overlapped time (another
kernel running) and kernels hidden behind host dispatch count for nothing, since making
them faster does not move the step's end (Amdahl on what is exposed).
"""

from __future__ import annotations

from bisect import bisect_right

from sim.trace import HOST_TRACK, Interval, Trace

_WAITS_FOR_GPU = {"blocked", "sync"}


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, scale) + 1e-12


def critical_kernels(trace: Trace) -> set[int]:
    """Op indices of the kernels on the critical path that ends the step."""
    kernels = [iv for iv in trace.intervals if iv.track != HOST_TRACK and iv.op >= 0]
    host = sorted((iv for iv in trace.intervals if iv.track == HOST_TRACK), key=lambda iv: (iv.end_s, iv.start_s))
    if not kernels:
        return set()
    scale = trace.end_s
    by_op = {iv.op: iv for iv in kernels}
    by_track: dict[str, list[Interval]] = {}
    for iv in sorted(kernels, key=lambda iv: iv.start_s):
        by_track.setdefault(iv.track, []).append(iv)
    prev_on_track: dict[int, Interval | None] = {}
    for ivs in by_track.values():
        for j, iv in enumerate(ivs):
            prev_on_track[iv.op] = ivs[j - 1] if j else None
    deps = trace.graph.dependencies()
    kernel_ends = sorted(kernels, key=lambda iv: iv.end_s)
    end_times = [iv.end_s for iv in kernel_ends]
    host_ends = [iv.end_s for iv in host]
    launch_of: dict[int, Interval] = {}
    for iv in host:
        if iv.op >= 0 and iv.cat not in _WAITS_FOR_GPU:
            launch_of[iv.op] = iv

    def kernel_ending_at(t: float) -> Interval | None:
        j = bisect_right(end_times, t + 1e-9 * max(1.0, scale)) - 1
        if j >= 0 and _close(end_times[j], t, scale):
            return kernel_ends[j]
        return None

    def host_before(t: float) -> Interval | None:
        j = bisect_right(host_ends, t + 1e-9 * max(1.0, scale)) - 1
        return host[j] if j >= 0 else None

    critical: set[int] = set()
    last_kernel = max(kernels, key=lambda iv: (iv.end_s, iv.start_s))
    last_host = host[-1] if host else None
    cur: Interval | None = last_kernel
    if last_host is not None and last_host.end_s > last_kernel.end_s:
        cur = last_host
    steps = 0
    while cur is not None and steps < 10 * (len(trace.intervals) + 1):
        steps += 1
        if cur.track != HOST_TRACK:
            critical.add(cur.op)
            start = cur.start_s
            if start <= 0.0:
                break
            nxt: Interval | None = None
            prev = prev_on_track.get(cur.op)
            if prev is not None and _close(prev.end_s, start, scale):
                nxt = prev
            else:
                ends = [by_op[d] for d in deps[cur.op] if d in by_op and _close(by_op[d].end_s, start, scale)]
                if ends:
                    nxt = max(ends, key=lambda iv: iv.end_s)
            if nxt is None:
                # Waited for its launch: the host is on the path, up to the launch.
                nxt = launch_of.get(cur.op) or host_before(start)
            cur = nxt
        else:
            start = cur.start_s
            if cur.cat in _WAITS_FOR_GPU:
                k = kernel_ending_at(cur.end_s)
                if k is not None:
                    cur = k
                    continue
            if start <= 0.0:
                break
            before = host_before(start)
            if before is None or before is cur:
                k = kernel_ending_at(start)
                cur = k
                continue
            cur = before
    return critical


def exposed_times(trace: Trace) -> dict[int, float]:
    """Op index → seconds the kernel runs alone on the GPU while on the critical path."""
    critical = critical_kernels(trace)
    kernels = [iv for iv in trace.intervals if iv.track != HOST_TRACK and iv.op >= 0]
    points = sorted({p for iv in kernels for p in (iv.start_s, iv.end_s)})
    starts = sorted(kernels, key=lambda iv: iv.start_s)
    exposed: dict[int, float] = {iv.op: 0.0 for iv in kernels}
    active: list[Interval] = []
    k = 0
    for a, b in zip(points, points[1:], strict=False):
        while k < len(starts) and starts[k].start_s <= a:
            active.append(starts[k])
            k += 1
        active = [iv for iv in active if iv.end_s > a]
        if len(active) == 1 and active[0].op in critical:
            exposed[active[0].op] += b - a
    return exposed
