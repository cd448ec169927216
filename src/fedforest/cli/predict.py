"""``fedforest predict``: a saved pooled model applied to new rows at a site."""

from __future__ import annotations

import argparse
import sys

from ..model.payload_checks import MAX_SEED
from ..vocabulary import STRATEGIES
from .options import columns_text, integer, number, read_csv, rename_pairs


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


def _choice(args: argparse.Namespace, deployed, model_path):
    """The strategy, calibrator and site to predict with; says which on standard error.

    By default, what the job chose for the site that saved the model (its
    ``deployment``); ``--strategy`` overrides it, and then the probabilities
    are not calibrated unless it names the deployed strategy itself.
    """
    site = args.site
    if deployed is None:
        strategy = args.strategy or "mp"
        if args.strategy is None:
            print(
                f"{model_path} records no strategy chosen by a job (a job saves one when its "
                "evaluation.strategies include auto): using mp, uncalibrated",
                file=sys.stderr,
            )
        return strategy, None, site
    if site is not None and site != deployed["site"]:
        raise ValueError(
            f"--site {site!r}: {model_path} was saved by site {deployed['site']!r}, and its "
            "strategy and calibrator were chosen on that site's rows; leave --site out"
        )
    site = deployed["site"]
    calibrator = deployed["calibrator"]  # None for regression trees (a number is not calibrated)
    if args.strategy is None or args.strategy == deployed["strategy"]:
        strategy = deployed["strategy"]
        how = "" if calibrator is None else f", calibration {calibrator.method}"
        print(f"strategy {strategy}{how}: chosen by the job for site {site}", file=sys.stderr)
        return strategy, calibrator, site
    print(
        f"strategy {args.strategy} (--strategy), uncalibrated: the job chose "
        f"{deployed['strategy']} for site {site}, and its calibrator belongs to that strategy",
        file=sys.stderr,
    )
    return args.strategy, None, site


def _predict(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pandas as pd

    from ..model.model_files import load_model
    from ..outputs import check_file, write_file
    from ..prediction.classifier import PooledForestClassifier
    from ..prediction.regressor import PooledForestRegressor
    from ..vocabulary import TREE_SELECTION

    if args.out:  # before any work: never an input, never an existing file unless --overwrite
        check_file(args.out, "--out", overwrite=args.overwrite, inputs=[args.data, args.model])
    model_path = Path(args.model)
    if not model_path.is_file():
        raise FileNotFoundError(f"--model: no such model file: {model_path}")
    model = load_model(model_path)
    frame = read_csv(args.data, "--data")
    renames = args.rename or {}
    absent = [c for c in renames if c not in frame.columns]
    if absent:
        raise ValueError(
            f"--rename: {', '.join(map(repr, absent))} is not a column of {args.data}; columns: "
            + columns_text(frame)
        )
    clash = [t for t in renames.values() if t in frame.columns and t not in renames]
    if clash:
        raise ValueError(
            f"--rename: {args.data} already has a column {', '.join(map(repr, clash))}; "
            "renaming another column to it would give two columns of that name"
        )
    frame = frame.rename(columns=renames)
    forest = model["forest"]
    deployed = model["deployment"]
    strategy, calibrator, site = _choice(args, deployed, model_path)
    args.site = site
    if strategy == "intersection" and model["intersection"] is None:
        raise ValueError(
            f"--strategy intersection: {model_path} has no intersection forest (no site shared "
            "one); choose another strategy"
        )
    if strategy in TREE_SELECTION and args.site not in forest.owners:
        given = (
            f"--site {args.site!r} trained no tree of this model" if args.site else "needs --site"
        )
        raise ValueError(
            f"--strategy {strategy} {given}; the model's sites: {', '.join(forest.owners)}"
        )
    known = set(forest.feature_names)
    if model["intersection"] is not None:
        known |= set(model["intersection"].feature_names)
    drop = [c for c in frame.columns if c not in known]
    _refuse_near_misses(drop, known - set(frame.columns), args.data)
    if drop:
        print(
            f"ignoring columns the model does not use: {', '.join(map(str, drop))}", file=sys.stderr
        )
    X = frame.drop(columns=drop)
    # raw CSV values of categorical columns are levels (e.g. stage 1, 2, 3), never codes
    from ..columns import as_level_strings

    for col in X.columns:
        if col in forest.categories:
            X[col] = as_level_strings(X[col])
    settings = model["settings"]
    if strategy == "wmp":
        if deployed is not None and deployed["strategy"] == "wmp" and args.guess_weight is None:
            guess_weight = deployed["guess_weight"]
        else:
            guess_weight = _guess_weight(args, model_path)
    else:
        guess_weight = "auto"
    common = dict(
        strategy=strategy,
        guess_weight=guess_weight,
        imputers=model["imputers"],
        feature_std=model["feature_std"],
        depth_threshold=settings.get("depth_threshold", 2),
        site=args.site,
        random_state=args.seed if args.seed is not None else settings.get("seed"),
        owner_weights=settings.get("owner_weights"),
        intersection=model["intersection"],
    )
    if forest.is_regression:  # the task comes with the model: one column, the number
        clf = PooledForestRegressor(forest, **common)
        out = pd.DataFrame({"prediction": clf.predict(X)}, index=frame.index)
    else:
        clf = PooledForestClassifier(forest, voting=settings.get("voting", "soft"), **common)
        proba = clf.predict_proba(X)
        if calibrator is not None:
            proba = calibrator.transform(proba)
        out = pd.DataFrame(proba, columns=[f"p_{c}" for c in clf.classes_], index=frame.index)
        out.insert(0, "prediction", clf.classes_[proba.argmax(axis=1)])
    if args.out:
        check_file(args.out, "--out", overwrite=args.overwrite, inputs=[args.data, args.model])
        write_file(args.out, lambda handle: out.to_csv(handle, index=False))
        print(
            f"{len(out)} predictions written to {args.out} (strategy {strategy}; "
            f"{clf.diagnostics_.n_fallback} rows fell back to mp)"
        )
    else:
        out.to_csv(sys.stdout, index=False)
    return 0


def add_parser(sub) -> None:
    """Add ``predict`` to the subcommands ``sub``."""
    p = sub.add_parser("predict", help="apply a saved pooled model to new rows at a site")
    p.add_argument("--model", required=True, help="pooled_model.npz saved by a job")
    p.add_argument("--data", required=True, help="CSV with the site's columns")
    p.add_argument(
        "--strategy",
        choices=(*STRATEGIES, "intersection"),
        help="override the strategy (default: the one the job chose for the site that saved "
        "--model, with its calibrator; mp for a model that records none)",
    )
    p.add_argument(
        "--site",
        help="this site's name (park, local; default: the site that saved --model)",
    )
    p.add_argument(
        "--guess-weight",
        type=number(0, 1),
        help="wmp's guess weight (default: this site's fitted weight, from the job's "
        "metrics.json beside --model)",
    )
    p.add_argument(
        "--rename", type=rename_pairs, help="local=global column renames, comma-separated"
    )
    p.add_argument(
        "--seed", type=integer(0, MAX_SEED), help="seed of pr / ipr (default: the job's)"
    )
    p.add_argument("--out", help="write predictions here instead of standard output")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=_predict)


def _refuse_near_misses(ignored, absent, data) -> None:
    """Refuse a column that would be ignored while its name differs from an absent feature
    of the model only by case or surrounding spaces: the feature would silently be treated
    as missing on every row."""
    wanted = {str(name).strip().casefold(): name for name in absent}
    for column in ignored:
        feature = wanted.get(str(column).strip().casefold())
        if feature is not None:
            raise ValueError(
                f"--data {data}: column {column!r} is not the model's feature {feature!r} (names "
                "must match exactly, or the feature is missing on every row); allowed: the "
                f"model's names: rename it in the file or with --rename '{column}={feature}'"
            )
