"""Speed of the experiment runner, and how it scales with cores.

1. One repetition of one scenario (S-500-Mix: 500 rows, 16 features; N = 3,
   J = 0.5; 100 trees per site; all nine methods). Target: under 2 s.
2. The paper's grid for one 500-row dataset (N in {2, 3, 4, 6}, J in
   {0.2, ..., 0.9}, all methods), ``--sample-reps`` repetitions of each of
   the 32 scenarios, run once per worker count of ``--workers``
   (``ExperimentPlan.n_jobs``: repetitions in a process pool). Every worker,
   and the main process of the one-worker run, computes on one thread
   (BLAS and the numba kernels), so the ratio is the scaling with processes
   on as many cores. Reported: each run's seconds, the full grid (100
   repetitions) extrapolated from it, the time at k workers over the time at
   one (target at 2 workers: at most 0.55), and the per-core efficiency
   (t1 / (k tk)).

Usage::

    python benchmarks/bench_experiment.py [--out benchmarks/results] [--sample-reps 2] \
        [--workers 1,2]

Writes ``<out>/experiment.json`` and ``<out>/experiment.md``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from benchmarks import harness
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


#: The most the grid may take at 2 workers, as a share of its time at one.
TARGET_TWO_WORKERS = 0.55


def one_thread():
    """Limit BLAS and the numba kernels to one thread (as the pool's workers are)."""
    from threadpoolctl import threadpool_limits

    from fedforest.prediction.engines import load_kernels

    kernels, _ = load_kernels()
    if kernels is not None:
        kernels.MAX_THREADS = 1
    return threadpool_limits(1)


def run(out: Path, sample_reps: int, workers: list[int]) -> dict:
    data = load_table("S-500-Mix")
    one_thread()
    run_repetition(data, 3, 0.5, 99, METHODS)  # warm-up (imports, caches)
    times = []
    for rep in range(3):
        with harness.timed() as t:
            run_repetition(data, 3, 0.5, rep, METHODS)
        times.append(t.seconds)
    one = min(times)
    logger.info("one repetition (N=3, J=0.5): %.2f s (best of 3)", one)
    scenarios = len(PAPER_SITES) * len(PAPER_JACCARDS)
    grid = {}
    progress = harness.Progress(logger, len(workers), "worker counts")
    for k in workers:
        plan = ExperimentPlan(datasets=["S-500-Mix"], reps=sample_reps, n_jobs=k)
        with harness.timed() as t:
            run_experiment(plan)
        seconds = t.seconds
        grid[k] = {
            "seconds": round(seconds, 1),
            "full_grid_estimated_minutes": round(seconds / sample_reps * 100 / 60, 1),
        }
        progress.step(
            f"{scenarios} scenarios x {sample_reps} reps on {k} worker(s): {seconds:.1f} s -> "
            f"full grid ~{grid[k]['full_grid_estimated_minutes']:.0f} min"
        )
    if 1 in grid:
        for k, row in grid.items():
            row["share_of_one_worker"] = round(row["seconds"] / grid[1]["seconds"], 3)
            row["per_core_efficiency"] = round(grid[1]["seconds"] / (k * row["seconds"]), 3)
    bench = {
        "one_repetition_seconds": round(one, 3),
        "one_repetition_runs": [round(t, 3) for t in times],
        "grid_sample_reps": sample_reps,
        "scenarios": scenarios,
        "grid": {str(k): v for k, v in grid.items()},
        "target_two_workers": TARGET_TWO_WORKERS,
        "cores": harness.cpu_count(),
    }
    harness.write_results(out, "experiment", bench, markdown(bench), logger)
    return bench


def markdown(b: dict) -> str:
    lines = [
        f"One repetition (S-500-Mix, N=3, J=0.5, 100 trees per site, 9 methods, one thread): "
        f"{b['one_repetition_seconds']:.2f} s (target 2 s).",
        "",
        f"The paper's grid for one dataset ({b['scenarios']} scenarios), "
        f"{b['grid_sample_reps']} repetition(s) of every scenario, one thread per worker, "
        f"{b['cores']} cores; the full grid (100 repetitions) extrapolated from it. Target at "
        f"2 workers: at most {b['target_two_workers']:g} of the one-worker time.",
        "",
        "| workers | seconds | full grid (min) | share of 1 worker | per-core efficiency |",
        "|---|---|---|---|---|",
    ]
    for k, row in b["grid"].items():
        share = row.get("share_of_one_worker")
        eff = row.get("per_core_efficiency")
        lines.append(
            f"| {k} | {row['seconds']:.1f} | {row['full_grid_estimated_minutes']:.0f} | "
            f"{'-' if share is None else f'{share:.3f}'} | "
            f"{'-' if eff is None else f'{eff:.2f}'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--sample-reps", type=harness.at_least(1), default=2)
    parser.add_argument(
        "--workers", type=harness.int_list, default=[1, 2], help="comma-separated worker counts"
    )
    args = parser.parse_args(argv)
    workers = args.workers
    if not workers or min(workers) < 1:
        parser.error(f"--workers {','.join(map(str, workers))!r}: each at least 1")
    harness.start(logger, verbose=("fedforest.experiment",))
    print(markdown(run(args.out, args.sample_reps, workers)))


if __name__ == "__main__":
    main()
