"""The missing-split protocol on time-to-event targets: does pooling beat a site's own forest?

Usage::

    python benchmarks/bench_survival.py [--reps 10] [--sites 6] [--jaccard 0.5] [--n-jobs 2]

Runs ``fedforest experiment --task survival`` (the experiment runner, in one process) on
scikit-survival's bundled GBSG2, WHAS500 and veterans data with ``local``, ``mp``,
``wmp``, ``auto`` and ``intersection`` and the pooled-data reference, scored by Harrell's C,
Uno's C, the integrated Brier score and the time-dependent AUC on every site's test rows.
Writes ``<out>/survival.json`` and ``<out>/survival.md``: per dataset and metric, the mean
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
from fedforest.experiments.reference import REFERENCE
from fedforest.experiments.runner import run_experiment
from fedforest.vocabulary import LOWER_IS_BETTER, SURVIVAL_METRICS

DATASETS = ("gbsg2", "whas500", "veterans")
METHODS = ("local", "mp", "wmp", "auto", "intersection")
#: Metric names in the tables.
LABELS = {
    "cindex": "Harrell's C",
    "uno_cindex": "Uno's C",
    "ibs": "integrated Brier score",
    "td_auc": "time-dependent AUC",
}

logger = logging.getLogger("bench_survival")


def run(reps: int, sites: int, jaccard: float, trees: int, n_jobs: int) -> dict:
    """Run the grid; return the summary (``survival.json``)."""
    with harness.timed() as timing, tempfile.TemporaryDirectory() as tmp:
        plan = ExperimentPlan(
            datasets=list(DATASETS),
            n_sites=[sites],
            jaccards=[jaccard],
            reps=reps,
            methods=list(METHODS),
            metrics=list(SURVIVAL_METRICS),
            n_estimators=trees,
            n_jobs=n_jobs,
            task="survival",
            pooled_reference=True,
        )
        results = run_experiment(plan, Path(tmp) / "out")
    seconds = timing.seconds
    columns = [*METHODS, REFERENCE]
    per_rep = results.groupby(["dataset", "metric", "rep", "method"])["value"].mean()
    per_rep = per_rep.unstack("method")
    datasets = {}
    for dataset in DATASETS:
        datasets[dataset] = {}
        for metric in SURVIVAL_METRICS:
            table: pd.DataFrame = per_rep.loc[(dataset, metric)]
            lower = metric in LOWER_IS_BETTER
            better = (lambda a, b: a < b) if lower else (lambda a, b: a > b)
            datasets[dataset][metric] = {
                "mean": {m: float(table[m].mean()) for m in columns},
                "sd": {m: float(table[m].std(ddof=1)) for m in columns},
                "beat_local": {
                    m: int(better(table[m], table["local"]).sum()) for m in ("mp", "wmp")
                },
                "reps": int(len(table)),
            }
    targets = {
        d: {
            "wmp_cindex_above_local": datasets[d]["cindex"]["mean"]["wmp"]
            > datasets[d]["cindex"]["mean"]["local"],
            "wmp_ibs_below_local": datasets[d]["ibs"]["mean"]["wmp"]
            < datasets[d]["ibs"]["mean"]["local"],
        }
        for d in DATASETS
    }
    return {
        "settings": {
            "datasets": list(DATASETS),
            "methods": list(METHODS),
            "metrics": list(SURVIVAL_METRICS),
            "sites": sites,
            "jaccard": jaccard,
            "reps": reps,
            "trees": trees,
            "n_jobs": n_jobs,
        },
        "seconds": seconds,
        "datasets": datasets,
        "targets": targets,
    }


def markdown(summary: dict) -> str:
    s = summary["settings"]
    columns = [*s["methods"], REFERENCE]
    lines = [
        "# Survival targets: Harrell's C, Uno's C, integrated Brier score, time-dependent AUC",
        "",
        f"`python benchmarks/bench_survival.py`: the experiment protocol "
        f"(`fedforest experiment --task survival`) over {s['sites']} sites at Jaccard "
        f"{s['jaccard']}, {s['reps']} repetitions, {s['trees']} trees per site; ran in "
        f"{summary['seconds']:.0f} s with {s['n_jobs']} process(es). The mean on the sites' "
        "test rows (each repetition the mean over its sites) ± sd over the repetitions, the "
        "best method in bold; `pooled_data` is one random survival forest on every site's "
        "rows pooled (the reference no federation beats by much). The integrated Brier "
        "score is lower-is-better, the others higher-is-better.",
    ]
    for metric in s["metrics"]:
        lower = metric in LOWER_IS_BETTER
        lines += [
            "",
            f"**{LABELS[metric]}** ({metric}, {'lower' if lower else 'higher'} is better)",
            "",
            "| dataset | "
            + " | ".join(columns)
            + f" | repetitions (of {s['reps']}) where mp / wmp beat local |",
            "|---|" + "---:|" * (len(columns) + 1),
        ]
        for dataset, by_metric in summary["datasets"].items():
            d = by_metric[metric]
            means = {m: d["mean"][m] for m in s["methods"]}
            best = (min if lower else max)(means, key=means.get)
            cells = []
            for m in columns:
                text = f"{d['mean'][m]:.3f} ± {d['sd'][m]:.3f}"
                cells.append(f"**{text}**" if m == best else text)
            beat = f"{d['beat_local']['mp']} / {d['beat_local']['wmp']}"
            lines.append(f"| {dataset} | " + " | ".join(cells) + f" | {beat} |")
    met = [
        d
        for d, t in summary["targets"].items()
        if t["wmp_cindex_above_local"] and t["wmp_ibs_below_local"]
    ]
    lines += [
        "",
        f"`wmp` has a higher mean Harrell's C and a lower mean integrated Brier score than "
        f"`local` on {len(met)} of {len(summary['targets'])} datasets"
        + (f" ({', '.join(met)})." if met else "."),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    harness.grid_main(__doc__, "survival", run, markdown, logger, argv)


if __name__ == "__main__":
    main()
