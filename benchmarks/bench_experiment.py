"""Speed of the experiment runner.

1. One repetition of one scenario (S-500-Mix: 500 rows, 16 features; N = 3,
   J = 0.5; 100 trees per site; all nine methods). Target: under 2 s.
2. The paper's full grid for one 500-row dataset (N in {2, 3, 4, 6}, J in
   {0.2, ..., 0.9}, 100 repetitions, all methods) on 2 processes, estimated
   from one repetition of each of the 32 scenarios. Target: under 2 hours.

Usage::

    python benchmarks/bench_experiment.py [--out benchmarks/results] [--sample-reps 1]

Writes ``<out>/experiment.json`` and ``<out>/experiment.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from fedforest.experiments.runner import (
    METHODS,
    PAPER_JACCARDS,
    PAPER_SITES,
    ExperimentPlan,
    load_table,
    run_experiment,
    run_repetition,
)

logger = logging.getLogger("bench_experiment")


def run(out: Path, sample_reps: int) -> dict:
    data = load_table("S-500-Mix")
    run_repetition(data, 3, 0.5, 99, METHODS)  # warm-up (imports, caches)
    times = []
    for rep in range(3):
        start = time.perf_counter()
        run_repetition(data, 3, 0.5, rep, METHODS)
        times.append(time.perf_counter() - start)
    one = min(times)
    logger.info("one repetition (N=3, J=0.5): %.2f s (best of 3)", one)
    plan = ExperimentPlan(datasets=["S-500-Mix"], reps=sample_reps, n_jobs=2)
    start = time.perf_counter()
    run_experiment(plan)
    grid_sample = time.perf_counter() - start
    scenarios = len(PAPER_SITES) * len(PAPER_JACCARDS)
    full = grid_sample / sample_reps * 100
    logger.info(
        "%d scenarios x %d reps on 2 processes: %.1f s -> full grid ~%.0f min",
        scenarios,
        sample_reps,
        grid_sample,
        full / 60,
    )
    bench = {
        "one_repetition_seconds": round(one, 3),
        "one_repetition_runs": [round(t, 3) for t in times],
        "grid_sample_reps": sample_reps,
        "grid_sample_seconds": round(grid_sample, 1),
        "full_grid_estimated_minutes": round(full / 60, 1),
        "scenarios": scenarios,
        "n_jobs": 2,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "experiment.json").write_text(json.dumps(bench, indent=2) + "\n")
    (out / "experiment.md").write_text(markdown(bench))
    return bench


def markdown(b: dict) -> str:
    return (
        f"One repetition (S-500-Mix, N=3, J=0.5, 100 trees per site, 9 methods): "
        f"{b['one_repetition_seconds']:.2f} s (target 2 s).\n\n"
        f"Full paper grid for one dataset ({b['scenarios']} scenarios x 100 repetitions, "
        f"2 processes): about {b['full_grid_estimated_minutes']:.0f} min, extrapolated from "
        f"{b['grid_sample_reps']} repetition(s) of every scenario in "
        f"{b['grid_sample_seconds']:.0f} s (target 120 min).\n"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--sample-reps", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    for name in ("bench_experiment", "fedforest.experiment"):
        logging.getLogger(name).setLevel(logging.INFO)
    print(markdown(run(args.out, args.sample_reps)))


if __name__ == "__main__":
    main()
