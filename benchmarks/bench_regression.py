"""The missing-split protocol on regression targets: does pooling beat a site's own forest?

Usage::

    python benchmarks/bench_regression.py [--reps 10] [--sites 6] [--jaccard 0.5] [--n-jobs 2]

Runs ``fedforest experiment --task regression`` (the experiment runner, in one process) on
the regression datasets (scikit-learn's ``diabetes``, and ``F-500-Num`` / ``F-500-Mix``,
Friedman #1 with 5 informative columns out of 16) with ``local``, ``mp``, ``wmp`` and
``intersection``, scored by RMSE on every site's test rows. About 2 minutes on 2 cores.
Writes ``<out>/regression.json`` and ``<out>/regression.md``: per dataset, the mean RMSE
over the repetitions (each repetition the mean over its sites) ± the standard deviation
over the repetitions, and in how many repetitions ``mp`` and ``wmp`` beat ``local``.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pandas as pd

from benchmarks import harness
from fedforest.experiments.plan import ExperimentPlan
from fedforest.experiments.runner import run_experiment

DATASETS = ("diabetes", "F-500-Num", "F-500-Mix")
METHODS = ("local", "mp", "wmp", "intersection")

logger = logging.getLogger("bench_regression")


def run(reps: int, sites: int, jaccard: float, trees: int, n_jobs: int) -> dict:
    """Run the grid; return the summary (``regression.json``)."""
    with harness.timed() as timing, tempfile.TemporaryDirectory() as tmp:
        plan = ExperimentPlan(
            datasets=list(DATASETS),
            n_sites=[sites],
            jaccards=[jaccard],
            reps=reps,
            methods=list(METHODS),
            metrics=["rmse"],
            n_estimators=trees,
            n_jobs=n_jobs,
            task="regression",
        )
        results = run_experiment(plan, Path(tmp) / "out")
    seconds = timing.seconds
    per_rep = results.groupby(["dataset", "rep", "method"])["value"].mean().unstack("method")
    datasets = {}
    for dataset in DATASETS:
        table: pd.DataFrame = per_rep.loc[dataset]
        datasets[dataset] = {
            "mean": {m: float(table[m].mean()) for m in METHODS},
            "sd": {m: float(table[m].std(ddof=1)) for m in METHODS},
            "beat_local": {m: int((table[m] < table["local"]).sum()) for m in ("mp", "wmp")},
            "reps": int(len(table)),
        }
    return {
        "settings": {
            "datasets": list(DATASETS),
            "methods": list(METHODS),
            "sites": sites,
            "jaccard": jaccard,
            "reps": reps,
            "trees": trees,
            "n_jobs": n_jobs,
        },
        "seconds": seconds,
        "datasets": datasets,
    }


def markdown(summary: dict) -> str:
    s = summary["settings"]
    lines = [
        "# Regression targets: mean RMSE per dataset",
        "",
        f"`python benchmarks/bench_regression.py`: the experiment protocol "
        f"(`fedforest experiment --task regression`) over {s['sites']} sites at Jaccard "
        f"{s['jaccard']}, {s['reps']} repetitions, {s['trees']} trees per site; ran in "
        f"{summary['seconds']:.0f} s with {s['n_jobs']} process(es). Mean RMSE on the sites' "
        "test rows (each repetition the mean over its sites) ± sd over the repetitions; lower "
        "is better, the best in bold.",
        "",
        "| dataset | "
        + " | ".join(s["methods"])
        + f" | repetitions (of {s['reps']}) where mp / wmp beat local |",
        "|---|" + "---:|" * (len(s["methods"]) + 1),
    ]
    for dataset, d in summary["datasets"].items():
        best = min(d["mean"], key=d["mean"].get)
        cells = []
        for m in s["methods"]:
            text = f"{d['mean'][m]:.2f} ± {d['sd'][m]:.2f}"
            cells.append(f"**{text}**" if m == best else text)
        beat = f"{d['beat_local']['mp']} / {d['beat_local']['wmp']}"
        lines.append(f"| {dataset} | " + " | ".join(cells) + f" | {beat} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    harness.grid_main(__doc__, "regression", run, markdown, logger, argv)


if __name__ == "__main__":
    main()
