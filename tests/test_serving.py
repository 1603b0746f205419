"""Serving: one request at a time costs the sum of its steps; queueing follows M/D/1; CUDA-graph
padding appears exactly between captured sizes; policies, request logs, determinism, bad input."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.cli import main
from sim.errors import InputError
from sim.run import run_graph, variant_graph
from sim.schema.serving import Batching, Lengths
from sim.serving.batching import make_policy
from sim.serving.loop import price_step, simulate_serving
from sim.serving.requests import RequestSpec, poisson_requests, read_request_log, rescale
from sim.serving.run import ServingScenario, load_serving, max_rate_meeting, run_point, run_serving
from sim.serving.steps import StepPricer, capture_size, round_up
from tests.conftest import FIXTURES, ROOT, TEST_PROFILE, write_yaml

SHIPPED = ROOT / "scenarios" / "serving_decode.yaml"
LOG = FIXTURES / "serving" / "requests.csv"


def _doc(**serving: Any) -> dict[str, Any]:
    """The shipped serving scenario on the round-number test GPU, with `serving` keys replaced."""
    doc = yaml.safe_load(SHIPPED.read_text())
    doc["workload"] = str(ROOT / "workloads" / "decode_step.yaml")
    doc["hardware"] = [str(TEST_PROFILE)]
    s = doc["serving"]
    s["hardware"] = [str(TEST_PROFILE)]
    s["prefill"]["workload"] = str(ROOT / "workloads" / "prefill_step.yaml")
    s["requests"], s["warmup_requests"] = 200, 0
    s.update(copy.deepcopy(serving))
    return doc


def _load(tmp_path: Path, doc: dict[str, Any]) -> ServingScenario:
    return load_serving(write_yaml(tmp_path / "serve.yaml", doc))


def _pricer(ss: ServingScenario, variant: int = 0) -> StepPricer:
    return StepPricer(ss.scenario, ss.prefill, ss.hardware[0], ss.spec.variants[variant], ss.spec.decode,
                      ss.spec.prefill)


def _graph_time(ss: ServingScenario, role: str, variant: str, values: dict[str, int]) -> float:
    """A step's time computed directly from the workload and run_graph (not through the pricer)."""
    scn = ss.scenario if role == "decode" else ss.prefill
    assert scn is not None
    params = dict(scn.workload.spec.parameters)
    params.update(values)
    graph = scn.workload.build(params)
    if variant != "baseline":
        vi = [v.name for v in scn.spec.variants].index(variant)
        graph, _ = variant_graph(scn, scn.spec.variants[vi], vi, graph, params, ss.hardware[0])
    return run_graph(graph, ss.hardware[0])[1].time_s


# -- one request at a time -------------------------------------------------------------------------
@pytest.mark.parametrize("variant", [0, 1])
def test_lone_requests_take_the_sum_of_their_steps(tmp_path: Path, variant: int) -> None:
    ss = _load(tmp_path, _doc(scheduler_overhead_us=7.0))
    # Three requests far apart: each runs alone (prompt 100 → a 128-token prefill; 4 decode steps
    # at cache lengths 101..104 → the 256 bucket).
    reqs = [RequestSpec(i, 10.0 * i, 100, 5) for i in range(3)]
    pricer = _pricer(ss, variant)
    run = simulate_serving(reqs, make_policy(ss.spec.batching, True), pricer, overhead_s=7e-6)
    decode_variant = ss.spec.variants[variant].decode
    prefill_s = _graph_time(ss, "prefill", "baseline", {"batch": 1, "seq": 128, "past": 0}) + 7e-6
    decode_s = _graph_time(ss, "decode", decode_variant, {"batch": 1, "cache_len": 256}) + 7e-6
    for r in run.requests:
        assert r.first_token_s is not None and r.finish_s is not None
        assert r.first_token_s - r.spec.arrival_s == pytest.approx(prefill_s, rel=1e-12)
        assert r.finish_s - r.spec.arrival_s == pytest.approx(prefill_s + 4 * decode_s, rel=1e-12)
    assert [s.kind for s in run.steps] == (["prefill"] + ["decode"] * 4) * 3
    assert all(s.batch in (0, 1) and s.priced_batch == s.batch for s in run.steps)
    assert run.end_s == pytest.approx(20.0 + prefill_s + 4 * decode_s, rel=1e-12)


def test_lone_request_without_prefill_model(tmp_path: Path) -> None:
    doc = _doc()
    del doc["serving"]["prefill"]
    ss = _load(tmp_path, doc)
    run = simulate_serving([RequestSpec(0, 0.0, 300, 3)], make_policy(ss.spec.batching, False), _pricer(ss))
    t = [_graph_time(ss, "decode", "baseline", {"batch": 1, "cache_len": round_up(300 + g, 256)}) for g in range(3)]
    r = run.requests[0]
    assert r.first_token_s == pytest.approx(t[0], rel=1e-12)
    assert r.finish_s == pytest.approx(sum(t), rel=1e-12)
    assert [s.cache_len for s in run.steps] == [512, 512, 512]


# -- queueing: M/D/1 ---------------------------------------------------------------------------------
def test_queueing_grows_like_md1(tmp_path: Path) -> None:
    """One request at a time, one decode step each (deterministic service D), Poisson arrivals:
    the mean wait approaches the M/D/1 value ρ·D / (2(1 − ρ))."""
    doc = _doc(batching={"policy": "continuous", "max_batch": 1}, output_tokens={"fixed": 1},
               prompt_tokens={"fixed": 100})
    del doc["serving"]["prefill"]
    ss = _load(tmp_path, doc)
    pricer = _pricer(ss)
    service_s = _graph_time(ss, "decode", "baseline", {"batch": 1, "cache_len": 256})
    waits = []
    for rho, tol in ((0.3, 0.08), (0.6, 0.10), (0.8, 0.15)):
        reqs = poisson_requests(20_000, rho / service_s, Lengths(fixed=100), Lengths(fixed=1), seed=3)
        run = simulate_serving(reqs, make_policy(ss.spec.batching, False), pricer)
        assert all(s.time_s == pytest.approx(service_s, rel=1e-12) for s in run.steps)
        wait = sum(r.first_token_s - r.spec.arrival_s - service_s for r in run.requests) / len(reqs)  # type: ignore[operator]
        expected = rho * service_s / (2 * (1 - rho))
        assert wait == pytest.approx(expected, rel=tol), (rho, wait / expected)
        waits.append(wait)
    assert waits[0] < waits[1] < waits[2]


# -- CUDA-graph capture and padding ------------------------------------------------------------------
def test_padding_cost_appears_exactly_between_captured_sizes(tmp_path: Path) -> None:
    doc = _doc(variants=[{"name": "g", "decode": "cuda_graph", "capture_batch_sizes": [8, 1, 2, 4],
                          "uncaptured": "baseline"}])
    ss = _load(tmp_path, doc)
    pricer = _pricer(ss)
    for batch in range(1, 13):
        # Long caches: attention reads every row's KV cache, so a padded row costs real time.
        plan = pricer.decode_plan([8000] * batch)
        assert plan.cache_len == 8192
        padding = pricer.padding_cost_s(plan)
        if batch in (1, 2, 4, 8):
            assert (plan.priced_batch, plan.variant, plan.captured, padding) == (batch, "cuda_graph", True, 0.0)
        elif batch < 8:
            assert plan.captured and plan.variant == "cuda_graph"
            assert plan.priced_batch == capture_size(batch, [1, 2, 4, 8]) > batch
            assert padding > 0
            assert padding == pytest.approx(
                _graph_time(ss, "decode", "cuda_graph", {"batch": plan.priced_batch, "cache_len": 8192})
                - _graph_time(ss, "decode", "cuda_graph", {"batch": batch, "cache_len": 8192}), rel=1e-9)
        else:  # above the largest captured size: eager, unpadded
            assert (plan.priced_batch, plan.variant, plan.captured, padding) == (batch, "baseline", False, 0.0)
        # The step is priced at the padded shape.
        from sim.serving.batching import Live, Step

        step = Step(decode=tuple(Live(RequestSpec(i, 0.0, 8000, 2), prefilled=8000) for i in range(batch)))
        rec = price_step(step, pricer, 0.0, 0.0)
        assert rec.time_s == pytest.approx(
            _graph_time(ss, "decode", plan.variant, {"batch": plan.priced_batch, "cache_len": 8192}), rel=1e-12)


def test_capture_size() -> None:
    assert [capture_size(b, [1, 2, 4, 8]) for b in (1, 3, 4, 5, 8, 9)] == [1, 4, 4, 8, 8, None]


# -- policies -----------------------------------------------------------------------------------------
def test_static_batch_decodes_until_its_longest_request(tmp_path: Path) -> None:
    ss = _load(tmp_path, _doc(batching={"policy": "static", "max_batch": 4, "max_wait_ms": 5}))
    reqs = [RequestSpec(0, 0.0, 100, 2), RequestSpec(1, 0.001, 100, 6), RequestSpec(2, 0.002, 100, 3),
            RequestSpec(3, 1.0, 100, 2)]
    run = simulate_serving(reqs, make_policy(ss.spec.batching, True), _pricer(ss))
    first = [s for s in run.steps if s.start_s < 1.0]
    # Batch of three (formed at the 5 ms deadline): one prefill, then 5 decode steps of 3 rows.
    assert first[0].start_s == pytest.approx(0.005)
    assert [s.kind for s in first] == ["prefill"] + ["decode"] * 5
    assert all(s.batch == 3 for s in first[1:])
    a, b, c = run.requests[:3]
    assert a.finish_s < c.finish_s < b.finish_s  # type: ignore[operator]


def test_chunked_prefill_splits_a_long_prompt(tmp_path: Path) -> None:
    ss = _load(tmp_path, _doc(batching={"policy": "continuous", "max_batch": 8, "token_budget": 300,
                                         "prefill": "chunked", "chunk_tokens": 256}))
    reqs = [RequestSpec(0, 0.0, 1000, 3)]
    run = simulate_serving(reqs, make_policy(ss.spec.batching, True), _pricer(ss))
    assert [(s.kind, s.prefill_tokens) for s in run.steps] == [
        ("prefill", 256), ("prefill", 256), ("prefill", 256), ("prefill", 232), ("decode", 0), ("decode", 0)]
    r = run.requests[0]
    assert r.first_token_s == pytest.approx(sum(s.time_s for s in run.steps[:4]))


def test_chunked_steps_mix_decode_and_prefill(tmp_path: Path) -> None:
    ss = _load(tmp_path, _doc(batching={"policy": "continuous", "max_batch": 8, "token_budget": 256,
                                         "prefill": "chunked", "chunk_tokens": 128}))
    reqs = [RequestSpec(0, 0.0, 64, 20), RequestSpec(1, 0.0001, 1000, 2)]
    run = simulate_serving(reqs, make_policy(ss.spec.batching, True), _pricer(ss))
    mixed = [s for s in run.steps if s.kind == "mixed"]
    assert mixed and all(s.batch == 1 and 0 < s.prefill_tokens <= 128 for s in mixed)
    assert all(r.finish_s is not None for r in run.requests)


def test_continuous_respects_max_batch_and_budget(tmp_path: Path) -> None:
    ss = _load(tmp_path, _doc(batching={"policy": "continuous", "max_batch": 3, "token_budget": 250}))
    reqs = [RequestSpec(i, 0.0, 100, 4) for i in range(7)]
    run = simulate_serving(reqs, make_policy(ss.spec.batching, True), _pricer(ss))
    assert max(s.batch for s in run.steps) == 3
    assert max(s.prefill_tokens for s in run.steps) == 200  # two 100-token prompts fit the 250 budget
    assert sum(r.spec.output_tokens for r in run.requests) == sum(s.batch for s in run.steps) + 7


# -- requests -----------------------------------------------------------------------------------------
def test_request_log_is_read_sorted_and_rescaled() -> None:
    reqs = read_request_log(LOG)
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in reqs][:3] == [
        (0.0, 120, 8), (0.004, 300, 16), (0.004, 64, 4)]
    fast = rescale(reqs, 200.0)  # 5 gaps over 52 ms ≈ 96/s → twice as fast
    assert fast[-1].arrival_s == pytest.approx(5 / 200.0)


@pytest.mark.parametrize(("name", "where"), [("bad_number.csv", "line 3.prompt_tokens"),
                                             ("bad_header.csv", "header")])
def test_bad_request_log(name: str, where: str) -> None:
    with pytest.raises(InputError) as exc:
        read_request_log(FIXTURES / "serving" / name)
    assert exc.value.path == where and name in str(exc.value)


def test_log_replay_runs(tmp_path: Path) -> None:
    doc = _doc(arrival={"process": "log", "file": str(LOG)})
    for key in ("prompt_tokens", "output_tokens", "sweep"):
        doc["serving"].pop(key)
    ss = _load(tmp_path, doc)
    res = run_serving(ss)
    for v in res["hardware"][0]["variants"]:
        (p,) = v["points"]
        assert p["requests"] == 6 and p["e2e_ms"]["p50"] > 0


def test_poisson_arrivals_share_random_numbers_across_rates() -> None:
    a = poisson_requests(50, 10.0, Lengths(uniform=(1, 9)), Lengths(fixed=3), seed=1)
    b = poisson_requests(50, 20.0, Lengths(uniform=(1, 9)), Lengths(fixed=3), seed=1)
    assert [r.prompt_tokens for r in a] == [r.prompt_tokens for r in b]
    assert [2 * r.arrival_s for r in b] == pytest.approx([r.arrival_s for r in a])


# -- whole runs ---------------------------------------------------------------------------------------
def test_run_is_deterministic_and_the_seed_matters(tmp_path: Path) -> None:
    doc = _doc(requests=100)
    doc["serving"]["variants"] = doc["serving"]["variants"][1:2]
    del doc["serving"]["sweep"]
    ss = _load(tmp_path, doc)
    one, two = run_serving(ss, [100.0]), run_serving(ss, [100.0])
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    other = run_serving(ServingScenario(**{**ss.__dict__, "spec": ss.spec.model_copy(update={"seed": 99})}), [100.0])
    assert json.dumps(one, sort_keys=True) != json.dumps(other, sort_keys=True)


def test_max_rate_walks_up_then_bisects() -> None:
    calls: list[float] = []

    def evaluate(rate: float) -> dict[str, Any]:
        calls.append(rate)
        return {"e2e_ms": {"p99": 10.0 + rate}}  # meets a 110 ms target up to 100/s

    res = max_rate_meeting(evaluate, [50, 80, 120, 200], 110.0, "e2e", bisect_steps=4)
    assert calls[:3] == [50, 80, 120]  # stops at the first rate that misses
    assert res["bracket_per_s"] == [pytest.approx(100.0), pytest.approx(102.5)]
    assert max_rate_meeting(evaluate, [200], 110.0, "e2e", 3)["rate_per_s"] is None
    assert max_rate_meeting(evaluate, [10, 20], 110.0, "e2e", 3)["rate_per_s"] == 20


def test_busy_share_and_latency_grow_with_rate(tmp_path: Path) -> None:
    ss = _load(tmp_path, _doc())
    pricer = _pricer(ss)
    lo, hi = run_point(ss, pricer, 20.0), run_point(ss, pricer, 2000.0)
    assert lo["gpu_busy_share"] < hi["gpu_busy_share"] <= 1.0
    assert lo["server_busy_share"] < hi["server_busy_share"] <= 1.0 + 1e-9
    assert lo["e2e_ms"]["p99"] < hi["e2e_ms"]["p99"]
    assert lo["mean_decode_batch"] < hi["mean_decode_batch"] <= 64


def test_cli_serve_shipped_scenario(tmp_path: Path) -> None:
    out, plots = tmp_path / "s.json", tmp_path / "plots"
    assert main(["serve", str(SHIPPED), "--requests", "120", "--rates", "50,400", "--json", str(out),
                 "--plots", str(plots), "--quiet"]) == 0
    res = json.loads(out.read_text())
    assert res["schema"] == "kernelsim.serve/v1"
    hw = res["hardware"][0]
    assert [v["name"] for v in hw["variants"]] == ["eager", "cuda_graph", "cuda_graph_every_size"]
    for v in hw["variants"]:
        assert [p["offered_rate_per_s"] for p in v["points"]] == [50.0, 300.0, 400.0]  # + the report rate
        for p in v["points"]:
            for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
                assert p[m]["p50"] <= p[m]["p90"] <= p[m]["p99"]
    assert {c["variant"] for c in hw["comparison"]} == {"cuda_graph", "cuda_graph_every_size"}
    assert (plots / "serving_latency_throughput_h200-measured.png").stat().st_size > 1000


@pytest.mark.parametrize(("edit", "path"), [
    (lambda s: s["variants"][0].update(decode="nope"), "serving.variants[0].decode"),
    (lambda s: s["decode"].update(batch_param="bsz"), "serving.decode.batch_param"),
    (lambda s: s["batching"].update(max_batch=0), "serving.batching.max_batch"),
    (lambda s: s["variants"][1].update(capture_batch_sizes=[4, 4]), "serving.variants[1]"),
    (lambda s: s.update(arrival={"process": "poisson"}), "serving.arrival"),
    (lambda s: s["prefill"].update(workload="missing.yaml"), "serving.prefill.workload"),
])
def test_bad_serving_input_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       edit: Any, path: str) -> None:
    doc = _doc()
    edit(doc["serving"])
    scn = write_yaml(tmp_path / "bad.yaml", doc)
    out = tmp_path / "out.json"
    assert main(["serve", str(scn), "--json", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(scn.name) in err and path in err
    assert not out.exists()


def test_serve_needs_a_serving_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(ROOT / "scenarios" / "bias_gelu_dropout.yaml"), "--quiet"]) == 2
    assert "serving" in capsys.readouterr().err
    assert main(["serve", str(SHIPPED), "--rates", "10,-1", "--quiet"]) == 2


def test_batching_defaults_are_documented_values() -> None:
    b = Batching()
    assert (b.policy, b.max_batch, b.token_budget, b.prefill) == ("continuous", 64, 4096, "separate")
