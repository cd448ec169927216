"""``fedforest elect``: a feature election on local CSV files, without FLARE."""

from __future__ import annotations

import argparse

from ..model.payload_checks import MAX_SEED
from ..vocabulary import (
    AGGREGATIONS,
    DEFAULT_VALIDATION,
    RANKING_METRICS,
    SELECTORS,
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
    tables, files = {}, {}
    exempt = [args.target, *(args.categorical or [])]
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
        if args.target not in frame.columns:
            raise ValueError(
                f"--target {args.target!r} is not a column of {path}"
                f"{look_alike_note(args.target, frame.columns)}; columns: "
                + columns_text(frame)
                + "; allowed: the target column, in every file"
            )
        if frame.shape[1] < 2:
            raise ValueError(
                f"site table {path}: no feature column besides the target {args.target!r}; "
                "allowed: a table with the target and at least one feature column"
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
        tolerance=args.tolerance,
        metric=args.metric,
        random_state=args.seed,
        validation=args.validation,
    )


#: What each site scored the tuning's masks on, per validation mode.
SCORED_ON = {
    "oob": "each site's training rows out of bag",
    "holdout": "each site's validation rows",
}


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
        scored = f", scored on {SCORED_ON[validation]}" if validation else ""
        lines.append(f"tuning history (freedom degree, features kept, score{scored}):")
        for h in out.tuning.history:
            note = "  same mask as before" if h.reused else ""
            lines.append(f"  {h.freedom_degree:.4f}  {h.n_features:4d}  {h.score:.4f}{note}")
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
    p.add_argument("--target", required=True, help="the target column")
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
        "--tolerance",
        type=number(0),
        default=0.0,
        help="scores within this of the best count as equal (smallest mask wins)",
    )
    p.add_argument("--metric", default="auprc", choices=RANKING_METRICS)
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
