"""The ``fedforest`` command line."""

from __future__ import annotations

import argparse
import logging
import math
import sys

from . import __version__
from .model.payload_checks import MAX_SEED
from .vocabulary import AGGREGATIONS, METRICS, SELECTORS, STRATEGIES, VOTING

#: As the job's ``forest.n_estimators`` (``federation/config.py``).
MAX_TREES = 10_000

STRATEGY_HELP = {
    "fpv": "discard a tree when the row's path meets an unavailable feature",
    "pr": "discard above depth_threshold, else go right with probability N_right/N_node",
    "mi": "compare the best imputer's prediction with the threshold (else pr)",
    "ipr": "go right with probability sigmoid((imputed - threshold) / sigma) (else pr)",
    "mp": "follow both children weighted by the ipr probabilities; never discards",
    "ss": "use the node's surrogate split on a shared feature (else pr)",
    "node": "stop at the node: its own class distribution is the tree's prediction",
    "wmp": "mp, a tree that guesses weighted less (weight fitted on validation rows)",
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


# Option values are checked in two places, the same way for every subcommand:
# a value that is wrong by itself (not a number, out of range, not a choice) is
# refused by its argparse ``type`` (a usage error, exit status 2, naming the
# option); a value that is wrong for the files given (a column the data lacks,
# an unreadable CSV, an output that would overwrite something) is refused by
# the command with ``fedforest: error: ...`` (exit status 1).


def _integer(low: int, high: int | None = None):
    """An argparse type: an integer in [low, high]."""
    allowed = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer; allowed: {allowed}"
            ) from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is out of range; allowed: {allowed}")
        return value

    return parse


def _number(low: float, high: float | None = None, low_open: bool = False):
    """An argparse type: a finite number in [low, high] (or (low, high] with ``low_open``)."""
    left = "(" if low_open else "["
    allowed = (
        f"a number in {left}{low:g}, {high:g}]"
        if high is not None
        else (f"a number {'>' if low_open else '>='} {low:g}")
    )

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a number; allowed: {allowed}"
            ) from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; allowed: {allowed}")
        if value < low or (low_open and value == low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} is out of range; allowed: {allowed}")
        return value

    return parse


def _listed(item, what: str):
    """An argparse type: a comma-separated list of distinct items, each parsed by ``item``."""

    def parse(text: str) -> list:
        parts = _csv_list(text)
        if not parts:
            raise argparse.ArgumentTypeError(f"{text!r} holds no {what}; give at least one")
        values = []
        for part in parts:
            try:
                values.append(item(part))
            except argparse.ArgumentTypeError as err:
                raise argparse.ArgumentTypeError(f"in {text!r}: {err}") from None
        repeated = sorted({str(v) for v in values if values.count(v) > 1})
        if repeated:
            raise argparse.ArgumentTypeError(f"{text!r} repeats {', '.join(repeated)}")
        return values

    return parse


def _choice(allowed):
    def parse(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not allowed; allowed: {', '.join(allowed)}"
            )
        return text

    return parse


def _name(text: str) -> str:
    return text


def _selectors(text: str) -> list[str]:
    """An argparse type: selectors, comma-separated (may repeat: one per file)."""
    names = _csv_list(text)
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} holds no selector")
    for name in names:
        _choice(SELECTORS)(name)
    return names


def _renames(text: str) -> dict[str, str]:
    """An argparse type: ``local=global`` pairs, comma-separated."""
    pairs = {}
    for pair in _csv_list(text):
        local, sep, target = (p.strip() for p in pair.partition("="))
        if not sep or not local or not target:
            raise argparse.ArgumentTypeError(
                f"{pair!r} is not local=global (a column name on each side of '=')"
            )
        if local in pairs:
            raise argparse.ArgumentTypeError(f"column {local!r} is renamed twice")
        pairs[local] = target
    if not pairs:
        raise argparse.ArgumentTypeError(f"{text!r} holds no local=global pair")
    targets = list(pairs.values())
    repeated = sorted({t for t in targets if targets.count(t) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(
            f"several columns are renamed to {', '.join(map(repr, repeated))}; "
            "each global name may be given once"
        )
    return pairs


def _read_csv(path, option: str):
    """Read a CSV named by ``option``; refuse a missing, unreadable or empty file by name."""
    from pathlib import Path

    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{option}: no such CSV file: {path}")
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as err:  # pandas' parser errors are ValueErrors
        raise ValueError(f"{option}: cannot read {path} as a CSV file: {err}") from err
    if frame.empty:
        raise ValueError(f"{option}: {path} has no data rows")
    return frame


def _columns_text(frame) -> str:
    return ", ".join(map(str, frame.columns))


def _elect(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from .federation.offline import run_election
    from .outputs import check_file

    if args.json:
        check_file(args.json, "--json", overwrite=args.overwrite, inputs=args.tables)
    tables = {}
    for path in args.tables:
        path = Path(path)
        site = path.stem
        if site in tables:
            raise ValueError(f"two files give the site name {site!r}; rename one")
        tables[site] = frame = _read_csv(path, "site table")
        if args.target not in frame.columns:
            raise ValueError(
                f"--target {args.target!r} is not a column of {path}; columns: "
                + _columns_text(frame)
            )
    if len(tables) < 2:
        raise ValueError("an election needs at least two sites' CSV files")
    categorical = args.categorical or []
    for option, names in (("--categorical", categorical), ("--always-keep", args.always_keep)):
        unknown = [c for c in names or [] if not any(c in t.columns for t in tables.values())]
        if unknown:
            raise ValueError(
                f"{option}: {', '.join(map(repr, unknown))} is not a column of any file"
            )
    if args.target in categorical:
        raise ValueError(f"--categorical names the target {args.target!r}")
    selectors: dict[str, str] | str = args.selector
    if args.selectors:
        names = args.selectors
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
        categorical=categorical,
        freedom_degree=args.freedom_degree,
        aggregation=args.aggregation,
        always_keep=args.always_keep or [],
        normalization=args.normalization,
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
        check_file(args.json, "--json", overwrite=args.overwrite, inputs=args.tables)
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
        f"kept {st['kept']} at freedom degree {e.freedom_degree:.4g} ({e.aggregation} votes, scores normalised over {e.normalization} columns)",
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

    folder = build_job(
        args.config, args.out, ship_code=not args.no_custom, data_checks=not args.skip_data_checks
    )
    print(f"job written to {folder}")
    if args.no_custom:
        print(
            "no code in custom/: every site needs fedforest installed and its classes "
            "allow-listed (see the README, Deploying to hospitals)"
        )
    return 0


def _recipe(args: argparse.Namespace):
    """The recipe of ``args.job`` (a built job folder) or else of ``args.config``."""
    from .flare.recipe import FedForestRecipe

    if args.job:
        return FedForestRecipe.from_job_folder(args.job)
    return FedForestRecipe(args.config)


def _job_simulate(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from .flare.environments import simulate
    from .flare.job import check_workspace

    workspace = Path(args.workspace)
    log = workspace.with_suffix(".log")
    if args.job and Path(args.job).resolve().is_relative_to(workspace.resolve()):
        raise ValueError(
            f"the job {args.job} is inside the workspace {workspace}, which the simulator clears"
        )
    # a folder that is not a previous simulator workspace is refused, never deleted
    check_workspace(workspace, log)
    recipe = _recipe(args)
    print(
        f"running the job in NVIDIA FLARE's SimEnv with {len(recipe.sites)} sites (log: {log}) ...",
        flush=True,
    )
    run_dir = simulate(recipe, workspace, log_file=log)
    results_path = run_dir / "results.json"
    if not results_path.is_file():
        raise RuntimeError(f"the job wrote no results; see {log} and {workspace}/*/*/log.txt")
    results = json.loads(results_path.read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {results_path}")
    print(f"site models: {run_dir.parent.parent}/<site>/simulate_job/pooled_model.npz")
    return 0 if results.get("status") == "finished" else 1


def _job_poc(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from .flare.environments import run_poc

    workspace, out = Path(args.workspace), Path(args.out)
    if args.job:
        for folder in (workspace, out):
            if Path(args.job).resolve().is_relative_to(folder.resolve()):
                raise ValueError(
                    f"the job {args.job} is inside {folder}, which this command clears"
                )
    recipe = _recipe(args)
    print(
        f"running the job in NVIDIA FLARE's PocEnv: {len(recipe.sites)} sites and a server as "
        f"separate processes (POC workspace {workspace}) ...",
        flush=True,
    )
    run_dir = run_poc(recipe, workspace, out, timeout=args.timeout)
    results = json.loads((run_dir / "results.json").read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {run_dir / 'results.json'}")
    return 0 if results.get("status") == "finished" else 1


def _job_prod(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from .flare.environments import run_prod
    from .flare.recipe import FedForestRecipe

    out = Path(args.out)
    if args.job and Path(args.job).resolve().is_relative_to(out.resolve()):
        raise ValueError(f"the job {args.job} is inside {out}, which this command clears")
    ship_code = not args.no_custom
    if args.job:
        recipe = FedForestRecipe.from_job_folder(args.job, ship_code=ship_code)
    else:
        recipe = FedForestRecipe(
            args.config, ship_code=ship_code, data_checks=not args.skip_data_checks
        )
    print(
        f"submitting the job to the deployment of {args.startup_kit} (NVIDIA FLARE ProdEnv, "
        f"{len(recipe.sites)} sites) ...",
        flush=True,
    )
    run_dir = run_prod(recipe, args.startup_kit, out, args.username, args.timeout)
    results = json.loads((run_dir / "results.json").read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {run_dir / 'results.json'}")
    print("site models: <site kit>/<job id>/pooled_model.npz at each site")
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


def _guess_weight(args: argparse.Namespace, model_path) -> float:
    """``wmp``'s guess weight: ``--guess-weight``, else the job's, from metrics.json beside the model."""
    if args.guess_weight is not None:
        return args.guess_weight
    import json

    metrics = model_path.parent / "metrics.json"
    weight = None
    if metrics.is_file():
        try:
            weight = json.loads(metrics.read_text())["strategies"]["wmp"]["guess_weight"]
        except (ValueError, KeyError, TypeError):
            weight = None
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight <= 1:
        raise ValueError(
            f"--strategy wmp needs --guess-weight (a number in [0, 1]): {metrics} does not give "
            "this site's fitted weight (the job saves it when its evaluation.strategies include "
            "wmp); or use --strategy mp"
        )
    print(f"guess weight {weight:g} from {metrics}", file=sys.stderr)
    return float(weight)


def _predict(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pandas as pd

    from .model.model_files import load_model
    from .outputs import check_file
    from .prediction.classifier import PooledForestClassifier
    from .vocabulary import TREE_SELECTION

    if args.out:  # before any work: never an input, never an existing file unless --overwrite
        check_file(args.out, "--out", overwrite=args.overwrite, inputs=[args.data, args.model])
    model_path = Path(args.model)
    if not model_path.is_file():
        raise FileNotFoundError(f"--model: no such model file: {model_path}")
    model = load_model(model_path)
    frame = _read_csv(args.data, "--data")
    renames = args.rename or {}
    absent = [c for c in renames if c not in frame.columns]
    if absent:
        raise ValueError(
            f"--rename: {', '.join(map(repr, absent))} is not a column of {args.data}; columns: "
            + _columns_text(frame)
        )
    clash = [t for t in renames.values() if t in frame.columns and t not in renames]
    if clash:
        raise ValueError(
            f"--rename: {args.data} already has a column {', '.join(map(repr, clash))}; "
            "renaming another column to it would give two columns of that name"
        )
    frame = frame.rename(columns=renames)
    forest = model["forest"]
    if args.strategy in TREE_SELECTION and args.site not in forest.owners:
        given = (
            f"--site {args.site!r} trained no tree of this model" if args.site else "needs --site"
        )
        raise ValueError(
            f"--strategy {args.strategy} {given}; the model's sites: {', '.join(forest.owners)}"
        )
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
    guess_weight = _guess_weight(args, model_path) if args.strategy == "wmp" else "auto"
    clf = PooledForestClassifier(
        forest,
        strategy=args.strategy,
        guess_weight=guess_weight,
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
        check_file(args.out, "--out", overwrite=args.overwrite, inputs=[args.data, args.model])
        out.to_csv(args.out, index=False)
        print(
            f"{len(out)} predictions written to {args.out} (strategy {args.strategy}; "
            f"{clf.diagnostics_.n_fallback} rows fell back to mp)"
        )
    else:
        out.to_csv(sys.stdout, index=False)
    return 0


def _experiment(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .experiments.reports import summary_tables, write_report
    from .experiments.runner import EXPERIMENT_COMMAND, ExperimentPlan, load_table, run_experiment
    from .outputs import record_dir

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
    p.add_argument(
        "--selectors",
        type=_selectors,
        help="one selector per file, comma-separated, in file order",
    )
    p.add_argument(
        "--categorical",
        type=_listed(_name, "column names"),
        help="integer-coded categorical columns, comma-separated",
    )
    p.add_argument(
        "--freedom-degree",
        type=_number(0, 1),
        default=0.5,
        help="0 keeps the intersection, 1 the union (default 0.5)",
    )
    p.add_argument("--aggregation", default="weighted", choices=AGGREGATIONS)
    from .federation.election import NORMALIZATIONS

    p.add_argument(
        "--normalization",
        default="all",
        choices=NORMALIZATIONS,
        help="scale each site's scores over all its columns (all: the Feature Election "
        "paper's rule, default) or over the features it selected (selected: NVIDIA FLARE "
        "2.9's feature_election rule)",
    )
    p.add_argument(
        "--always-keep",
        type=_listed(_name, "feature names"),
        help="features kept regardless of the vote, comma-separated",
    )
    p.add_argument("--auto-tune", action="store_true", help="hill-climb the freedom degree")
    p.add_argument("--tuning-rounds", type=_integer(1, 100), default=5)
    p.add_argument(
        "--tolerance",
        type=_number(0),
        default=0.0,
        help="scores within this of the best count as equal (smallest mask wins)",
    )
    p.add_argument("--metric", default="auprc", choices=METRICS)
    p.add_argument("--seed", type=_integer(0, MAX_SEED), default=0)
    p.add_argument("--json", help="also write the election and tuning history to this file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    p.set_defaults(func=_elect)

    job = sub.add_parser("job", help="build or simulate the FLARE job")
    job_sub = job.add_subparsers(dest="job_command", metavar="JOB_COMMAND")
    p = job_sub.add_parser("build", help="validate site_configs/ and write the FLARE job")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument("--out", default="jobs", help="folder to write the job into")
    p.add_argument(
        "--no-custom",
        action="store_true",
        help="ship no code in the apps' custom/ folders (every site installs fedforest)",
    )
    p.add_argument(
        "--skip-data-checks",
        action="store_true",
        help="do not read the sites' data files here (each site checks its own when it starts)",
    )
    p.set_defaults(func=_job_build)
    p = job_sub.add_parser(
        "simulate", help="run the job in NVIDIA FLARE's simulator (SimEnv), one thread per site"
    )
    p.add_argument("job", nargs="?", help="a built job folder (default: build from --config)")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument("--workspace", default="workspaces/simulator", help="simulator workspace")
    p.set_defaults(func=_job_simulate)

    p = job_sub.add_parser(
        "poc", help="run the job in NVIDIA FLARE's POC mode (PocEnv): separate processes"
    )
    p.add_argument("job", nargs="?", help="a built job folder (default: build from --config)")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument("--workspace", default="/tmp/fedforest-poc", help="POC workspace")
    p.add_argument("--out", default="workspaces/poc", help="where the results are downloaded")
    p.add_argument(
        "--timeout", type=_number(0, low_open=True), default=900, help="seconds to wait for the job"
    )
    p.set_defaults(func=_job_poc)

    p = job_sub.add_parser(
        "prod",
        help="submit the job to a provisioned deployment (ProdEnv) with an admin's startup kit",
    )
    p.add_argument("job", nargs="?", help="a built job folder (default: build from --config)")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument(
        "--startup-kit", required=True, help="the admin's startup kit (made by nvflare provision)"
    )
    p.add_argument("--username", help="the admin's name (default: the kit's)")
    p.add_argument("--out", default="workspaces/prod", help="where the results are downloaded")
    p.add_argument(
        "--no-custom",
        action="store_true",
        help="ship no code in custom/ (every site installs fedforest and allow-lists its classes)",
    )
    p.add_argument(
        "--skip-data-checks",
        action="store_true",
        help="do not read the sites' data files here (each site checks its own when it starts)",
    )
    p.add_argument(
        "--timeout", type=_number(0, low_open=True), default=900, help="seconds to wait for the job"
    )
    p.set_defaults(func=_job_prod)

    from .experiments.runner import (
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
        type=_listed(_name, "column names"),
        help="categorical columns of CSV datasets, comma-separated",
    )
    p.add_argument(
        "--sites",
        type=_listed(_integer(2), "numbers of sites"),
        default=",".join(map(str, PAPER_SITES)),
        help="numbers of sites, each >= 2 (default 2,3,4,6)",
    )
    p.add_argument(
        "--jaccards",
        type=_listed(_number(0, 1, low_open=True), "overlaps"),
        default=",".join(map(str, PAPER_JACCARDS)),
        help="target pairwise Jaccard overlaps, each in (0, 1] (default 0.2,...,0.9)",
    )
    p.add_argument("--reps", type=_integer(1), default=100, help="repetitions per scenario")
    p.add_argument(
        "--methods",
        type=_listed(_choice(ALL_METHODS), "methods"),
        default=",".join(METHODS),
        help="methods to score (default: the paper's nine; also node, wmp, auto)",
    )
    p.add_argument(
        "--validation-fraction",
        type=_number(0, 0.65, low_open=True),
        default=VALIDATION_FRACTION,
        help="share of each site's rows held out for validation when wmp or auto is scored "
        f"(default {VALIDATION_FRACTION})",
    )
    p.add_argument("--metrics", type=_listed(_choice(METRICS), "metrics"), default="auprc,auc,mcc")
    p.add_argument(
        "--voting",
        default="soft",
        choices=VOTING,
        help="hard reproduces the paper's reference code",
    )
    p.add_argument("--trees", type=_integer(1, MAX_TREES), default=100, help="trees per site")
    p.add_argument("--depth-threshold", type=_integer(0), default=2)
    p.add_argument("--n-jobs", type=_integer(1), default=1, help="parallel processes")
    p.add_argument("--out", default="experiments/run", help="output folder")
    p.add_argument("--no-report", action="store_true", help="skip plots and report.md")
    p.set_defaults(func=_experiment)

    p = sub.add_parser("predict", help="apply a saved pooled model to new rows at a site")
    p.add_argument("--model", required=True, help="pooled_model.npz saved by a job")
    p.add_argument("--data", required=True, help="CSV with the site's columns")
    p.add_argument("--strategy", default="mp", choices=STRATEGIES)
    p.add_argument("--site", help="this site's name (park, local)")
    p.add_argument(
        "--guess-weight",
        type=_number(0, 1),
        help="wmp's guess weight (default: this site's fitted weight, from the job's "
        "metrics.json beside --model)",
    )
    p.add_argument("--rename", type=_renames, help="local=global column renames, comma-separated")
    p.add_argument(
        "--seed", type=_integer(0, MAX_SEED), help="seed of pr / ipr (default: the job's)"
    )
    p.add_argument("--out", help="write predictions here instead of standard output")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
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
    except (ValueError, OSError, KeyError, RuntimeError) as err:
        print(f"fedforest: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
