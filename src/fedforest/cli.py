"""The ``fedforest`` command line."""

from __future__ import annotations

import argparse
import logging
import sys

from . import __version__
from .vocabulary import AGGREGATIONS, METRICS, SELECTORS, STRATEGIES, VOTING

STRATEGY_HELP = {
    "fpv": "discard a tree when the row's path meets an unavailable feature",
    "pr": "discard above depth_threshold, else go right with probability N_right/N_node",
    "mi": "compare the best imputer's prediction with the threshold (else pr)",
    "ipr": "go right with probability sigmoid((imputed - threshold) / sigma) (else pr)",
    "mp": "follow both children weighted by the ipr probabilities; never discards",
    "ss": "use the node's surrogate split on a shared feature (else pr)",
    "park": "the site's own trees plus trees using only features the site has",
    "local": "the site's own trees only",
    "auto": "score the strategies on the site's validation rows and use the best",
}


def _strategies(args: argparse.Namespace) -> int:
    for name, text in STRATEGY_HELP.items():
        print(f"{name:6s} {text}")
    return 0


def _csv_list(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _elect(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    import pandas as pd

    from .federation.offline import run_election

    tables = {}
    for path in args.tables:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no such CSV file: {path}")
        site = path.stem
        if site in tables:
            raise ValueError(f"two files give the site name {site!r}; rename one")
        tables[site] = pd.read_csv(path)
    if len(tables) < 2:
        raise ValueError("an election needs at least two sites' CSV files")
    selectors: dict[str, str] | str = args.selector
    if args.selectors:
        names = _csv_list(args.selectors)
        if len(names) != len(tables):
            raise ValueError(
                f"--selectors gives {len(names)} selectors for {len(tables)} files; give one per "
                "file, in order"
            )
        selectors = dict(zip(tables, names, strict=True))
    out = run_election(
        tables,
        target=args.target,
        selectors=selectors,
        categorical=_csv_list(args.categorical),
        freedom_degree=args.freedom_degree,
        aggregation=args.aggregation,
        always_keep=_csv_list(args.always_keep),
        auto_tune=args.auto_tune,
        tuning_rounds=args.tuning_rounds,
        tolerance=args.tolerance,
        metric=args.metric,
        random_state=args.seed,
    )
    print(format_election(out))
    if args.json:
        payload = {
            "election": out.election.to_dict(),
            "tuning": out.tuning.to_dict() if out.tuning else None,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
        print(f"\nwritten: {args.json}")
    return 0


def format_election(out) -> str:
    """The table of votes and the chosen mask, as text."""
    e = out.election
    sites = [v.site for v in out.votes]
    chosen = set(e.selected)
    inter = set(e.intersection)
    width = max([len(f) for f in e.features] + [7])
    head = f"{'feature':<{width}}  " + "  ".join(f"{s[:10]:>10}" for s in sites)
    head += "      vote  decision"
    lines = [head, "-" * len(head)]
    for f in e.features:
        marks = []
        for s in sites:
            if s not in e.sites_with[f]:
                marks.append(f"{'-':>10}")
            else:
                marks.append(f"{'selected' if s in e.selected_by[f] else 'no':>10}")
        if f in inter:
            decision = "kept (every site that has it)"
        elif f in chosen and f in e.always_keep:
            decision = "kept (always_keep)"
        elif f in chosen:
            decision = "kept (vote)"
        else:
            decision = "dropped"
        lines.append(f"{f:<{width}}  " + "  ".join(marks) + f"  {e.votes[f]:8.3f}  {decision}")
    st = e.stats
    lines += [
        "",
        f"sites: {', '.join(sites)}   '-' = the site does not have the column (abstains)",
        f"intersection {st['intersection']}, union {st['union']}, disputed {st['disputed']}, "
        f"kept {st['kept']} at freedom degree {e.freedom_degree:.4g} ({e.aggregation} votes)",
    ]
    if out.tuning is not None:
        lines.append("tuning history (freedom degree, features kept, score):")
        for h in out.tuning.history:
            note = "  same mask as before" if h.reused else ""
            lines.append(f"  {h.freedom_degree:.4f}  {h.n_features:4d}  {h.score:.4f}{note}")
    lines.append("elected: " + ", ".join(e.selected))
    return "\n".join(lines)


def _job_build(args: argparse.Namespace) -> int:
    from .flare.job import build_job

    folder = build_job(args.config, args.out)
    print(f"job written to {folder}")
    return 0


def _job_sites(job_dir) -> list[str]:
    """The site names of a built job folder (from its meta.json)."""
    import json
    from pathlib import Path

    meta_path = Path(job_dir) / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(
            f"{job_dir} is not a FLARE job folder (no meta.json); build it "
            "with `fedforest job build`"
        )
    meta = json.loads(meta_path.read_text())
    return sorted(s for targets in meta["deploy_map"].values() for s in targets if s != "server")


def _job_simulate(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from .flare.job import load_configs, simulate

    job_dir = Path(args.job)
    sites = _job_sites(job_dir)
    if args.config:
        load_configs(args.config)  # the configs the job came from must still be valid
    workspace = Path(args.workspace)
    log = workspace.with_suffix(".log")
    workspace.parent.mkdir(parents=True, exist_ok=True)
    if workspace.exists() and (workspace / "server").is_dir():
        import shutil

        shutil.rmtree(workspace)  # a previous simulator run: start clean
    print(f"running the simulator with {len(sites)} sites (log: {log}) ...", flush=True)
    run_dir = simulate(job_dir, workspace, sites, log_file=log)
    results_path = run_dir / "results.json"
    if not results_path.is_file():
        raise RuntimeError(f"the job wrote no results; see {log} and {workspace}/*/log.txt")
    results = json.loads(results_path.read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {results_path}")
    print(f"site models: {workspace}/<site>/simulate_job/pooled_model.npz")
    return 0 if results.get("status") == "finished" else 1


def _job_poc(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from .flare.poc import run_poc

    job_dir = Path(args.job)
    sites = _job_sites(job_dir)
    print(
        f"POC: preparing {len(sites)} sites in {args.workspace}, starting them, submitting "
        f"{job_dir} ...",
        flush=True,
    )
    run_dir = run_poc(job_dir, sites, args.workspace, args.out, timeout=args.timeout)
    results = json.loads((run_dir / "results.json").read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {run_dir / 'results.json'}")
    return 0 if results.get("status") == "finished" else 1


def format_results(results: dict) -> str:
    """Per-site, per-strategy table of a job's results."""
    lines = [f"job {results['job']}: {results['status']}"]
    if results.get("error"):
        lines.append(f"error: {results['error']}")
    for site, why in (results.get("dropped_sites") or {}).items():
        lines.append(f"dropped {site}: {why}")
    metrics = results.get("metrics") or {}
    sites = sorted(metrics)
    if sites:
        lines.append("")
        lines.append("AUPRC on each site's test rows")
        lines.append(f"{'strategy':<14}" + "".join(f"{s:>10}" for s in sites) + f"{'mean':>10}")
        for strategy in results.get("strategies", []):
            vals = [metrics[s].get(strategy, {}).get("auprc") for s in sites]
            shown = "".join(f"{v:>10.3f}" if v is not None else f"{'-':>10}" for v in vals)
            got = [v for v in vals if v is not None]
            mean = f"{sum(got) / len(got):>10.3f}" if got else f"{'-':>10}"
            lines.append(f"{strategy:<14}{shown}{mean}")
    timings = results.get("phase_seconds") or {}
    if timings:
        lines.append("phase seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    return "\n".join(lines)


def _predict(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pandas as pd

    from .model.model_files import load_model
    from .prediction.classifier import PooledForestClassifier

    model = load_model(args.model)
    path = Path(args.data)
    if not path.is_file():
        raise FileNotFoundError(f"no such CSV file: {path}")
    frame = pd.read_csv(path)
    renames = dict(pair.split("=", 1) for pair in _csv_list(args.rename))
    frame = frame.rename(columns=renames)
    forest = model["forest"]
    drop = [c for c in frame.columns if c not in forest.feature_names]
    if drop:
        print(
            f"ignoring columns the model does not use: {', '.join(map(str, drop))}", file=sys.stderr
        )
    X = frame.drop(columns=drop)
    # raw CSV values of categorical columns are levels (e.g. stage 1, 2, 3), never codes
    from .federation.schema import as_level_strings

    for col in X.columns:
        if col in forest.categories:
            X[col] = as_level_strings(X[col])
    settings = model["settings"]
    clf = PooledForestClassifier(
        forest,
        strategy=args.strategy,
        imputers=model["imputers"],
        feature_std=model["feature_std"],
        depth_threshold=settings.get("depth_threshold", 2),
        voting=settings.get("voting", "soft"),
        site=args.site,
        random_state=args.seed if args.seed is not None else settings.get("seed"),
    )
    proba = clf.predict_proba(X)
    out = pd.DataFrame(proba, columns=[f"p_{c}" for c in clf.classes_], index=frame.index)
    out.insert(0, "prediction", clf.classes_[proba.argmax(axis=1)])
    if args.out:
        out.to_csv(args.out, index=False)
        print(
            f"{len(out)} predictions written to {args.out} (strategy {args.strategy}; "
            f"{clf.diagnostics_.n_fallback} rows fell back to mp)"
        )
    else:
        out.to_csv(sys.stdout, index=False)
    return 0


def _floats(text: str) -> list[float]:
    return [float(t) for t in _csv_list(text)]


def _ints(text: str) -> list[int]:
    return [int(t) for t in _csv_list(text)]


def _experiment(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .experiments.reports import summary_tables, write_report
    from .experiments.runner import ExperimentPlan, run_experiment

    plan = ExperimentPlan(
        datasets=list(args.datasets),
        n_sites=_ints(args.sites),
        jaccards=_floats(args.jaccards),
        reps=args.reps,
        methods=_csv_list(args.methods),
        metrics=_csv_list(args.metrics),
        voting=args.voting,
        n_estimators=args.trees,
        depth_threshold=args.depth_threshold,
        target=args.target,
        categorical=_csv_list(args.categorical),
        n_jobs=args.n_jobs,
    )
    out = Path(args.out)
    # progress lines (one per finished scenario) show even without --verbose
    logging.getLogger("fedforest.experiments.runner").setLevel(logging.INFO)
    logging.getLogger("fedforest.experiments.reports").setLevel(logging.INFO)
    tidy = run_experiment(plan, out)
    print(f"results: {out / 'results.csv'} ({len(tidy)} rows)")
    metric = plan.metrics[0]
    for dataset, table in summary_tables(tidy, metric=metric).items():
        print(f"\nmean {metric} ({dataset}):")
        print(table.round(3).to_string())
    if not args.no_report:
        print(f"\nreport: {write_report(tidy, out, metrics=tuple(plan.metrics))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedforest",
        description="Federated random forests across sites with different columns.",
    )
    parser.add_argument("--version", action="version", version=f"fedforest {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("strategies", help="list the missing-split strategies")
    p.set_defaults(func=_strategies)

    p = sub.add_parser(
        "elect",
        help="run a feature election on local CSV files (one per site), without FLARE",
        description="Run a feature election on local CSV files (one per site; the file name is "
        "the site name) and print the table of votes and the elected features.",
    )
    p.add_argument("tables", nargs="+", help="one CSV file per site")
    p.add_argument("--target", required=True, help="the target column")
    p.add_argument(
        "--selector",
        default="random_forest",
        choices=SELECTORS,
        help="local selector of every site (default: random_forest)",
    )
    p.add_argument("--selectors", help="one selector per file, comma-separated, in file order")
    p.add_argument("--categorical", help="integer-coded categorical columns, comma-separated")
    p.add_argument(
        "--freedom-degree",
        type=float,
        default=0.5,
        help="0 keeps the intersection, 1 the union (default 0.5)",
    )
    p.add_argument("--aggregation", default="weighted", choices=AGGREGATIONS)
    p.add_argument("--always-keep", help="features kept regardless of the vote, comma-separated")
    p.add_argument("--auto-tune", action="store_true", help="hill-climb the freedom degree")
    p.add_argument("--tuning-rounds", type=int, default=5)
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="scores within this of the best count as equal (smallest mask wins)",
    )
    p.add_argument("--metric", default="auprc", choices=METRICS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the election and tuning history to this file")
    p.set_defaults(func=_elect)

    job = sub.add_parser("job", help="build or simulate the FLARE job")
    job_sub = job.add_subparsers(dest="job_command", metavar="JOB_COMMAND")
    p = job_sub.add_parser("build", help="validate site_configs/ and write the FLARE job")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument("--out", default="jobs", help="folder to write the job into")
    p.set_defaults(func=_job_build)
    p = job_sub.add_parser("simulate", help="run a built job in the NVIDIA FLARE simulator")
    p.add_argument("job", help="the job folder (e.g. jobs/fedforest-demo)")
    p.add_argument("--workspace", default="workspaces/simulator", help="simulator workspace")
    p.add_argument("--config", help="check that these configs are still valid first")
    p.set_defaults(func=_job_simulate)

    p = job_sub.add_parser("poc", help="run a built job in POC mode (separate processes)")
    p.add_argument("job", help="the job folder (e.g. jobs/fedforest-demo)")
    p.add_argument("--workspace", default="/tmp/fedforest-poc", help="POC workspace")
    p.add_argument("--out", default="workspaces/poc", help="where the results are downloaded")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for the job")
    p.set_defaults(func=_job_poc)

    from .experiments.runner import METHODS, PAPER_JACCARDS, PAPER_SITES

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
    p.add_argument("--categorical", help="categorical columns of CSV datasets, comma-separated")
    p.add_argument(
        "--sites",
        default=",".join(map(str, PAPER_SITES)),
        help="numbers of sites (default 2,3,4,6)",
    )
    p.add_argument(
        "--jaccards",
        default=",".join(map(str, PAPER_JACCARDS)),
        help="target pairwise Jaccard overlaps (default 0.2,...,0.9)",
    )
    p.add_argument("--reps", type=int, default=100, help="repetitions per scenario")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--metrics", default="auprc,auc,mcc")
    p.add_argument(
        "--voting",
        default="soft",
        choices=VOTING,
        help="hard reproduces the paper's reference code",
    )
    p.add_argument("--trees", type=int, default=100, help="trees per site")
    p.add_argument("--depth-threshold", type=int, default=2)
    p.add_argument("--n-jobs", type=int, default=1, help="parallel processes")
    p.add_argument("--out", default="experiments/run", help="output folder")
    p.add_argument("--no-report", action="store_true", help="skip plots and report.md")
    p.set_defaults(func=_experiment)

    p = sub.add_parser("predict", help="apply a saved pooled model to new rows at a site")
    p.add_argument("--model", required=True, help="pooled_model.npz saved by a job")
    p.add_argument("--data", required=True, help="CSV with the site's columns")
    p.add_argument("--strategy", default="mp", choices=STRATEGIES)
    p.add_argument("--site", help="this site's name (park, local)")
    p.add_argument("--rename", help="local=global column renames, comma-separated")
    p.add_argument("--seed", type=int, help="seed of pr / ipr (default: the job's)")
    p.add_argument("--out", help="write predictions here instead of standard output")
    p.set_defaults(func=_predict)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, KeyError, RuntimeError) as err:
        print(f"fedforest: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
