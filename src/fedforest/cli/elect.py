"""``fedforest elect``: a feature election on local CSV files, without FLARE."""

from __future__ import annotations

import argparse

from ..federation.config_tasks import TASK_RULES
from ..model.payload_checks import MAX_SEED
from ..vocabulary import (
    AGGREGATIONS,
    DEFAULT_VALIDATION,
    LOWER_IS_BETTER,
    SELECTORS,
    TASKS,
    VALIDATIONS,
)
from .options import (
    check_output,
    columns_text,
    integer,
    listed,
    name,
    number,
    read_csv,
    selector_list,
    write_output,
)


def _elect(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..columns import look_alike_note
    from ..errors import ConfigError, SchemaError
    from ..federation.offline import run_election
    from ..input_files import refuse_same_tables

    if args.json:  # before any work: never an input, never an existing file
        check_output(args.json, "--json", overwrite=args.overwrite, inputs=args.tables)
    refuse_same_tables(
        [("site table", path) for path in args.tables],
        "give each site's own CSV file once",
    )
    outcome = _outcome_columns(args)
    tables, files = {}, {}
    exempt = [*outcome, *(args.categorical or [])]
    for path in args.tables:
        path = Path(path)
        site = path.stem
        if site in tables:
            raise ValueError(
                f"site tables {files[site]} and {path} both give the site name {site!r} (a "
                "site is named after its file); rename one"
            )
        tables[site] = frame = read_csv(path, "site table", exempt=exempt)
        files[site] = str(path)
        for option, column in outcome.items():
            if column not in frame.columns:
                raise ValueError(
                    f"{option} {column!r} is not a column of {path}"
                    f"{look_alike_note(column, frame.columns)}; columns: "
                    + columns_text(frame)
                    + f"; allowed: the {OUTCOME_NAMES[option]} column, in every file"
                )
        if frame.shape[1] <= len(outcome):
            named = " and ".join(repr(c) for c in outcome.values())
            what = "target" if len(outcome) == 1 else "outcome"
            raise ValueError(
                f"site table {path}: no feature column besides the {what} {named}; "
                f"allowed: a table with the {what} and at least one feature column"
            )
    if len(tables) < 2:
        raise ValueError("an election needs at least two sites' CSV files")
    categorical = args.categorical or []
    for option, names in (("--categorical", categorical), ("--always-keep", args.always_keep)):
        unknown = [c for c in names or [] if not any(c in t.columns for t in tables.values())]
        if unknown:
            every = [c for t in tables.values() for c in t.columns]
            raise ValueError(
                f"{option}: {', '.join(map(repr, unknown))} is not a column of any file"
                f"{look_alike_note(unknown[0], every)}; allowed: columns of at least one file"
            )
    for option, column in outcome.items():
        if column in categorical:
            raise ValueError(
                f"--categorical names the {OUTCOME_NAMES[option]} column {column!r} ({option}); "
                "allowed: feature columns"
            )
    selectors: dict[str, str] | str = args.selector
    if args.selectors:
        names = args.selectors
        if len(names) != len(tables):
            raise ValueError(
                f"--selectors gives {len(names)} selectors for {len(tables)} files; give one per "
                "file, in order"
            )
        selectors = dict(zip(tables, names, strict=True))
    try:
        out = _run(run_election, tables, files, args, selectors, categorical)
    except ConfigError as err:  # one table's, named by its file (or a setting's)
        if not any(path in str(err) for path in files.values()):
            raise
        raise ValueError(f"{err} (for a site table: correct the file named)") from None
    except SchemaError as err:  # the tables together
        named = ", ".join(f"{files[s]} (site {s!r})" for s in files)
        raise ValueError(
            f"site tables {named}: {err} (for site tables: correct the files named)"
        ) from None
    print(format_election(out, args.validation))
    if args.json:
        payload = {
            "election": out.election.to_dict(),
            "tuning": out.tuning.to_dict() if out.tuning else None,
            "metric": out.metric,
            "task": args.task,
            "validation": args.validation,
        }
        text = json.dumps(payload, indent=2) + "\n"
        check_output(args.json, "--json", overwrite=args.overwrite, inputs=args.tables)
        write_output(args.json, "--json", lambda handle: handle.write(text))
        print(f"\nwritten: {args.json}")
    return 0


def _run(run_election, tables, files, args, selectors, categorical):
    return run_election(
        tables,
        files=files,
        target=args.target,
        selectors=selectors,
        categorical=categorical,
        freedom_degree=args.freedom_degree,
        aggregation=args.aggregation,
        always_keep=args.always_keep or [],
        normalization=args.normalization,
        auto_tune=args.auto_tune,
        tuning_rounds=args.tuning_rounds,
        tune_every_feature=args.tune_every_feature,
        tolerance=args.tolerance,
        metric=args.metric,
        random_state=args.seed,
        validation=args.validation,
        task=args.task,
        time=args.time,
        event=args.event,
    )


#: What each outcome option names, in messages.
OUTCOME_NAMES = {"--target": "target", "--time": "follow-up time", "--event": "event"}
#: Per ``--task``: the tuning metrics ``--metric`` may name (a job's ``election.metric``).
TASK_TUNING_METRICS = {task: rules.tuning_metrics for task, rules in TASK_RULES.items()}


def _outcome_columns(args: argparse.Namespace) -> dict[str, str]:
    """The outcome's options and columns for ``--task``: ``--target``, or a survival
    outcome's ``--time`` and ``--event``; the options the task does not take are refused,
    and so is a ``--metric`` of another task."""
    if args.task == "survival":
        if args.target is not None:
            raise ValueError(
                f"--target {args.target!r} with --task survival; allowed: name the outcome with "
                "--time (the follow-up time column) and --event (the 1/0 or true/false event "
                "column), as a survival site's YAML does"
            )
        missing = [o for o in ("--time", "--event") if getattr(args, o[2:]) is None]
        if missing:
            raise ValueError(
                f"--task survival needs {' and '.join(missing)}: the follow-up time column "
                "(--time) and the 1/0 or true/false event column (--event)"
            )
        outcome = {"--time": args.time, "--event": args.event}
        if args.time == args.event:
            raise ValueError(
                f"--time and --event both name {args.time!r}; allowed: two different columns"
            )
    else:
        given = [o for o in ("--time", "--event") if getattr(args, o[2:]) is not None]
        if given:
            raise ValueError(
                f"{' and '.join(given)} with --task {args.task}; allowed: --time and --event "
                "with --task survival only (name this task's outcome with --target)"
            )
        if args.target is None:
            raise ValueError(f"--task {args.task} needs --target: the outcome column")
        outcome = {"--target": args.target}
    allowed = TASK_TUNING_METRICS[args.task]
    if args.metric is not None and args.metric not in allowed:
        raise ValueError(
            f"--metric {args.metric!r} does not score a {args.task} model; allowed for "
            f"--task {args.task}: {', '.join(allowed)}"
        )
    return outcome


#: What each site scored the tuning's masks on, per validation mode.
SCORED_ON = {
    "oob": "each site's training rows out of bag",
    "holdout": "each site's validation rows",
}


def _better(metric: str) -> str:
    """Which way a tuning metric is better, as the tuning reads it."""
    return "lower is better" if metric in LOWER_IS_BETTER else "higher is better"


def format_election(out, validation: str | None = None) -> str:
    """The table of votes and the chosen mask, as text; with ``validation`` (``oob`` or
    ``holdout``) the tuning history says what the sites scored its masks on."""
    e = out.election
    sites = [v.site for v in out.votes]
    chosen = set(e.selected)
    inter = set(e.intersection)
    width = max([len(f) for f in e.features] + [7])
    columns = {s: max(10, len(s)) for s in sites}  # a site's name is never cut
    head = f"{'feature':<{width}}  " + "  ".join(f"{s:>{columns[s]}}" for s in sites)
    head += "      vote  decision"
    lines = [head, "-" * len(head)]
    for f in e.features:
        marks = []
        for s in sites:
            if s not in e.sites_with[f]:
                marks.append(f"{'-':>{columns[s]}}")
            else:
                marks.append(f"{'selected' if s in e.selected_by[f] else 'no':>{columns[s]}}")
        if f in inter:
            decision = "kept (every site that has it)"
        elif f in chosen and f in e.always_keep:
            decision = "kept (always_keep)"
        elif f in chosen and e.freedom_degree is None:
            decision = "kept (every feature)"
        elif f in chosen:
            decision = "kept (vote)"
        else:
            decision = "dropped"
        lines.append(f"{f:<{width}}  " + "  ".join(marks) + f"  {e.votes[f]:8.3f}  {decision}")
    st = e.stats
    kept_at = (
        "with every feature (tuning scored it best)"
        if e.freedom_degree is None
        else f"at freedom degree {e.freedom_degree:.4g}"
    )
    lines += [
        "",
        f"sites: {', '.join(sites)}   '-' = the site does not have the column (abstains)",
        f"intersection {st['intersection']}, union {st['union']}, disputed {st['disputed']}, "
        f"kept {st['kept']} {kept_at} ({e.aggregation} votes, scores normalised over {e.normalization} columns)",
    ]
    if out.tuning is not None:
        scored = f", scored on {SCORED_ON[validation]}" if validation else ""
        score = "score" if out.metric is None else f"{out.metric} ({_better(out.metric)})"
        lines.append(f"tuning history (freedom degree, features kept, {score}{scored}):")
        for h in out.tuning.history:
            note = "  same mask as before" if h.reused else ""
            fd = "every" if h.freedom_degree is None else f"{h.freedom_degree:.4f}"
            lines.append(f"  {fd:>6}  {h.n_features:4d}  {h.score:.4f}{note}")
    lines.append("elected: " + ", ".join(e.selected))
    return "\n".join(lines)


def add_parser(sub) -> None:
    """Add ``elect`` to the subcommands ``sub``."""
    p = sub.add_parser(
        "elect",
        help="run a feature election on local CSV files (one per site), without FLARE",
        description="Run a feature election on local CSV files (one per site; the file name is "
        "the site name) and print the table of votes and the elected features.",
    )
    p.add_argument("tables", nargs="+", help="one CSV file per site")
    p.add_argument(
        "--task",
        default="classification",
        choices=TASKS,
        help="what the sites predict, as a job's job.task (default: classification)",
    )
    p.add_argument("--target", help="the target column (classification, regression)")
    p.add_argument("--time", help="--task survival: the follow-up time column")
    p.add_argument("--event", help="--task survival: the 1/0 or true/false event column")
    p.add_argument(
        "--selector",
        default="random_forest",
        choices=SELECTORS,
        help="local selector of every site (default: random_forest)",
    )
    p.add_argument(
        "--selectors",
        type=selector_list,
        help="one selector per file, comma-separated, in file order",
    )
    p.add_argument(
        "--categorical",
        type=listed(name, "column names"),
        help="integer-coded categorical columns, comma-separated",
    )
    p.add_argument(
        "--freedom-degree",
        type=number(0, 1),
        default=0.5,
        help="0 keeps the intersection, 1 the union (default 0.5)",
    )
    p.add_argument("--aggregation", default="weighted", choices=AGGREGATIONS)
    from ..election.ballot import NORMALIZATIONS

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
        type=listed(name, "feature names"),
        help="features kept regardless of the vote, comma-separated",
    )
    p.add_argument("--auto-tune", action="store_true", help="hill-climb the freedom degree")
    p.add_argument("--tuning-rounds", type=integer(1, 100), default=5)
    p.add_argument(
        "--tune-every-feature",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="tuning also scores the mask of every feature (default: yes)",
    )
    p.add_argument(
        "--tolerance",
        type=number(0),
        default=0.0,
        help="scores within this of the best count as equal (smallest mask wins)",
    )
    p.add_argument(
        "--metric",
        choices=list(dict.fromkeys(m for ms in TASK_TUNING_METRICS.values() for m in ms)),
        help="what the tuning scores each mask by (default: the task's, as in a job: auprc, "
        "rmse, ibs)",
    )
    p.add_argument(
        "--validation",
        default=DEFAULT_VALIDATION,
        choices=VALIDATIONS,
        help="what each site scores the tuning's masks on, as a job's evaluation.validation: "
        "its training rows out of bag (oob, the default: no rows held out) or 20%% of its "
        "rows held out as validation rows (holdout)",
    )
    p.add_argument("--seed", type=integer(0, MAX_SEED), default=0)
    p.add_argument("--json", help="also write the election and tuning history to this file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    p.set_defaults(func=_elect)
