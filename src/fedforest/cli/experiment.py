"""``fedforest experiment``: the missing-split paper's protocol, in process."""

from __future__ import annotations

import argparse
import logging

from ..vocabulary import (
    AUTO_METRICS,
    CALIBRATIONS,
    DEFAULT_AUTO_METRIC,
    METRICS,
    POOLING_WEIGHTS,
    REGRESSION_METRICS,
    SURVIVAL_AUTO_METRICS,
    SURVIVAL_METRICS,
    TASKS,
    VALIDATIONS,
    VOTING,
)
from .options import MAX_TREES, choice, integer, listed, name, number


def _experiment(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..experiments.datasets import load_table
    from ..experiments.reports import summary_tables, write_report
    from ..experiments.runner import (
        EXPERIMENT_COMMAND,
        PAPER_JACCARDS,
        PAPER_SITES,
        ExperimentPlan,
        run_experiment,
    )
    from ..outputs import record_dir

    if args.site_files:
        given = [o for o, v in (("--sites", args.sites), ("--jaccards", args.jaccards)) if v]
        given += [f"datasets ({', '.join(args.datasets)})"] if args.datasets else []
        given += ["--partition"] if args.partition != "jaccard" else []
        given += ["--alphas"] if args.alphas else []
        if given:
            raise ValueError(
                f"{', '.join(given)} do not apply to --site-files: the files are the sites, "
                "with their own rows and columns"
            )
    elif not args.datasets:
        raise ValueError("name at least one dataset, or give --site-files")
    elif args.name:
        raise ValueError("--name names the data of --site-files; no site files given")
    if args.partition != "jaccard" and not args.alphas:
        raise ValueError(
            f"--partition {args.partition} needs its Dirichlet concentrations: --alphas, "
            "e.g. --alphas 0.3,1"
        )
    if args.alphas and args.partition == "jaccard":
        raise ValueError("--alphas applies to --partition dirichlet or quantity")
    if (
        not args.site_files
        and (args.target or args.categorical)
        and not any(Path(d).is_file() for d in args.datasets)
    ):
        load_table(args.datasets[0])  # an unknown name is refused by name first
        raise ValueError(
            "--target and --categorical apply to CSV datasets; "
            f"{', '.join(args.datasets)} {'is' if len(args.datasets) == 1 else 'are'} "
            "synthetic or bundled with scikit-learn"
        )
    plan = ExperimentPlan(
        datasets=list(args.datasets),
        n_sites=args.sites or list(PAPER_SITES),
        jaccards=args.jaccards or list(PAPER_JACCARDS),
        reps=args.reps,
        methods=args.methods,
        metrics=args.metrics,
        voting=args.voting,
        n_estimators=args.trees,
        depth_threshold=args.depth_threshold,
        target=args.target,
        categorical=args.categorical or [],
        n_jobs=args.n_jobs,
        validation_fraction=args.validation_fraction,
        validation=args.validation,
        partition=args.partition,
        alphas=args.alphas or [],
        site_files=list(args.site_files or []),
        name=args.name,
        calibration=args.calibration,
        pooling_weights=args.pooling_weights,
        auto_metric=args.auto_metric,
        task=args.task,
    )
    out = Path(args.out)
    # progress lines (one per finished scenario) show even without --verbose
    logging.getLogger("fedforest.experiments.runner").setLevel(logging.INFO)
    logging.getLogger("fedforest.experiments.reports").setLevel(logging.INFO)
    tidy = run_experiment(plan, out)  # refuses a folder that may be a user's, before running
    try:
        print(f"results: {out / 'results.csv'} ({len(tidy)} rows)")
        metric = plan.metrics[0]
        for dataset, table in summary_tables(tidy, metric=metric).items():
            print(f"\nmean {metric} ({dataset}):")
            print(table.round(3).to_string())
        if not args.no_report:
            print(f"\nreport: {write_report(tidy, out, metrics=tuple(plan.metrics))}")
    finally:
        record_dir(out, EXPERIMENT_COMMAND)  # the report's files are the experiment's too
    return 0


def add_parser(sub) -> None:
    """Add ``experiment`` to the subcommands ``sub``."""
    from ..experiments.datasets import VALIDATION_FRACTION
    from ..experiments.runner import ALL_METHODS, METHODS
    from ..experiments.skew import PARTITIONS

    p = sub.add_parser(
        "experiment",
        help="the missing-split paper's protocol over sites, overlaps and repetitions",
        description="Run the paper's protocol in-process: for each dataset, number of sites, "
        "Jaccard overlap and repetition, split rows and features, train, pool and score every "
        "method at every site. Writes results.csv (tidy), summary tables, plots and report.md. "
        "The rows can be skewed over the sites (--partition), or the sites can be real ones, "
        "one CSV file each (--site-files). With --task regression the targets are numbers, "
        "scored by RMSE (default), MAE or R²; with --task survival they are times to an event "
        "(random survival forests, scored by Harrell's C and the integrated Brier score by "
        "default).",
    )
    p.add_argument(
        "datasets",
        nargs="*",
        help="classification: S-500-Num, S-500-Cat, S-500-Mix, breast_cancer, wine, digits; "
        "regression (--task regression): F-500-Num, F-500-Mix, diabetes; survival (--task "
        "survival): gbsg2, whas500, veterans; or CSV files (with --target); none with "
        "--site-files",
    )
    p.add_argument(
        "--task",
        type=choice(TASKS),
        default="classification",
        help="what the target is: classification (class labels, the default) or regression "
        "(numbers: regression forests scored by rmse, mae or r2; rows dealt and split without "
        "stratification; no --calibration, --auto-metric, --voting hard or --partition "
        "dirichlet) or survival (a time and an event: random survival forests on a grid of "
        "event-time quantiles, rows dealt and split stratified by event, scored by cindex, "
        "uno_cindex, ibs or td_auc; --partition jaccard only)",
    )
    p.add_argument("--target", help="target column of CSV datasets and site files")
    p.add_argument(
        "--categorical",
        type=listed(name, "column names"),
        help="categorical columns of CSV datasets, comma-separated",
    )
    p.add_argument(
        "--sites",
        type=listed(integer(2), "numbers of sites"),
        help="numbers of sites, each >= 2 (default 2,3,4,6)",
    )
    p.add_argument(
        "--jaccards",
        type=listed(number(0, 1, low_open=True), "overlaps"),
        help="target pairwise Jaccard overlaps, each in (0, 1] (default 0.2,...,0.9)",
    )
    p.add_argument(
        "--partition",
        type=choice(PARTITIONS),
        default="jaccard",
        help="how the rows are dealt over the sites: jaccard (the paper's even stratified deal, "
        "default), dirichlet (label skew: each class's shares drawn from Dirichlet(alpha)) or "
        "quantity (site sizes drawn from Dirichlet(alpha)); the columns overlap by --jaccards",
    )
    p.add_argument(
        "--alphas",
        type=listed(number(0, low_open=True), "concentrations"),
        help="Dirichlet concentrations for --partition dirichlet or quantity, comma-separated "
        "(small: strong skew); the results name each dataset@partition-alpha",
    )
    p.add_argument(
        "--site-files",
        nargs="+",
        metavar="CSV",
        help="natural sites instead of datasets: one CSV file per site (site name: the file "
        "stem), each with its own columns and the --target column",
    )
    p.add_argument("--name", help="the dataset name of --site-files (default: the stems joined)")
    p.add_argument("--reps", type=integer(1), default=100, help="repetitions per scenario")
    p.add_argument(
        "--methods",
        type=listed(choice(ALL_METHODS), "methods"),
        default=",".join(METHODS),
        help="methods to score (default: the paper's nine; also node, wmp, auto)",
    )
    p.add_argument(
        "--validation",
        choices=VALIDATIONS,
        default="holdout",
        help="what wmp, auto, a calibration and --auto-metric are fitted on: holdout, the "
        "paper's protocol (each site holds out its validation fraction of rows from training), "
        "or oob, a job's default (no validation rows: every forest trains on all the site's "
        "rows but its test rows, and the fits use those rows scored out of bag, each by the "
        "trees that did not train on it); default holdout",
    )
    p.add_argument(
        "--validation-fraction",
        type=number(0, 0.65, low_open=True),
        default=VALIDATION_FRACTION,
        help="share of each site's rows held out for validation when wmp, auto or a "
        f"calibration is fitted under --validation holdout (default {VALIDATION_FRACTION})",
    )
    p.add_argument(
        "--metrics",
        type=listed(choice((*METRICS, *REGRESSION_METRICS, *SURVIVAL_METRICS)), "metrics"),
        help="metrics to score, comma-separated (default auprc,auc,mcc, the paper's; also "
        "accuracy and the lower-is-better brier, log_loss, ece); with brier, log_loss or ece "
        "the reliability bins are written to calibration.csv. With --task regression: rmse "
        "(the default), mae (both lower is better) and r2. With --task survival: cindex "
        "(Harrell's C) and ibs (integrated Brier score, lower is better), the default, "
        "uno_cindex and td_auc (the mean time-dependent AUC over the time grid)",
    )
    p.add_argument(
        "--calibration",
        type=choice(CALIBRATIONS),
        default="none",
        help="calibration of every method's probabilities, fitted as wmp and auto are (see "
        "--validation): none (default), prior, sigmoid, isotonic or auto; other than none also "
        "writes calibration.csv",
    )
    p.add_argument(
        "--pooling-weights",
        type=choice(POOLING_WEIGHTS),
        default="equal",
        help="weight of each site's trees in the pooled vote: equal (default, the paper's) or "
        "rows (each site's training rows)",
    )
    p.add_argument(
        "--auto-metric",
        type=choice((*AUTO_METRICS, *SURVIVAL_AUTO_METRICS)),
        help=f"the validation metric auto chooses by (default {DEFAULT_AUTO_METRIC}; with "
        f"--task survival {' or '.join(SURVIVAL_AUTO_METRICS)}, default ibs)",
    )
    p.add_argument(
        "--voting",
        default="soft",
        choices=VOTING,
        help="hard reproduces the paper's reference code",
    )
    p.add_argument("--trees", type=integer(1, MAX_TREES), default=100, help="trees per site")
    p.add_argument("--depth-threshold", type=integer(0), default=2)
    p.add_argument("--n-jobs", type=integer(1), default=1, help="parallel processes")
    p.add_argument("--out", default="experiments/run", help="output folder")
    p.add_argument("--no-report", action="store_true", help="skip plots and report.md")
    p.set_defaults(func=_experiment)
