"""Run a fuzz campaign and report its figures: `python -m tests.fuzz.run --n 10000 [--seed S]`.

Cases come from tests/fuzz/strategies.py with a fixed seed (same seed, same cases); most run
in-process in worker processes that calls the CLI's main(), every `--subprocess-every`-th
in a fresh `python -m sim` process. Exit status 0 when no case failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as fixed_seed

from tests.fuzz import strategies
from tests.fuzz.harness import Pool, Report
from tests.fuzz.strategies import Case


def generate(n: int, seed: int) -> list[Case]:
    """`n` cases drawn by Hypothesis from `seed` (the same seed gives the same cases)."""
    out: list[Case] = []

    @fixed_seed(seed)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategies.cases())
    def collect(case: Case) -> None:
        out.append(case)

    collect()
    return out[:n]


def campaign(n: int, seed: int, subprocess_every: int = 50, workers: int = 2, batch: int = 500,
             progress: Callable[[Report], None] | None = None) -> Report:
    """Run `n` generated cases on `workers` processes; every `subprocess_every`-th in a fresh process."""
    report = Report()
    pool = Pool(workers)
    t0 = time.perf_counter()
    try:
        for b in range(0, n, batch):
            cases = generate(min(batch, n - b), seed * 100_003 + b // batch)
            jobs = [(c, subprocess_every > 0 and (b + i) % subprocess_every == subprocess_every - 1)
                    for i, c in enumerate(cases)]
            for outcome, fresh in pool.run_all(jobs):
                report.add(outcome, fresh)
            report.seconds = time.perf_counter() - t0
            if progress is not None:
                progress(report)
    finally:
        pool.close()
        report.peak_rss = max(report.peak_rss, pool.peak_rss)
        report.seconds = time.perf_counter() - t0
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__)
    ap.add_argument("--n", type=int, default=10_000, help="number of cases (default 10000)")
    ap.add_argument("--seed", type=int, default=22, help="generation seed (default 22)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--subprocess-every", type=int, default=50,
                    help="run every N-th case in a fresh process (default 50; 0: none)")
    args = ap.parse_args(argv)

    def show(r: Report) -> None:
        print(f"... {r.cases} cases, {r.seconds:.0f} s, failures: {dict(r.failures) or 'none'}", flush=True)

    report = campaign(args.n, args.seed, args.subprocess_every, args.workers, progress=show)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
