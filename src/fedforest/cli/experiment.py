"""``fedforest experiment``: the missing-split paper's protocol, in process."""

from __future__ import annotations

import argparse
import logging

from ..vocabulary import METRICS, VOTING
from .options import MAX_TREES, choice, integer, listed, name, number


def _experiment(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..experiments.reports import summary_tables, write_report
    from ..experiments.runner import EXPERIMENT_COMMAND, ExperimentPlan, load_table, run_experiment
    from ..outputs import record_dir

    if (args.target or args.categorical) and not any(Path(d).is_file() for d in args.datasets):
        load_table(args.datasets[0])  # an unknown name is refused by name first
        raise ValueError(
            "--target and --categorical apply to CSV datasets; "
            f"{', '.join(args.datasets)} {'is' if len(args.datasets) == 1 else 'are'} "
            "synthetic or bundled with scikit-learn"
        )
    plan = ExperimentPlan(
        datasets=list(args.datasets),
        n_sites=args.sites,
        jaccards=args.jaccards,
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
    from ..experiments.runner import (
        ALL_METHODS,
        METHODS,
        PAPER_JACCARDS,
        PAPER_SITES,
        VALIDATION_FRACTION,
    )

    p = sub.add_parser(
        "experiment",
        help="the missing-split paper's protocol over sites, overlaps and repetitions",
        description="Run the paper's protocol in-process: for each dataset, number of sites, "
        "Jaccard overlap and repetition, split rows and features, train, pool and score every "
        "method at every site. Writes results.csv (tidy), summary tables, plots and report.md.",
    )
    p.add_argument(
        "datasets", nargs="+", help="S-500-Num, S-500-Cat, S-500-Mix or CSV files (with --target)"
    )
    p.add_argument("--target", help="target column of CSV datasets")
    p.add_argument(
        "--categorical",
        type=listed(name, "column names"),
        help="categorical columns of CSV datasets, comma-separated",
    )
    p.add_argument(
        "--sites",
        type=listed(integer(2), "numbers of sites"),
        default=",".join(map(str, PAPER_SITES)),
        help="numbers of sites, each >= 2 (default 2,3,4,6)",
    )
    p.add_argument(
        "--jaccards",
        type=listed(number(0, 1, low_open=True), "overlaps"),
        default=",".join(map(str, PAPER_JACCARDS)),
        help="target pairwise Jaccard overlaps, each in (0, 1] (default 0.2,...,0.9)",
    )
    p.add_argument("--reps", type=integer(1), default=100, help="repetitions per scenario")
    p.add_argument(
        "--methods",
        type=listed(choice(ALL_METHODS), "methods"),
        default=",".join(METHODS),
        help="methods to score (default: the paper's nine; also node, wmp, auto)",
    )
    p.add_argument(
        "--validation-fraction",
        type=number(0, 0.65, low_open=True),
        default=VALIDATION_FRACTION,
        help="share of each site's rows held out for validation when wmp or auto is scored "
        f"(default {VALIDATION_FRACTION})",
    )
    p.add_argument("--metrics", type=listed(choice(METRICS), "metrics"), default="auprc,auc,mcc")
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
