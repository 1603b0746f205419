"""The two-GPU harness's timing helpers run without a GPU on a fake torch whose clock advances
with each call: the contention stage (timed by the grid's cell) writes the record validate reads,
and DDP's step pair is timed by one helper."""

from __future__ import annotations

import contextlib
import types
from typing import Any

from sim.calibrate.gpu import comm

LOAD_MS, AR_MS = 2.0, 1.0


class _Clock:
    now_ms = 0.0


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        self.t = _Clock.now_ms

    def elapsed_time(self, other: _Event) -> float:
        return other.t - self.t


class _Stream:
    def wait_stream(self, other: Any) -> None:
        pass


class _Tensor:
    def __init__(self, value: Any = None) -> None:
        self.value = value

    def copy_(self, other: Any) -> None:
        _Clock.now_ms += LOAD_MS

    def item(self) -> float:
        return float(self.value[0])


def _fake_torch() -> Any:
    cuda = types.SimpleNamespace(
        Event=_Event, Stream=_Stream, stream=lambda s: contextlib.nullcontext(),
        synchronize=lambda: None, empty_cache=lambda: None, current_stream=_Stream)

    def mm(a: Any, b: Any, out: Any = None) -> None:
        _Clock.now_ms += LOAD_MS

    def make(*shape: Any, **kw: Any) -> _Tensor:
        return _Tensor(shape[0] if shape and isinstance(shape[0], list) else None)

    return types.SimpleNamespace(cuda=cuda, bfloat16="bf16", float64="f64", mm=mm, randn=make, empty=make,
                                 ones=make, empty_like=make, tensor=make)


def _fake_dist() -> Any:
    def all_reduce(t: Any, op: Any = None) -> None:
        if op is None:
            _Clock.now_ms += AR_MS

    return types.SimpleNamespace(all_reduce=all_reduce, barrier=lambda: None, ReduceOp=types.SimpleNamespace(MAX="max"),
                                 all_gather_object=lambda out, v: out.__setitem__(slice(None), [v] * len(out)))


def _ctx(cfg: dict[str, Any]) -> Any:
    ctx = comm._Ctx.__new__(comm._Ctx)
    ctx.torch, ctx.dist = _fake_torch(), _fake_dist()
    ctx.rank, ctx.world, ctx.cfg, ctx.result_path = 0, 2, {"deadline": 1e18, **cfg}, "/nonexistent"
    ctx.records, ctx.errors = [], []
    ctx.flush = lambda: None  # type: ignore[method-assign]
    return ctx


def test_contention_stage_writes_the_record_validate_reads() -> None:
    ctx = _ctx({"contention_ar_bytes": 1 << 20, "contention_window_ms": 20.0, "contention_reps": 2})
    comm._stage_contention(ctx)
    assert ctx.errors == []
    assert [r["load"] for r in ctx.records] == ["gemm_8192_bf16", "copy_1GiB_bf16"]
    for rec in ctx.records:
        assert rec["bench"] == "contention"
        assert (rec["load_calls"], rec["allreduce_calls"]) == (10, 20)  # window / call time alone
        assert rec["load_alone_us"] == 10 * LOAD_MS * 1e3 and rec["comm_alone_us"] == 20 * AR_MS * 1e3
        # one fake clock: interleaved, each stream's window holds the other's calls too
        assert rec["load_slowdown"] > 1 and rec["comm_slowdown"] > 1
        assert rec["load_slowdown_ranks"] == [rec["load_slowdown"]] * 2


def test_ddp_step_pair_alternates_and_times_each_step() -> None:
    ctx = _ctx({})
    calls: list[str] = []

    def step() -> None:
        calls.append("sync")
        _Clock.now_ms += 3.0

    def nosync() -> None:
        calls.append("no_sync")
        _Clock.now_ms += 2.0

    with_comm, without, cpu_with, cpu_without = comm._time_step_pair(ctx, step, nosync, 4)
    assert calls == ["sync", "no_sync"] * 7  # 3 warm-ups, then 4 timed pairs
    assert with_comm == [3000.0] * 4 and without == [2000.0] * 4
    assert len(cpu_with) == len(cpu_without) == 4


class _FakeDDP:
    """Forward + backward advance the fake clock; with a hook log, two buckets' hooks fire in backward."""

    def __init__(self, hook_log: list[Any] | None) -> None:
        self.hook_log, self.synced = hook_log, True

    def __call__(self, x: Any) -> Any:
        _Clock.now_ms += 1.0
        return self

    def backward(self, gy: Any) -> None:
        for index in range(2):
            _Clock.now_ms += 1.5
            if self.hook_log is not None and self.synced:
                ev = _Event()
                ev.record()
                self.hook_log.append((index, 1 << 20, 0, 0, ev))
        if self.synced:
            _Clock.now_ms += AR_MS

    @contextlib.contextmanager
    def no_sync(self) -> Any:
        self.synced = False
        yield
        self.synced = True


def test_ddp_ranks_records_every_mode_per_rank_with_bucket_times(monkeypatch: Any) -> None:
    ctx = _ctx({"ddp_rank_steps": 2, "ddp_profile": False})
    monkeypatch.setattr(comm, "_ddp_model", lambda c, var, log: (_FakeDDP(log), [types.SimpleNamespace(
        grad=1, numel=lambda: 8, element_size=lambda: 2)]))
    var = {"name": "v", "hidden": 8, "ffn": 32, "layers": 1, "bucket_cap_mb": 25, "tokens": [16]}
    comm._ddp_ranks_variant(ctx, var)
    assert ctx.errors == []
    (rec,) = ctx.records
    assert rec["bench"] == "ddp_ranks" and rec["tokens"] == 16 and len(rec["ranks"]) == 2
    steps = rec["ranks"][0]["steps"]
    assert {k: len(v) for k, v in steps.items()} == {"ddp": 2, "ddp_hook": 2, "no_sync": 2}
    assert [s["device_us"] for s in steps["no_sync"]] == [4000.0] * 2  # forward + two backward parts
    assert [s["device_us"] for s in steps["ddp"]] == [5000.0] * 2  # + the all-reduce
    hooked = steps["ddp_hook"][0]
    assert [b["device_ready_us"] for b in hooked["buckets"]] == [2500.0, 4000.0]
    assert "buckets" not in steps["ddp"][0]  # the shipped DDP runs without the hook
    assert hooked["host_ready_us"] <= hooked["host_call_us"] <= hooked["host_return_us"] <= hooked["host_synced_us"]


def test_each_variant_records_a_failure_and_skips_past_the_budget(monkeypatch: Any) -> None:
    ctx = _ctx({"ddp_rank_variants": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})
    ran: list[str] = []

    def run(c: Any, var: dict[str, Any]) -> None:
        ran.append(var["name"])
        if var["name"] == "a":
            raise RuntimeError("boom")
        c.cfg["deadline"] = 0.0  # the budget runs out after b

    comm._each_variant(ctx, "ddp_rank_variants", "ddp_ranks", "ddp_ranks", run)
    assert ran == ["a", "b"]
    assert len(ctx.errors) == 1 and "ddp_ranks a" in str(ctx.errors[0])
    assert [r.get("skipped") for r in ctx.records if r.get("variant") == "c"] == ["budget"]


def test_sm_share_records_every_cell_per_gemm_and_skips_past_the_budget(monkeypatch: Any) -> None:
    """Stage sm_share on the fake clock (one clock: a spin or all-reduce occupier runs before the GEMM
    window instead of beside it, so only the record's shape and the alone cell's ratio are checked)."""
    ctx = _ctx({"share_gemms": [[64, 64, 64], [128, 64, 64]], "share_spins": [1, 4], "share_channels": [2],
                "share_ar_bytes": 1 << 20, "share_copy_bytes": 1 << 20, "share_delay_us": 10.0,
                "share_window_us": 20_000.0, "share_reps": 2})
    cuda = ctx.torch.cuda
    cuda._sleep = lambda cycles: setattr(_Clock, "now_ms", _Clock.now_ms + cycles / 1e6)  # 1 GHz
    cuda.current_device = lambda: 0
    cuda.get_device_properties = lambda i: types.SimpleNamespace(multi_processor_count=132)
    groups: list[Any] = []

    class _Opts:
        config = types.SimpleNamespace(min_ctas=0, max_ctas=0)

    ctx.dist.ProcessGroupNCCL = types.SimpleNamespace(Options=_Opts)
    ctx.dist.new_group = lambda **kw: groups.append(kw) or "g"
    ctx.dist.destroy_process_group = lambda g: groups.remove(groups[0])
    ctx.dist.all_reduce = lambda t, op=None, group=None: setattr(
        _Clock, "now_ms", _Clock.now_ms + (AR_MS if op is None else 0.0))
    monkeypatch.setattr(comm, "_kernel_meta", lambda c, fn, keep=8: [{"name": "k", "grid": [1, 1, 1]}])
    comm._stage_sm_share(ctx)
    assert ctx.errors == [] and groups == []  # the pinned group was made and destroyed
    meta, *recs = ctx.records
    assert meta["bench"] == "sm_share_meta" and meta["per_rank"][0]["sleep_cycles_per_us"] == 1000.0
    assert set(meta["per_rank"][0]["allreduce_alone_us"]) == {"default", "ctas2"}
    assert [r["load"] for r in recs] == ["gemm_64x64x64_bf16", "gemm_128x64x64_bf16"]
    for rec in recs:
        assert list(rec["cells"]) == ["alone", "spin1", "spin4", "allreduce_default", "allreduce_ctas2", "copy"]
        assert rec["gemm_calls"] == 10  # window / probe (2 ms per fake GEMM)
        assert rec["cells"]["alone"]["slowdown_ranks"] == [1.0, 1.0]
        assert rec["cells"]["alone"]["per_rank"][0]["per_call_us"] == LOAD_MS * 1e3
        assert rec["cells"]["allreduce_ctas2"]["ctas"] == 2 and rec["cells"]["allreduce_default"]["ctas"] is None
    ctx.records.clear()
    ctx.cfg["deadline"] = 0.0
    comm._stage_sm_share(ctx)
    assert [r.get("skipped") for r in ctx.records[1:]] == ["budget", "budget"]
