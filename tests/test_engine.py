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


def test_advance_in_turn_moves_the_clock_only_where_the_timeout_would_go_next() -> None:
    """A timeout skipped in turn is one simpy would process next: an event due by then goes first."""
    import simpy

    from sim.engine import Environment, advance_in_turn, run_to_end

    env = Environment()
    seen: list[tuple[str, float]] = []

    def proc():  # type: ignore[no-untyped-def]
        yield simpy.Timeout(env, 1.0)
        # `other` is due at 3.0: a timeout of 2.0 ends at 3.0 too and would queue behind it
        assert not advance_in_turn(env, 2.0)
        assert env.now == 1.0
        assert advance_in_turn(env, 1.5)  # ends at 2.5, before `other`: it would be the next event
        seen.append(("proc", env.now))

    other = simpy.Timeout(env, 3.0)
    other.callbacks.append(lambda _: seen.append(("other", env.now)))
    env.process(proc())
    run_to_end(env)
    assert seen == [("proc", 2.5), ("other", 3.0)]


def _random_step(seed: int, hw: Hardware) -> tuple[Graph, list[KernelCost | None], Hardware]:
    """A random eager/compiled/CUDA-graph step over 1-4 streams with syncs and host ops; times mostly on
    a grid of binary fractions of a second (sums exact) so that host and GPU events often fall on the
    very same instant."""
    import dataclasses
    import random

    rng = random.Random(seed)
    grid = rng.choice([1.0, 0.5, 3.0, None])
    tick = 2.0 ** -20 / US  # about 0.95 us, in us

    def on_grid(x: float) -> float:
        return round(x / grid) * grid * tick if grid else x

    streams = rng.choice([1, 1, 2, 3, 4])
    names = [f"t{k}" for k in range(rng.randint(2, 10))]
    ops: list[Op] = []
    costs: list[KernelCost | None] = []
    n = rng.randint(5, 120)
    while len(ops) < n:
        k, r = len(ops), rng.random()
        if r < 0.06:
            ops.append(Op(name=f"sync{k}", kind="sync"))
            costs.append(None)
            continue
        if r < 0.12:
            ops.append(Op(name=f"h{k}", kind="host", host_s=on_grid(rng.uniform(0, 20)) * US))
            costs.append(None)
            continue
        mode, region, count = "eager", None, 1
        if r < 0.25:
            mode, region, count = rng.choice(["compiled", "cuda_graph"]), f"r{k}", rng.randint(1, 5)
        for _ in range(count):
            k = len(ops)
            host = {"host_s": on_grid(rng.uniform(0, 15)) * US} if rng.random() < 0.3 else {}
            ops.append(Op(name=f"k{k}", kind="elementwise", reads=tuple(rng.sample(names, rng.randint(0, 2))),
                          writes=tuple(rng.sample(names, 1)), stream=rng.randrange(streams), mode=mode, region=region,
                          **host))
            t = on_grid(rng.choice([0.0, rng.uniform(0, 5), rng.uniform(1, 60), rng.uniform(50, 300)])) * US
            cat = rng.choice(["compute", "memory"])
            costs.append(KernelCost(time_s=t, compute_s=t if cat == "compute" else 0.0,
                                    memory_s=t if cat == "memory" else 0.0, fixed_s=min(t, rng.choice([0.0, 1.0, 2.0]) * US),
                                    limiter=cat, category=cat, hbm_bytes=1e6,
                                    bw_demand=rng.choice([0.25, 1.0, 2.0, rng.random() * 2]),
                                    sm_demand=rng.choice([0.25, 1.0, rng.random()])))
    tensors = {n: Tensor(n, (1024,), "bf16") for n in names}
    us = [0.0, 2.0, 5.0]
    hw = dataclasses.replace(hw, launch_queue_depth=rng.choice([1, 2, 3, 8, 1024]),
                             eager_op_s=on_grid(rng.choice([*us, rng.uniform(0, 10)])) * US,
                             launch_s=on_grid(rng.choice([*us, rng.uniform(0, 5)])) * US,
                             launch_latency_s=on_grid(rng.choice([*us, rng.uniform(0, 8)])) * US,
                             sync_s=on_grid(rng.choice([*us, rng.uniform(0, 10)])) * US,
                             compiled_kernel_s=on_grid(rng.choice([*us, rng.uniform(0, 5)])) * US,
                             graph_launch_s=on_grid(rng.choice([*us, rng.uniform(0, 10)])) * US,
                             graph_kernel_s=on_grid(rng.choice([*us, rng.uniform(0, 3)])) * US)
    return graph_of(ops, tensors), costs, hw


def test_in_turn_paths_keep_every_record(testgpu: Hardware, monkeypatch: pytest.MonkeyPatch) -> None:
    """Timeouts and kernels skipped in turn (advance_in_turn, finish_in_turn) leave every record, in
    recording order, and the step's end as simpy's queue gives them, on random steps with ties."""
    import sim.engine as engine

    def run(graph: Graph, costs: list[KernelCost | None], hw: Hardware) -> tuple[list[object], float, int]:
        s = engine.Simulation(graph, costs, host_costs(hw))
        trace = s.run()
        recs = trace._records
        assert recs is not None
        return [recs.record(k) for k in range(len(recs))], trace.end_s, next(s.env._eid)

    skipped = 0
    for seed in range(600):
        graph, costs, hw = _random_step(seed, testgpu)
        monkeypatch.setattr(engine, "IN_TURN", False)
        queued = run(graph, costs, hw)
        monkeypatch.setattr(engine, "IN_TURN", True)
        in_turn = run(graph, costs, hw)
        assert in_turn[:2] == queued[:2], f"seed {seed}"
        skipped += queued[2] - in_turn[2]
    assert skipped > 1000  # the in-turn paths were taken
