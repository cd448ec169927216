"""Prediction quality of every missing-split method, from 3 to 10 sites.

The experiment runner (:mod:`fedforest.experiments.runner`, the paper's
protocol) runs every method of :data:`fedforest.vocabulary.EXPERIMENT_METHODS`
-- the paper's nine, ``node``, ``wmp`` and ``auto`` -- on the three S-500 sets
and three real tables bundled with scikit-learn (breast_cancer, wine, digits),
for 3, 6 and 10 sites at pairwise Jaccard overlap 0.3 and 0.7, with ``--reps``
repetitions each. Every site holds out validation rows from its training rows
(as in a job); ``wmp``'s guess weight and ``auto``'s choice are fitted on them
only, and every method is scored on the site's test rows.

Reported (``fedforest.experiments.statistics``): the mean AUPRC of every
method per scenario; its mean and standard error per number of sites (over
the blocks: dataset x overlap x repetition, each the mean over the sites);
average ranks over all blocks with the Friedman test and the Nemenyi critical
difference, and the critical difference diagram. And the two targets: ``wmp``
ranks better than ``mp`` over all blocks, and at every number of sites its mean
AUPRC is not below ``local``'s by more than one standard error of their paired
difference.

Then the job itself at many sites (``--job-sites``, default 10; ``0`` skips
it): ``benchmarks/bench_scale.py``'s setting (a 30-feature synthetic table,
``--job-rows`` rows per site, pairwise Jaccard 0.5, ``data_prep/jaccard_split.py``,
``site_configs/job.yaml``'s evaluation and election, 100 trees per site), run
in one process with the job's own phase driver, as the FLARE controller runs
it (``bench_scale.run_in_process``); reported: every strategy's AUPRC per site
and its mean over the sites.

With ``--noniid`` it runs only the non-iid sites instead, and adds them to
the report of the last run (``quality.json`` and ``quality.md`` keep every
other number): Dirichlet label skew (``--partition dirichlet``, alpha 0.3 and
1) of breast_cancer over 3, 6 and 10 sites whose columns overlap by Jaccard
0.5, ``--noniid-reps`` repetitions, methods ``local``, ``intersection``,
``mp`` and ``auto`` uncalibrated and ``auto`` with ``--calibration auto``
(the calibrated default), scored by AUC, Brier score, log-loss and accuracy;
and Dirichlet quantity skew (beta 0.5) with the pooling weights ``equal`` and
``rows`` for ``mp`` and ``auto``. Beside them, the reference no federation
can beat by much, *pooled data* (method ``pooled_data`` of the runner's
``ExperimentPlan(pooled_reference=True)``, :mod:`fedforest.experiments.reference`):
one scikit-learn random forest of ``--trees`` trees, seeded by the
repetition, trained on every site's training and validation rows of the
repetition pooled (the union of the columns, NaN where a site lacks one),
scored on each site's test rows, the same rows the methods are scored on; it
adds rows to the runner's results and changes none. Reported: mean ±
standard deviation over the repetitions of the per-repetition site means
(:func:`analyse_noniid`), the calibrated ``auto`` minus ``local`` and minus
pooled data per repetition (quantity skew: ``auto`` with equal weights minus
pooled data). Its tidy scores go to ``<out>/quality_noniid_results.csv.gz``
(with a ``setting`` column), which ``--noniid --from-results`` reads back.
And the targets (:func:`noniid_targets`): at every number of sites and alpha,
the deployed model (calibrated ``auto``) has a mean Brier score at most
``local``'s and a mean AUC at least ``local``'s, and is within 0.01 of pooled
data (Brier at most pooled data's + 0.01, AUC at least pooled data's - 0.01);
each with the paired difference to its reference, repetition by repetition, and
its standard error over the repetitions.

``--validation`` (``--noniid`` only) is what each site fits ``auto``'s choice
and the calibration on: ``oob`` (the default, a job's; no validation rows
held out, every forest and pooled data trained on every row but the test
rows, the fits on the training rows scored out of bag) or ``holdout`` (20% of
each site's rows held out of training, the paper's protocol). The holdout
results go to files of their own, ``<out>/quality_noniid_holdout.{json,md}``
and ``<out>/quality_noniid_holdout_results.csv.gz``; ``quality.*`` keep the
oob ones.

Usage::

    python benchmarks/bench_quality.py [--reps 20] [--sites 3,6,10] [--jaccards 0.3,0.7] \\
        [--datasets S-500-Num,...] [--trees 100] [--n-jobs 2] [--out benchmarks/results] \\
        [--job-sites 10] [--job-rows 5000]
    python benchmarks/bench_quality.py --from-results benchmarks/results/quality_results.csv.gz \\
        [--job-sites 10]
    python benchmarks/bench_quality.py --noniid [--noniid-reps 10] [--sites 3,6,10] [--trees 100] \\
        [--validation oob|holdout]
    python benchmarks/bench_quality.py --noniid \\
        --from-results benchmarks/results/quality_noniid_results.csv.gz

The default takes about 40 minutes on 2 cores (the job, about 3 of them).
Writes ``<out>/quality.json``, ``<out>/quality.md``, ``<out>/quality_cd.png``
(the diagram) and ``<out>/quality_results.csv.gz`` (the tidy scores, which
``--from-results`` reads back to redo the analysis without running anything).
"""

from __future__ import annotations

import argparse
import logging
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import harness
from fedforest.experiments.reference import REFERENCE
from fedforest.experiments.runner import ExperimentPlan, run_experiment
from fedforest.experiments.statistics import average_ranks, display_name, per_repetition
from fedforest.vocabulary import EXPERIMENT_METHODS, VALIDATIONS

logger = logging.getLogger("bench_quality")

DATASETS = ("S-500-Num", "S-500-Cat", "S-500-Mix", "breast_cancer", "wine", "digits")
#: The method the targets are about, and what it is compared with.
CANDIDATE, BASELINE_RANK, BASELINE_FLOOR = "wmp", "mp", "local"


def run(datasets, sites, jaccards, reps, trees, n_jobs) -> pd.DataFrame:
    """The tidy AUPRC scores of every method (runner output)."""
    plan = ExperimentPlan(
        datasets=list(datasets),
        n_sites=list(sites),
        jaccards=list(jaccards),
        reps=reps,
        methods=list(EXPERIMENT_METHODS),
        metrics=["auprc"],
        n_estimators=trees,
        n_jobs=n_jobs,
    )
    return run_experiment(plan)


def run_job(n_sites: int, rows: int, trees: int) -> dict:
    """Every strategy's test AUPRC at every site of one job (in one process)."""
    from benchmarks import bench_scale as scale

    logger.info("the job at %d sites, %d rows each", n_sites, rows)
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        configs = scale.make_job(Path(tmp) / "split", n_sites, rows, trees)
        results, _ = scale.run_in_process(configs)
    metrics = results["metrics"]
    strategies = list(next(iter(metrics.values())))
    per_site = {
        name: {site: metrics[site][name].get("auprc") for site in sorted(metrics)}
        for name in strategies
    }
    means = {
        name: float(np.mean([v for v in sites.values() if v is not None]))
        for name, sites in per_site.items()
    }
    weights = {site: metrics[site].get("wmp", {}).get("guess_weight") for site in sorted(metrics)}
    chosen = {site: metrics[site].get("auto", {}).get("chosen") for site in sorted(metrics)}
    return {
        "sites": n_sites,
        "rows_per_site": rows,
        "trees_per_site": trees,
        "seconds": time.monotonic() - start,
        "mean_auprc": dict(sorted(means.items(), key=lambda kv: -kv[1])),
        "auprc": per_site,
        "wmp_guess_weight": weights,
        "auto_chosen": chosen,
        "sites_below_local": {
            name: int(sum(v < per_site["local"][s] for s, v in sites.items() if v is not None))
            for name, sites in per_site.items()
            if "local" in per_site
        },
    }


def analyse(tidy: pd.DataFrame) -> dict:
    """Means, ranks, the Friedman test and the targets, as plain values."""
    rep = per_repetition(tidy[tidy["metric"] == "auprc"])
    methods = [m for m in EXPERIMENT_METHODS if m in set(rep["method"])]
    wide = rep.pivot_table(
        index=["dataset", "n_sites", "jaccard", "rep"], columns="method", values="value"
    )[methods]
    scenario = wide.groupby(level=["dataset", "n_sites", "jaccard"]).mean()
    per_sites = {}
    for n, block in wide.groupby(level="n_sites"):
        count = len(block)
        per_sites[int(n)] = {
            "blocks": count,
            "mean": {m: float(block[m].mean()) for m in methods},
            "se": {m: float(block[m].std(ddof=1) / math.sqrt(count)) for m in methods},
        }
    test = average_ranks(tidy, "auprc")
    out = {
        "methods": methods,
        "blocks": int(len(wide)),
        "scenario_mean": [
            {"dataset": d, "n_sites": int(n), "jaccard": float(j), **row.round(6).to_dict()}
            for (d, n, j), row in scenario.iterrows()
        ],
        "per_sites": per_sites,
        "ranks": {m: float(r) for m, r in test.ranks.items()},
        "friedman": {"statistic": test.statistic, "pvalue": test.pvalue},
        "critical_difference": test.cd,
    }
    if CANDIDATE in methods and BASELINE_RANK in methods and BASELINE_FLOOR in methods:
        floor = {}
        for n, block in wide.groupby(level="n_sites"):
            diff = block[CANDIDATE] - block[BASELINE_FLOOR]
            se = float(diff.std(ddof=1) / math.sqrt(len(diff)))
            floor[int(n)] = {"difference": float(diff.mean()), "se": se}
        out["paired"] = {
            other: paired(wide[CANDIDATE], wide[other])
            for other in methods
            if other != CANDIDATE and other in PAIRED_WITH
        }
        out["targets"] = {
            "rank_better_than_mp": out["ranks"][CANDIDATE] < out["ranks"][BASELINE_RANK],
            # one block has no standard error: then the difference itself must not be negative
            "not_below_local": {
                n: f["difference"] >= -(f["se"] if math.isfinite(f["se"]) else 0.0)
                for n, f in floor.items()
            },
            "difference_to_local": floor,
        }
    return out


#: Methods the candidate is compared with block by block.
PAIRED_WITH = ("mp", "fpv", "node", "local", "auto")


def paired(a: pd.Series, b: pd.Series) -> dict:
    """Blocks where ``a`` beats, ties and loses to ``b``, and the Wilcoxon signed-rank test."""
    from scipy.stats import wilcoxon

    diff = (a - b).to_numpy()
    nonzero = diff[diff != 0]
    pvalue = float(wilcoxon(nonzero).pvalue) if nonzero.size >= 2 else float("nan")
    return {
        "wins": int((diff > 0).sum()),
        "ties": int((diff == 0).sum()),
        "losses": int((diff < 0).sum()),
        "mean_difference": float(diff.mean()),
        "wilcoxon_p": pvalue,
    }


#: The non-iid scenarios (``--noniid``): a real table, overlap, skews and what is compared.
NONIID_DATASET, NONIID_JACCARD = "breast_cancer", 0.5
NONIID_ALPHAS, NONIID_BETA = (0.3, 1.0), 0.5
#: Repetitions per non-iid scenario (``--noniid`` takes about 8 minutes on 2 cores).
NONIID_REPS = 10
NONIID_METHODS = ("local", "intersection", "mp", "auto")
NONIID_METRICS = ("auc", "brier", "log_loss", "accuracy")
QUANTITY_METHODS = ("local", "mp", "auto")
#: Column of the label-skew tables -> (setting, method) it reads.
LABEL_COLUMNS = {
    "Local": ("dirichlet/none", "local"),
    "Intersection": ("dirichlet/none", "intersection"),
    "MP": ("dirichlet/none", "mp"),
    "Auto": ("dirichlet/none", "auto"),
    "Auto, calibrated": ("dirichlet/auto", "auto"),
    "Pooled data": ("dirichlet/none", REFERENCE),
}
#: Column of the quantity-skew tables -> (setting, method) it reads.
QUANTITY_COLUMNS = {
    "Local": ("quantity/equal", "local"),
    "MP, equal": ("quantity/equal", "mp"),
    "MP, rows": ("quantity/rows", "mp"),
    "Auto, equal": ("quantity/equal", "auto"),
    "Auto, rows": ("quantity/rows", "auto"),
    "Pooled data": ("quantity/equal", REFERENCE),
}
#: The calibrated default against the site's own forest, repetition by repetition.
DIFFERENCE = ("Auto, calibrated", "Local")
#: The per-repetition differences of each table: column -> (minuend, subtrahend) columns
#: (``difference``: :data:`DIFFERENCE`, the name results files have held it under).
LABEL_DIFFERENCES = {
    "difference": DIFFERENCE,
    "Auto, calibrated − Pooled data": ("Auto, calibrated", "Pooled data"),
}
QUANTITY_DIFFERENCES = {"Auto, equal − Pooled data": ("Auto, equal", "Pooled data")}


def run_noniid(sites, reps, trees, n_jobs, validation: str = "oob") -> pd.DataFrame:
    """The tidy scores of the non-iid settings, with a ``setting`` column.

    ``dirichlet/none`` and ``dirichlet/auto``: label skew, calibration none
    and auto (``auto`` only: the calibrated default); ``quantity/equal`` and
    ``quantity/rows``: quantity skew with either pooling weight. ``validation``
    is the runner's (``ExperimentPlan.validation``): under ``oob`` no setting
    holds out validation rows (``auto`` and the calibration are fitted on the
    training rows out of bag), under ``holdout`` every setting does (``auto``
    needs them), so the forests of one repetition are the same in every
    setting of its skew. Pooled data (method ``pooled_data``) is scored with
    ``dirichlet/none`` and ``quantity/equal``: it trains on the training and
    validation rows (every row but the test rows), the same in every setting.
    """
    common = dict(
        datasets=[NONIID_DATASET],
        n_sites=list(sites),
        jaccards=[NONIID_JACCARD],
        reps=reps,
        metrics=list(NONIID_METRICS),
        n_estimators=trees,
        n_jobs=n_jobs,
        validation=validation,
    )
    label = dict(common, partition="dirichlet", alphas=list(NONIID_ALPHAS))
    size = dict(common, partition="quantity", alphas=[NONIID_BETA], methods=list(QUANTITY_METHODS))
    plans = {
        "dirichlet/none": ExperimentPlan(
            **label, methods=list(NONIID_METHODS), pooled_reference=True
        ),
        "dirichlet/auto": ExperimentPlan(**label, methods=["auto"], calibration="auto"),
        "quantity/equal": ExperimentPlan(**size, pooling_weights="equal", pooled_reference=True),
        "quantity/rows": ExperimentPlan(**size, pooling_weights="rows"),
    }
    frames = []
    for setting, plan in plans.items():
        logger.info("non-iid setting %s", setting)
        frames.append(run_experiment(plan).assign(setting=setting))
    return pd.concat(frames, ignore_index=True)


def _skew_table(tidy: pd.DataFrame, columns: dict, differences=None) -> dict:
    """Mean ± sd over repetitions (of the site means) per number of sites, concentration,
    metric and column; with ``differences`` (column -> two columns) also their
    per-repetition gaps (a gap of a column the scores lack is left out)."""
    wide = {}
    for label, (setting, method) in columns.items():
        part = tidy[(tidy["setting"] == setting) & (tidy["method"] == method)]
        if part.empty:
            continue
        rep = per_repetition(part.drop(columns="setting"))
        rep["concentration"] = rep["dataset"].str.rsplit("-", n=1).str[-1].astype(float)
        wide[label] = rep.set_index(["n_sites", "concentration", "metric", "rep"])["value"]
    if not wide:
        return {"columns": [], "rows": []}
    frame = pd.DataFrame(wide)
    labels = list(frame.columns)
    for name, (a, b) in (differences or {}).items():
        if a in frame and b in frame:
            frame[name] = frame[a] - frame[b]
            labels.append(name)
    rows = []
    for (n, conc), block in frame.groupby(level=["n_sites", "concentration"]):
        values = {}
        for metric, m_block in block.groupby(level="metric"):
            values[metric] = {
                label: [float(m_block[label].mean()), float(m_block[label].std(ddof=1))]
                for label in labels
            }
        reps = int(block.index.get_level_values("rep").nunique())
        rows.append({"n_sites": int(n), "concentration": conc, "reps": reps, "values": values})
    return {"columns": labels, "rows": rows}


def analyse_noniid(tidy: pd.DataFrame) -> dict:
    """Mean ± sd tables of the non-iid settings (:func:`run_noniid`'s scores) and their
    targets (:func:`noniid_targets`), plain values."""
    label = _skew_table(tidy, LABEL_COLUMNS, LABEL_DIFFERENCES)
    return {
        "label_skew": label,
        "quantity_skew": _skew_table(tidy, QUANTITY_COLUMNS, QUANTITY_DIFFERENCES),
        "targets": noniid_targets(label),
    }


#: The column of the label-skew tables the targets are about: what a site deploys.
DEPLOYED = "Auto, calibrated"
#: How far the deployed model may be from pooled data (Brier above it, AUC below it).
POOLED_TOLERANCE = 0.01
#: Metrics of the non-iid targets, and whether lower is better.
TARGET_METRICS = {"brier": True, "auc": False}
#: The label-skew table's column of each target reference's per-repetition gap (deployed
#: minus it), from :data:`LABEL_DIFFERENCES`.
TARGET_GAPS = {ref: name for name, (dep, ref) in LABEL_DIFFERENCES.items() if dep == DEPLOYED}


def noniid_targets(label_skew: dict) -> list[dict]:
    """The non-iid targets, one entry per number of sites, alpha, metric and reference.

    At every number of sites and alpha (a row of :func:`_skew_table`'s label-skew
    table), the deployed model (:data:`DEPLOYED`) has a mean Brier score at most
    ``Local``'s and a mean AUC at least ``Local``'s, and is within
    :data:`POOLED_TOLERANCE` of ``Pooled data`` (Brier at most its + 0.01, AUC at
    least its - 0.01). Each entry: ``n_sites``, ``alpha``, ``metric``, ``against``
    (``Local`` or ``Pooled data``), ``deployed`` and ``reference`` (the means),
    ``bound`` (what the deployed mean is held to) and ``met``; where the table has the
    pair's per-repetition gap (:data:`TARGET_GAPS`), also ``difference`` (its mean,
    deployed minus reference), ``se`` (its standard error, sd / sqrt(reps); NaN with one
    repetition) and ``reps``: how far the target is met or missed against how much the
    repetitions can tell. A reference the table lacks (results before pooled data) has
    no entries.

    Examples
    --------
    >>> row = {"n_sites": 3, "concentration": 0.3, "reps": 4, "values": {
    ...     "brier": {"Local": [0.10, 0.0], "Auto, calibrated": [0.08, 0.0],
    ...               "difference": [-0.02, 0.01]},
    ...     "auc": {"Local": [0.90, 0.0], "Auto, calibrated": [0.89, 0.0]}}}
    >>> [(t["metric"], t["met"]) for t in noniid_targets({"rows": [row]})]
    [('brier', True), ('auc', False)]
    >>> brier = noniid_targets({"rows": [row]})[0]
    >>> round(brier["difference"], 3), round(brier["se"], 3), brier["reps"]
    (-0.02, 0.005, 4)
    """
    out = []
    for row in label_skew.get("rows", []):
        for metric, lower in TARGET_METRICS.items():
            cells = row["values"].get(metric, {})
            if DEPLOYED not in cells:
                continue
            deployed = cells[DEPLOYED][0]
            for against, tolerance in (("Local", 0.0), ("Pooled data", POOLED_TOLERANCE)):
                if against not in cells:
                    continue
                reference = cells[against][0]
                bound = reference + tolerance if lower else reference - tolerance
                met = deployed <= bound if lower else deployed >= bound
                target = {
                    "n_sites": int(row["n_sites"]),
                    "alpha": float(row["concentration"]),
                    "metric": metric,
                    "against": against,
                    "tolerance": tolerance,
                    "deployed": float(deployed),
                    "reference": float(reference),
                    "bound": float(bound),
                    "met": bool(met),
                }
                gap = cells.get(TARGET_GAPS[against])
                if gap is not None:
                    reps = int(row["reps"])
                    se = gap[1] / math.sqrt(reps) if reps > 1 else float("nan")
                    target.update(difference=float(gap[0]), se=float(se), reps=reps)
                out.append(target)
    return out


def _target_line(target: dict) -> str:
    """One target of :func:`noniid_targets` as a line of the report, ending in yes or NO."""
    lower = TARGET_METRICS[target["metric"]]
    name = "Brier" if target["metric"] == "brier" else "AUC"
    sign = "<=" if lower else ">="
    against = target["against"].lower() if target["against"] == "Local" else "pooled data"
    tolerance = target["tolerance"]
    shown = f"{against} {target['reference']:.4f}"
    if tolerance:
        shown += f" {'+' if lower else '-'} {tolerance:g}"
    margin = ""
    if "difference" in target:
        margin = harness.paired_margin(
            "deployed",
            against,
            target["difference"],
            target["se"],
            target["reps"],
            "repetitions",
            digits=4,
        )
    return (
        f"- {target['n_sites']} sites, alpha {target['alpha']:g}: deployed {name} "
        f"{target['deployed']:.4f} {sign} {shown}: {'yes' if target['met'] else 'NO'}{margin}"
    )


_NONIID_METRIC_NAMES = {
    "auc": "AUC",
    "brier": "Brier score (lower is better)",
    "log_loss": "log-loss (lower is better)",
    "accuracy": "accuracy",
}


def _mean_sd(mean, sd, signed: bool = False) -> str:
    """``mean ± sd`` (``-`` for an undefined value, e.g. the sd of one repetition)."""
    text = _f(mean) if not signed or _f(mean) == "-" else f"{mean:+.3f}"
    return f"{text} ± {_f(sd)}"


def _skew_markdown(table: dict, concentration: str, metrics) -> list[str]:
    labels = table["columns"]
    shown = [f"{DIFFERENCE[0]} − {DIFFERENCE[1]}" if c == "difference" else c for c in labels]
    gaps = {c for c in labels if c == "difference" or " − " in c}
    lines = []
    for metric in metrics:
        lines += [
            f"{_NONIID_METRIC_NAMES.get(metric, metric)[:1].upper()}"
            f"{_NONIID_METRIC_NAMES.get(metric, metric)[1:]}, mean ± sd over the "
            "repetitions:",
            "",
            f"| sites | {concentration} | " + " | ".join(shown) + " |",
            "|---|---" + "|---" * len(labels) + "|",
        ]
        for row in table["rows"]:
            cells = row["values"].get(metric)
            if cells is None:
                continue
            lines.append(
                f"| {row['n_sites']} | {row['concentration']:g} | "
                + " | ".join(_mean_sd(*cells[c], signed=c in gaps) for c in labels)
                + " |"
            )
        lines.append("")
    return lines


NONIID_HEADING = "## Non-iid sites: label skew and calibrated risks"
TARGETS_HEADING = "## Non-iid sites: targets"
#: What each validation mode fits ``auto``'s choice and the calibration on, as the report says.
FITTED = {
    "oob": "no validation rows held out: every forest trains on all the site's rows but its "
    "test rows, and `auto`'s choice and the calibration are fitted on those training rows "
    "scored out of bag (`--validation oob`, a job's default)",
    "holdout": "20% of each site's rows held out of training for validation, where `auto`'s "
    "choice and the calibration are fitted (`--validation holdout`, the paper's protocol)",
}
#: The rows pooled data trains on under each validation mode.
POOLED_ROWS = {
    "oob": "every site's training rows (all its rows but the test rows)",
    "holdout": "every site's training and validation rows",
}
#: The title of the standalone report of ``--validation holdout`` (``quality_noniid_holdout.md``).
HOLDOUT_TITLE = "# Prediction quality on non-iid sites: held-out validation rows"


def noniid_validation(cfg: dict) -> str:
    """The validation mode of a non-iid run's settings (``holdout`` for results before the
    modes, when the runner had that one)."""
    return cfg.get("validation", "holdout")


def render_noniid(result: dict) -> str:
    """The non-iid sections of ``quality.md`` (``quality_noniid_holdout.md``'s under
    ``--validation holdout``, after :data:`HOLDOUT_TITLE`)."""
    cfg = result["config"]
    validation = noniid_validation(cfg)
    lines = [
        NONIID_HEADING,
        "",
        f"`python benchmarks/bench_quality.py {cfg['command']}`: {cfg['dataset']} dealt over "
        f"{cfg['sites']} sites with Dirichlet label skew (`--partition dirichlet`, alpha "
        f"{', '.join(f'{a:g}' for a in cfg['alphas'])}; every site first gets the few rows of "
        "every class it needs to be split), the columns overlapping by Jaccard "
        f"{cfg['jaccard']:g}; {cfg['reps']} repetitions, {cfg['trees']} trees per site, "
        f"{FITTED[validation]}. Local, Intersection, MP and Auto are "
        "uncalibrated (`--calibration none`); *Auto, calibrated* is the calibrated default "
        "(`auto` with `--calibration auto`), on the same forests. *Auto, calibrated − Local* is "
        "that minus Local, repetition by repetition. Each value is the mean over the sites of one "
        f"repetition, then mean ± sd over the repetitions. Ran in {cfg['seconds']:.0f} s with "
        f"{cfg['n_jobs']} processes.",
        "",
    ]
    if "Pooled data" in result["label_skew"]["columns"]:
        lines += [
            "*Pooled data* is the reference no federation can beat by much: one scikit-learn "
            "random forest (as many trees as one site's, seeded by the repetition) trained on "
            f"{POOLED_ROWS[validation]} pooled (the union of the columns, NaN "
            "where a site lacks one, scikit-learn's own handling of missing values; categorical "
            "columns as their integer codes), scored on "
            "each site's test rows; *Auto, calibrated − Pooled data* is the distance to it, "
            "repetition by repetition.",
            "",
        ]
    lines += _skew_markdown(result["label_skew"], "alpha", NONIID_METRICS)
    targets = result.get("targets")
    if targets:
        met = sum(t["met"] for t in targets)
        lines += [
            TARGETS_HEADING,
            "",
            "At every number of sites and alpha, the deployed model (*Auto, calibrated*) has a "
            "mean Brier score at most Local's and a mean AUC at least Local's, and is within "
            f"{POOLED_TOLERANCE:g} of pooled data (means over the repetitions, as in the tables "
            f"above); {met} of {len(targets)} met:",
            "",
            *(_target_line(t) for t in targets),
            "",
            harness.margins_note("repetition by repetition", "repetitions"),
            "",
        ]
    lines += [
        "## Non-iid sites: quantity skew and pooling weights",
        "",
        f"The same table and overlap, the site sizes drawn from Dirichlet(beta = "
        f"{cfg['beta']:g}) (`--partition quantity`), each site with the table's class mix; "
        "MP and Auto (uncalibrated) with every site's trees weighted equally "
        "(`--pooling-weights equal`, the paper's) and by the site's training rows (`rows`)"
        + (
            "; *Pooled data* as above, and *Auto, equal − Pooled data* the distance of `auto` "
            "(equal weights) to it, repetition by repetition."
            if "Pooled data" in result["quantity_skew"]["columns"]
            else "."
        ),
        "",
    ]
    lines += _skew_markdown(result["quantity_skew"], "beta", NONIID_METRICS)
    return "\n".join(lines).rstrip() + "\n"


def render_noniid_holdout(result: dict) -> str:
    """``quality_noniid_holdout.md``: :data:`HOLDOUT_TITLE`, then the non-iid sections."""
    return f"{HOLDOUT_TITLE}\n\n" + render_noniid(result)


def _f(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def render(result: dict, config: dict) -> str:
    methods = result["methods"]
    names = [display_name(m) for m in methods]
    lines = [
        "# Prediction quality: every method, 3 to 10 sites",
        "",
        f"`python benchmarks/bench_quality.py` ({config['command']}): "
        f"{', '.join(config['datasets'])}; sites {config['sites']}, Jaccard "
        f"{config['jaccards']}, {config['reps']} repetitions, {config['trees']} trees per site; "
        f"{result['blocks']} blocks (dataset x sites x overlap x repetition, each the mean "
        f"over the sites). Ran in {config['seconds']:.0f} s with {config['n_jobs']} processes.",
        "",
        "## Average ranks (AUPRC, all blocks)",
        "",
        f"Friedman chi-square {_f(result['friedman']['statistic'], 1)}, p = "
        f"{result['friedman']['pvalue']:.3g}; Nemenyi critical difference (alpha 0.05) "
        f"{_f(result['critical_difference'], 2)}. Diagram: `quality_cd.png`.",
        "",
        "| method | average rank |",
        "|---|---|",
    ]
    lines += [f"| {display_name(m)} | {r:.2f} |" for m, r in result["ranks"].items()]
    lines += [
        "",
        "## Mean AUPRC per number of sites (± standard error over blocks)",
        "",
        "| sites | " + " | ".join(names) + " |",
        "|---" * (len(methods) + 1) + "|",
    ]
    for n, s in result["per_sites"].items():
        cells = [f"{s['mean'][m]:.3f} ± {s['se'][m]:.3f}" for m in methods]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    targets = result.get("targets")
    if targets:
        lines += [
            "",
            "## Targets",
            "",
            f"- WMP's average rank {result['ranks'][CANDIDATE]:.2f} against MP's "
            f"{result['ranks'][BASELINE_RANK]:.2f}: "
            f"{'met' if targets['rank_better_than_mp'] else 'missed'}.",
        ]
        for n, d in targets["difference_to_local"].items():
            ok = targets["not_below_local"][n]
            lines.append(
                f"- {n} sites: WMP minus Local {d['difference']:+.4f} (SE {d['se']:.4f}): "
                f"{'met' if ok else 'missed'}."
            )
        lines += [
            "",
            "WMP against each method, block by block (Wilcoxon signed-rank test on the "
            "per-block differences, ties left out):",
            "",
            "| against | WMP better | tie | WMP worse | mean difference | p |",
            "|---|---|---|---|---|---|",
        ]
        for other, c in result.get("paired", {}).items():
            lines.append(
                f"| {display_name(other)} | {c['wins']} | {c['ties']} | {c['losses']} | "
                f"{c['mean_difference']:+.4f} | {c['wilcoxon_p']:.2g} |"
            )
    job = result.get("job")
    if job:
        lines += [
            "",
            f"## The job at {job['sites']} sites",
            "",
            f"{job['rows_per_site']} rows and {job['trees_per_site']} trees per site, pairwise "
            "Jaccard 0.5 (`bench_scale.py`'s setting, in one process; "
            f"{job['seconds']:.0f} s). Mean test AUPRC over the sites, and the number of "
            "sites where the strategy does worse than the site's own forest:",
            "",
            "| strategy | mean AUPRC | sites below Local |",
            "|---|---|---|",
        ]
        for name, mean in job["mean_auprc"].items():
            lines.append(
                f"| {display_name(name)} | {mean:.4f} | {job['sites_below_local'].get(name, '-')} |"
            )
        weights = ", ".join(f"{w:g}" for w in job["wmp_guess_weight"].values() if w is not None)
        lines += ["", f"WMP's guess weights, site by site: {weights}."]
    lines += [
        "",
        "## Mean AUPRC per scenario",
        "",
        "| dataset | sites | J | " + " | ".join(names) + " |",
        "|---|---|---" + "|---" * len(methods) + "|",
    ]
    for row in result["scenario_mean"]:
        best = max(row[m] for m in methods)
        cells = [(f"**{row[m]:.3f}**" if row[m] == best else f"{row[m]:.3f}") for m in methods]
        lines.append(
            f"| {row['dataset']} | {row['n_sites']} | {row['jaccard']:g} | "
            + " | ".join(cells)
            + " |"
        )
    text = "\n".join(lines) + "\n"
    if result.get("noniid"):
        text += "\n" + render_noniid(result["noniid"])
    return text


def _numbers(kind, text: str) -> list:
    try:
        return [kind(t) for t in text.split(",") if t.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: {err}") from err


def main(argv=None) -> int:
    p = harness.parser(__doc__.split("\n")[0])
    p.add_argument("--datasets", type=harness.name_list, default=list(DATASETS))
    p.add_argument("--sites", type=lambda t: _numbers(int, t), default=[3, 6, 10])
    p.add_argument("--jaccards", type=lambda t: _numbers(float, t), default=[0.3, 0.7])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--trees", type=int, default=100, help="trees per site")
    p.add_argument("--n-jobs", type=int, default=2)
    p.add_argument("--from-results", type=Path, help="analyse these tidy scores; run nothing")
    p.add_argument(
        "--job-sites",
        type=int,
        help="sites of the job run (default 10; 0: none; with --from-results: run the job "
        "again only when given)",
    )
    p.add_argument("--job-rows", type=int, default=5000, help="rows per site of the job run")
    p.add_argument(
        "--noniid",
        action="store_true",
        help="run (or, with --from-results, analyse) only the non-iid settings and add them to "
        "the report in --out",
    )
    p.add_argument(
        "--noniid-reps", type=int, default=NONIID_REPS, help="repetitions of each non-iid scenario"
    )
    p.add_argument(
        "--validation",
        choices=VALIDATIONS,
        help="--noniid: what each site fits auto's choice and the calibration on: its training "
        "rows scored out of bag (oob, the default, a job's) or held-out validation rows "
        "(holdout, the paper's protocol; written to quality_noniid_holdout.*)",
    )
    args = p.parse_args(argv)
    if args.validation is not None and not args.noniid:
        p.error(
            f"--validation {args.validation} applies to --noniid; the full run holds out "
            "validation rows (the paper's protocol)"
        )
    # progress lines only: one per finished scenario, not one per site and strategy
    harness.start(logger, verbose=("fedforest.experiments.runner",))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.noniid:
        return _noniid_main(args, argv)
    config = {
        "command": " ".join(["bench_quality.py", *(argv if argv is not None else sys.argv[1:])]),
        "datasets": args.datasets,
        "sites": args.sites,
        "jaccards": args.jaccards,
        "reps": args.reps,
        "trees": args.trees,
        "n_jobs": args.n_jobs,
        "seconds": 0.0,
    }
    scores = args.out / "quality_results.csv.gz"
    job = None
    previous = args.out / "quality.json"
    # the non-iid part of the report is kept: --noniid alone runs it again
    noniid = harness.read_results(previous).get("noniid") if previous.is_file() else None
    if args.from_results:
        tidy = pd.read_csv(args.from_results)
        if previous.is_file():  # keep the settings, time and job run of the run that made them
            before = harness.read_results(previous)
            config, job = before["config"], before.get("job")
        if args.job_sites is not None:
            job = run_job(args.job_sites, args.job_rows, args.trees) if args.job_sites else None
    else:
        start = time.monotonic()
        tidy = run(args.datasets, args.sites, args.jaccards, args.reps, args.trees, args.n_jobs)
        config["seconds"] = time.monotonic() - start
        tidy.to_csv(scores, index=False, float_format="%.9g")
        n_job = 10 if args.job_sites is None else args.job_sites
        if n_job:
            job = run_job(n_job, args.job_rows, args.trees)
    result = analyse(tidy)
    if job:
        result["job"] = job
    if noniid:
        result["noniid"] = noniid
    with tempfile.TemporaryDirectory() as tmp:
        from fedforest.experiments.figures import plot_critical_difference

        png = plot_critical_difference(tidy, tmp, "auprc")
        shutil.copyfile(png, args.out / "quality_cd.png")
    text = render(result, config)
    harness.write_results(args.out, "quality", {"config": config, **result}, text, logger)
    print(text)
    return 0


def _noniid_main(args, argv) -> int:
    """``--noniid``: the non-iid settings, added to the report of the last run in ``--out``
    (``--validation holdout``: a report of their own, :func:`_noniid_holdout`)."""
    validation = args.validation or "oob"
    report = args.out / "quality.json"
    if validation == "holdout":
        return _noniid_holdout(args, argv)
    if not report.is_file():
        sys.exit(
            f"bench_quality.py: error: --noniid adds to the report of a full run, and {report} "
            "does not exist; run the benchmark without --noniid first"
        )
    result = harness.read_results(report)
    config = result.pop("config")
    cfg = _noniid_config(args, argv)
    if args.from_results:
        tidy = pd.read_csv(args.from_results)
        before = result.get("noniid")
        # the settings and time of the run that made the scores (when it was an oob run)
        if before and noniid_validation(before["config"]) == "oob":
            cfg = before["config"]
    else:
        tidy = _run_noniid(args, cfg)
        tidy.to_csv(args.out / "quality_noniid_results.csv.gz", index=False)  # exact floats
    result["noniid"] = {"config": cfg, **analyse_noniid(tidy)}
    # the full run's part of quality.md as it was written, then the non-iid sections anew
    markdown = args.out / "quality.md"
    text = markdown.read_text() if markdown.is_file() else render(result, config)
    text = text.split(f"\n{NONIID_HEADING}")[0]
    text += "\n" + render_noniid(result["noniid"])
    harness.write_results(args.out, "quality", {"config": config, **result}, text, logger)
    print(render_noniid(result["noniid"]))
    return 0


#: The files of ``--noniid --validation holdout`` (``.json``, ``.md``, ``_results.csv.gz``).
HOLDOUT_NAME = "quality_noniid_holdout"


def _noniid_holdout(args, argv) -> int:
    """``--noniid --validation holdout``: the non-iid settings in a report of their own,
    ``<out>/quality_noniid_holdout.{json,md}`` (the oob results in ``quality.*`` stay)."""
    own = args.out / f"{HOLDOUT_NAME}.json"
    cfg = _noniid_config(args, argv)
    if args.from_results:
        tidy = pd.read_csv(args.from_results)
        # the settings and time of the run that made the scores: this report's, or the
        # non-iid part of quality.json when it was measured holding out
        earlier = [harness.read_results(own)] if own.is_file() else []
        if (args.out / "quality.json").is_file():
            earlier.append(harness.read_results(args.out / "quality.json").get("noniid"))
        for before in earlier:
            if before and noniid_validation(before["config"]) == "holdout":
                cfg = dict(before["config"])
                if "validation" not in cfg:  # run when holdout was the only mode
                    cfg["command"] += " --validation holdout"  # the same run today
                    cfg["validation"] = "holdout"
                break
    else:
        tidy = _run_noniid(args, cfg)
        tidy.to_csv(args.out / f"{HOLDOUT_NAME}_results.csv.gz", index=False)  # exact floats
    result = {"config": cfg, **analyse_noniid(tidy)}
    text = render_noniid_holdout(result)
    harness.write_results(args.out, HOLDOUT_NAME, result, text, logger)
    print(text)
    return 0


def _run_noniid(args, cfg: dict) -> pd.DataFrame:
    """Run the non-iid settings of ``args``; their time goes to ``cfg["seconds"]``."""
    start = time.monotonic()
    tidy = run_noniid(args.sites, args.noniid_reps, args.trees, args.n_jobs, cfg["validation"])
    cfg["seconds"] = time.monotonic() - start
    return tidy


def _noniid_config(args, argv) -> dict:
    """The settings of a ``--noniid`` run, as its report states them."""
    words = argv if argv is not None else sys.argv[1:]
    return {
        "command": " ".join(words),
        "dataset": NONIID_DATASET,
        "jaccard": NONIID_JACCARD,
        "sites": args.sites,
        "alphas": list(NONIID_ALPHAS),
        "beta": NONIID_BETA,
        "reps": args.noniid_reps,
        "trees": args.trees,
        "n_jobs": args.n_jobs,
        "validation": args.validation or "oob",
        "seconds": 0.0,
    }


if __name__ == "__main__":
    sys.exit(main())
