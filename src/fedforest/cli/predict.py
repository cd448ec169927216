"""``fedforest predict``: a saved pooled model applied to new rows at a site."""

from __future__ import annotations

import argparse
import sys

from .. import rules
from ..columns import look_alike_note, spelled
from ..model.payload_checks import MAX_SEED
from .options import (
    check_output,
    columns_text,
    integer,
    listed,
    not_a_file,
    number,
    read_csv,
    rename_pairs,
    write_output,
)
from .predict_report import (
    in_words,
    refuse_gaps,
    refuse_look_alike_columns,
    refuse_near_misses,
    report,
    split_shares,
)

#: Files ``predict`` reads beside the model (``wmp``'s guess weight): inputs, never outputs.
COMPANIONS = ("metrics.json",)


def inputs_of(args: argparse.Namespace) -> list:
    """Every file ``predict`` reads: ``--data``, ``--model`` and the model's companions."""
    from pathlib import Path

    model = Path(args.model)
    return [args.data, model, *(model.parent / name for name in COMPANIONS)]


def _check_outputs(args: argparse.Namespace, only: str | None = None) -> None:
    """``--out`` and ``--report-json`` (or the ``only`` one): never a file ``predict`` reads,
    never each other, never an existing file unless ``--overwrite``."""
    from ..outputs import OutputError, same_file

    inputs = inputs_of(args)
    if args.out and args.report_json and same_file(args.out, args.report_json):
        raise OutputError(
            f"--report-json {args.report_json} is the --out file {args.out}; give two names"
        )
    for option, path in (("--out", args.out), ("--report-json", args.report_json)):
        if path and only in (None, option):
            check_output(path, option, overwrite=args.overwrite, inputs=inputs)


def _guess_weight(args: argparse.Namespace, model_path) -> float:
    """``wmp``'s guess weight: ``--guess-weight``, else the job's, from metrics.json beside the model."""
    if args.guess_weight is not None:
        return args.guess_weight
    import json

    metrics = model_path.parent / COMPANIONS[0]
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
    :class:`~fedforest.model.pooled_model.Deployment`); ``--strategy``
    overrides it, and then the probabilities are not calibrated unless it
    names the deployed strategy itself.
    """
    site = args.site
    if deployed is None or deployed.strategy is None:
        strategy = args.strategy or "mp"
        if args.strategy is None:
            print(
                f"{model_path} records no strategy chosen by a job (a job saves one when its "
                "evaluation.strategies include auto): using mp, uncalibrated",
                file=sys.stderr,
            )
        return strategy, None, site
    if site is not None and site != deployed.site:
        raise ValueError(
            f"--site {site!r}: {model_path} was saved by site {deployed.site!r}, and its "
            "strategy and calibrator were chosen on that site's rows; leave --site out"
        )
    site = deployed.site
    calibrator = deployed.calibrator  # None for regression trees (a number is not calibrated)
    if args.strategy is None or args.strategy == deployed.strategy:
        strategy = deployed.strategy
        how = "" if calibrator is None else f", calibration {calibrator.method}"
        print(f"strategy {strategy}{how}: chosen by the job for site {site}", file=sys.stderr)
        return strategy, calibrator, site
    print(
        f"strategy {args.strategy} (--strategy), uncalibrated: the job chose "
        f"{deployed.strategy} for site {site}, and its calibrator belongs to that strategy",
        file=sys.stderr,
    )
    return args.strategy, None, site


def _unavailable(err, model_path) -> str:
    """A strategy the model cannot run (:class:`~fedforest.errors.StrategyUnavailable`), in
    the words of ``predict``'s options."""
    from ..model.inputs import names_text

    if err.missing == "intersection_forest":
        return (
            f"--strategy {err.strategy}: {model_path} has no intersection forest (no site shared "
            "one); choose another strategy"
        )
    given = f"--site {err.site!r} trained no tree of this model" if err.site else "needs --site"
    return f"--strategy {err.strategy} {given}; the model's sites: {names_text(err.owners)}"


def _predict(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pandas as pd

    from ..errors import StrategyUnavailable
    from ..federation.input_gaps import input_gaps
    from ..federation.model_input import model_input
    from ..model.inputs import names_text
    from ..model.pooled_model import load_model
    from ..prediction.classifier import PooledForestClassifier
    from ..prediction.regressor import PooledForestRegressor

    _check_outputs(args)  # before any work: never an input, never an existing file
    horizons = getattr(args, "times", None)
    model_path = Path(args.model)
    if not model_path.is_file():
        if not model_path.exists() and not model_path.is_symlink():
            raise FileNotFoundError(f"--model: no such model file: {model_path}")
        raise FileNotFoundError(f"--model: {model_path} {not_a_file(model_path)}")
    model = load_model(model_path)
    check_horizons(horizons, model.forest)
    frame = read_csv(args.data, "--data")
    ids = _id_columns(args, frame)
    renames = args.rename or {}
    absent = [c for c in renames if c not in frame.columns]
    if absent:
        raise ValueError(
            f"--rename: {names_text(list(map(spelled, absent)))} is not a column of {args.data}"
            f"{look_alike_note(absent[0], frame.columns)}; columns: " + columns_text(frame)
        )
    forest = model.forest
    deployed = model.deployment
    inputs = None if deployed is None else deployed.inputs
    strategy, calibrator, site = _choice(args, deployed, model_path)
    args.site = site
    try:
        model.check_strategy(strategy, args.site)
    except StrategyUnavailable as err:
        raise ValueError(_unavailable(err, model_path)) from None
    features, categories = model.input_features, model.input_categories
    try:  # the site's own path from its file to the model's input (tables.model_input)
        done = model_input(frame, inputs, features, categories, renames, unseen_missing=True)
    except ValueError as err:
        raise ValueError(f"--data {args.data}: {err}") from err
    local = {g: loc for loc, g in done.renamed.items()}
    ignored = [local.get(c, c) for c in done.ignored]
    read = {local.get(f, f) for f in done.X.columns}
    refuse_look_alike_columns([str(c) for c in frame.columns], read, args.data)
    refuse_near_misses(ignored, list(done.absent), args.data, inputs)
    if done.X.shape[1] == 0:
        expected = [in_words(f, inputs) for f in forest.feature_names]
        raise ValueError(
            f"--data {args.data} has none of the model's features: it has "
            f"{names_text(list(map(str, frame.columns)))}; the model expects some of "
            f"{names_text(expected)} (rename a column with --rename local=global)"
        )
    shares = split_shares(forest)
    gaps = input_gaps(
        str(args.data), done.X, features, categories, done, shares, lambda f: in_words(f, inputs)
    )
    report(args, done, ignored, forest, inputs, renames, gaps)
    if args.report_json:
        _write_report(args, gaps)
    if args.strict:
        refuse_gaps(args, gaps)
    if rules.get(strategy).fitted:
        if deployed is not None and deployed.strategy == strategy and args.guess_weight is None:
            guess_weight = deployed.guess_weight
        else:
            guess_weight = _guess_weight(args, model_path)
    else:
        guess_weight = "auto"
    common = dict(strategy=strategy, guess_weight=guess_weight, site=args.site)
    if args.seed is not None:
        common["random_state"] = args.seed
    X = done.X
    target = None if inputs is None else inputs.local_name(inputs.target)
    predicted = "prediction" if target is None else f"predicted_{target}"
    if forest.is_survival:  # a risk score, and the survival probability at each horizon
        from ..prediction.survival import PooledForestSurvival

        clf = PooledForestSurvival.from_model(model, **common)
        out = survival_columns(clf, X, horizons, frame.index)
    elif forest.is_regression:  # the task comes with the model: one column, the number
        clf = PooledForestRegressor.from_model(model, **common)
        out = pd.DataFrame({predicted: clf.predict(X)}, index=frame.index)
    else:
        clf = PooledForestClassifier.from_model(model, **common)
        proba = clf.predict_proba(X)
        if calibrator is not None:
            proba = calibrator.transform(proba)
        labels = list(clf.classes_) if inputs is None else inputs.local_labels(clf.classes_)
        names = [f"p_{c}" if target is None else f"p_{target}={c}" for c in labels]
        out = pd.DataFrame(proba, columns=names, index=frame.index)
        chosen = pd.Series(labels, dtype=object).to_numpy()[proba.argmax(axis=1)]
        out.insert(0, predicted, chosen if inputs is not None else clf.classes_[proba.argmax(1)])
    if ids is not None:
        clash = [c for c in ids.columns if c in out.columns]
        if clash:
            raise ValueError(
                f"--id {clash[0]!r}: the output already has a column of that name; "
                f"its columns: {names_text(list(out.columns))}"
            )
        out = pd.concat([ids.set_axis(out.index), out], axis=1)
    if args.out:
        _check_outputs(args, "--out")
        write_output(args.out, "--out", lambda handle: out.to_csv(handle, index=False))
        print(
            f"{len(out)} predictions written to {args.out} (strategy {strategy}; "
            f"{clf.diagnostics_.n_fallback} rows fell back to mp)"
        )
    else:
        out.to_csv(sys.stdout, index=False)
    return 0


def check_horizons(horizons, forest) -> None:
    """Refuse ``--times`` for a model without survival trees, and horizons outside the range
    of the survival model's time grid (its curves say nothing before the first grid time
    nor after the last)."""
    if horizons is None:
        return
    if not forest.is_survival:
        raise ValueError(
            f"--times {','.join(f'{t:g}' for t in horizons)}: the model predicts "
            f"{'numbers' if forest.is_regression else 'classes'}, not survival; --times "
            "applies to a survival model (job.task: survival) only"
        )
    lo, hi = float(forest.times[0]), float(forest.times[-1])
    outside = [t for t in horizons if not lo <= t <= hi]
    if outside:
        raise ValueError(
            f"--times {outside[0]:g} is outside the model's time grid [{lo:g}, {hi:g}]; "
            f"allowed: horizons from {lo:g} to {hi:g} (the survival curves are known there "
            "only)"
        )


def survival_columns(clf, X, horizons, index):
    """A survival model's output: ``risk`` (the sum of the cumulative hazard over the grid:
    higher, sooner) and ``survival_at_<t>``, the survival probability at each horizon
    ``t`` (the curve's step at the last grid time <= t)."""
    import numpy as np
    import pandas as pd

    from ..prediction.cache import PredictionMemo

    # with horizons both curves are needed: predicted once, shared by the two calls
    memo = PredictionMemo() if horizons else None
    out = pd.DataFrame({"risk": clf.predict(X, memo=memo)}, index=index)
    if horizons:
        curves = clf.predict_survival_function(X, return_array=True, memo=memo)
        grid = np.asarray(clf.times_)
        for t in horizons:
            step = int(np.searchsorted(grid, t, side="right")) - 1
            out[f"survival_at_{t:g}"] = curves[:, step]
    return out


def _write_report(args: argparse.Namespace, gaps) -> None:
    """``--report-json``: what the model's input lacks, per feature (written before any
    ``--strict`` refusal, so that the refusal's reasons are in it)."""
    import json

    payload = {**gaps.to_dict(), "model": str(args.model), "strict": bool(args.strict)}
    _check_outputs(args, "--report-json")
    text = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    write_output(args.report_json, "--report-json", lambda handle: handle.write(text))
    print(f"input report written to {args.report_json}", file=sys.stderr)


def _id_columns(args: argparse.Namespace, frame):
    """The ``--id`` columns of the file, as text exactly as written there (or ``None``)."""
    if not args.id:
        return None
    unknown = [c for c in args.id if c not in frame.columns]
    if unknown:
        raise ValueError(
            f"--id {spelled(unknown[0])} is not a column of {args.data}"
            f"{look_alike_note(unknown[0], frame.columns)}; its columns: " + columns_text(frame)
        )
    repeated = sorted({c for c in args.id if args.id.count(c) > 1})
    if repeated:
        raise ValueError(f"--id {repeated[0]!r} is given twice; give each column once")
    from ..federation.tables import read_text_columns

    return read_text_columns(args.data, args.id)


def add_parser(sub) -> None:
    """Add ``predict`` to the subcommands ``sub``."""
    p = sub.add_parser("predict", help="apply a saved pooled model to new rows at a site")
    p.add_argument("--model", required=True, help="pooled_model.npz saved by a job")
    p.add_argument("--data", required=True, help="CSV with the site's columns")
    p.add_argument(
        "--strategy",
        choices=rules.deployable(),
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
        "--rename",
        type=rename_pairs,
        help="local=global column renames, comma-separated; they extend the renames the model "
        "records for its site, and win over them for the same local column",
    )
    p.add_argument(
        "--id",
        action="append",
        metavar="COLUMN",
        help="copy this column of --data to the output, first and unchanged (repeatable)",
    )
    p.add_argument(
        "--seed", type=integer(0, MAX_SEED), help="seed of pr / ipr (default: the job's)"
    )
    p.add_argument(
        "--times",
        type=listed(number(0), "time"),
        metavar="T1,T2,...",
        help="a survival model: also write the survival probability at these horizons "
        "(columns survival_at_<t>), within the model's time grid",
    )
    p.add_argument("--out", help="write predictions here instead of standard output")
    p.add_argument(
        "--report-json",
        metavar="PATH",
        help="write what the model's input lacks here (JSON): per feature of the model, the rows "
        "absent, empty, or holding a level the model never saw",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse to predict when a feature of the model is absent, empty or holds a level "
        "the model never saw on some row (default: predict them as missing and say so)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --out or --report-json file (never a file predict reads)",
    )
    p.set_defaults(func=_predict)
