"""Engine sanity against hand-computed numbers (round-number test profile, tests/fixtures/profiles)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from sim.costmodel import KernelCost
from sim.costmodel.host import host_costs
from sim.costmodel.pricing import price
from sim.engine import simulate
from sim.graph import Graph, LaunchConfig, Op, Tensor
from sim.hardware import Hardware
from sim.metrics import step_metrics

US = 1e-6


def tiny_chain(n: int, mode: str = "eager", stream: int = 0, prefix: str = "k") -> list[Op]:
    return [
        Op(name=f"{prefix}{i}", kind="elementwise", reads=(f"{prefix}t{i}",), writes=(f"{prefix}t{i + 1}",),
           stream=stream, mode=mode, attrs=MappingProxyType({"math": MappingProxyType({"add": 1.0})}))
        for i in range(n)
    ]


def graph_of(ops: list[Op], tensors: dict[str, Tensor]) -> Graph:
    return Graph(name="t", kind="training", params=MappingProxyType({}), tensors=MappingProxyType(tensors), ops=tuple(ops))


def tiny_tensors(n: int, prefix: str = "k") -> dict[str, Tensor]:
    return {f"{prefix}t{i}": Tensor(f"{prefix}t{i}", (256,), "fp32") for i in range(n + 1)}


def test_eager_chain_is_host_bound(testgpu: Hardware) -> None:
    n = 50
    g = graph_of(tiny_chain(n), tiny_tensors(n))
    costs = price(g, testgpu)
    trace = simulate(g, costs, host_costs(testgpu))
    # The host issues one op every eager_op (10 µs) + launch (0 µs); tiny kernels (< 3 µs) keep up.
    kernel = costs[-1].time_s  # type: ignore[union-attr]
    expected = n * 10 * US + 5 * US + kernel  # last issue + launch latency + last kernel
    assert trace.end_s == pytest.approx(expected, rel=0.01)
    m = step_metrics(trace)
    assert m.dominant == "launch"
    assert sum(m.breakdown_s.values()) == pytest.approx(trace.end_s, rel=1e-9)


def test_cuda_graph_chain_costs_per_kernel_graph_time(testgpu: Hardware) -> None:
    n = 50
    g = graph_of(tiny_chain(n, mode="cuda_graph"), tiny_tensors(n))
    costs = price(g, testgpu)
    trace = simulate(g, costs, host_costs(testgpu))
    body = sum(c.time_s - c.fixed_s for c in costs if c is not None)
    # One replay call (8 µs), launch latency (5 µs), then per kernel the graph's fixed cost (1 µs) + body.
    expected = 8 * US + 5 * US + n * 1 * US + body
    assert trace.end_s == pytest.approx(expected, rel=0.01)
    assert len(trace.host()) == 1


def test_large_copy_takes_bytes_over_bandwidth(testgpu: Hardware) -> None:
    nbytes = 2 * 1024**3  # 1 GiB read + 1 GiB written
    t = {"src": Tensor("src", (512 * 1024**2,), "bf16"), "dst": Tensor("dst", (512 * 1024**2,), "bf16")}
    op = Op(name="copy", kind="copy", reads=("src",), writes=("dst",),
            launch=LaunchConfig(block=256, elems_per_thread=32, regs_per_thread=32))
    g = graph_of([op], t)
    costs = price(g, testgpu)
    kernel_s = costs[0].time_s  # type: ignore[union-attr]
    # 4000 GB/s sustained; plus fixed 2 µs and one 500 ns memory latency.
    assert kernel_s == pytest.approx(nbytes / 4000e9 + 2 * US + 0.5 * US, rel=0.01)
    trace = simulate(g, costs, host_costs(testgpu))
    assert trace.end_s == pytest.approx(10 * US + 5 * US + kernel_s, rel=1e-6)


def _bw_kernel(name: str, stream: int) -> tuple[Op, dict[str, Tensor]]:
    t = {f"{name}_in": Tensor(f"{name}_in", (256 * 1024**2,), "bf16"), f"{name}_out": Tensor(f"{name}_out", (256 * 1024**2,), "bf16")}
    op = Op(name=name, kind="elementwise", reads=(f"{name}_in",), writes=(f"{name}_out",), stream=stream,
            launch=LaunchConfig(block=256, elems_per_thread=32, regs_per_thread=32),
            attrs=MappingProxyType({"math": MappingProxyType({"add": 1.0})}))
    return op, t


def test_two_bandwidth_bound_kernels_on_two_streams_take_as_long_as_serial(testgpu: Hardware) -> None:
    a, ta = _bw_kernel("a", 0)
    b, tb = _bw_kernel("b", 1)
    serial = graph_of([a, b.with_(stream=0)], {**ta, **tb})
    parallel = graph_of([a, b], {**ta, **tb})
    t_serial = simulate(serial, price(serial, testgpu), host_costs(testgpu)).end_s
    t_parallel = simulate(parallel, price(parallel, testgpu), host_costs(testgpu)).end_s
    assert t_parallel == pytest.approx(t_serial, rel=0.03)
    trace = simulate(parallel, price(parallel, testgpu), host_costs(testgpu))
    ka, kb = sorted(trace.kernels(), key=lambda iv: iv.track)
    assert ka.start_s < kb.end_s and kb.start_s < ka.end_s  # they did run side by side


def test_host_bound_chain_overlaps_a_long_kernel_on_another_stream(testgpu: Hardware) -> None:
    n = 40
    long_op = Op(name="long", kind="gemm", stream=0,
                 attrs=MappingProxyType({"m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"}))
    chain = tiny_chain(n, stream=1)
    g = graph_of([long_op, *chain], tiny_tensors(n))
    costs = price(g, testgpu)
    long_s = costs[0].time_s  # type: ignore[union-attr]
    host_s = (n + 1) * 10 * US
    assert long_s > host_s  # the premise: the GEMM outlasts the chain's host time
    trace = simulate(g, costs, host_costs(testgpu))
    # Overlapped: about the long kernel (+ its launch), far from the sum of the two.
    assert trace.end_s == pytest.approx(10 * US + 5 * US + long_s, rel=0.05)
    assert trace.end_s < 0.8 * (long_s + host_s)


def test_sync_blocks_the_host_until_streams_drain(testgpu: Hardware) -> None:
    a, ta = _bw_kernel("a", 0)
    s = Op(name="sync", kind="sync")
    after = tiny_chain(1, prefix="z")
    g = graph_of([a, s, *after], {**ta, **tiny_tensors(1, prefix="z")})
    costs = price(g, testgpu)
    trace = simulate(g, costs, host_costs(testgpu))
    a_end = next(iv.end_s for iv in trace.kernels() if iv.name == "a")
    z_start = next(iv.start_s for iv in trace.kernels() if iv.name == "z0")
    assert z_start >= a_end + 5 * US + 10 * US  # sync_us + eager dispatch of z0


def test_bounded_launch_queue_blocks_the_host(testgpu: Hardware) -> None:
    # A long GEMM holds the stream while the host launches more tiny kernels than the queue holds.
    big = Op(name="big", kind="gemm", attrs=MappingProxyType({"m": 32768, "n": 32768, "k": 32768, "dtype": "bf16"}))
    n = testgpu.launch_queue_depth + 10
    g = graph_of([big, *tiny_chain(n)], tiny_tensors(n))
    costs = price(g, testgpu)
    assert costs[0].time_s > n * 10 * US  # type: ignore[union-attr]
    trace = simulate(g, costs, host_costs(testgpu))
    blocked = [iv for iv in trace.host() if iv.cat == "blocked"]
    assert blocked and blocked[0].start_s == pytest.approx((testgpu.launch_queue_depth + 2) * 10 * US, rel=0.01)


def test_cross_stream_dependency_orders_kernels(testgpu: Hardware) -> None:
    a, ta = _bw_kernel("a", 0)
    b = tiny_chain(1, stream=1, prefix="b")[0].with_(reads=("a_out",))
    g = graph_of([a, b], {**ta, **tiny_tensors(1, prefix="b")})
    trace = simulate(g, price(g, testgpu), host_costs(testgpu))
    ka = next(iv for iv in trace.kernels() if iv.name == "a")
    kb = next(iv for iv in trace.kernels() if iv.name == "b0")
    assert kb.start_s >= ka.end_s


def test_deterministic(testgpu: Hardware) -> None:
    a, ta = _bw_kernel("a", 0)
    b, tb = _bw_kernel("b", 1)
    g = graph_of([a, b, *tiny_chain(20, stream=2)], {**ta, **tb, **tiny_tensors(20)})
    t1 = simulate(g, price(g, testgpu), host_costs(testgpu))
    t2 = simulate(g, price(g, testgpu), host_costs(testgpu))
    assert t1.intervals == t2.intervals and t1.end_s == t2.end_s


def test_kernel_cost_rejects_unknown_kind(testgpu: Hardware) -> None:
    from sim.costmodel import kernel_cost
    from sim.errors import UncostedOpError

    op = Op(name="mystery", kind="quantum")
    with pytest.raises(UncostedOpError, match="no cost function"):
        kernel_cost(op, graph_of([op], {}), testgpu)
    assert isinstance(KernelCost, type)


def test_succeed_in_turn_keeps_simpy_order() -> None:
    """An event succeeded in turn runs its callbacks at once only where simpy would process it next."""
    import simpy

    from sim.engine import Environment, run_to_end, succeed_in_turn

    env = Environment()
    seen: list[str] = []

    def fire_both(_: simpy.Event) -> None:
        # `due` is already scheduled for now: `late` must wait behind it, as with a plain succeed().
        late = simpy.Event(env)
        late.callbacks.append(lambda _: seen.append("late"))
        succeed_in_turn(env, late)
        seen.append("after succeed")

    due = simpy.Event(env)
    due.callbacks.append(lambda _: seen.append("due"))
    first = simpy.Timeout(env, 1.0)
    first.callbacks.append(fire_both)
    second = simpy.Timeout(env, 1.0)
    second.callbacks.append(lambda _: due.succeed())
    run_to_end(env)
    # `late` was queued behind `second` (due at 1.0 too), which then queued `due` behind `late`.
    assert seen == ["after succeed", "late", "due"]

    env = Environment()
    seen.clear()
    alone = simpy.Timeout(env, 2.0)
    alone.callbacks.append(fire_both)
    run_to_end(env)
    assert seen == ["late", "after succeed"]  # nothing else due: its callbacks ran at once
