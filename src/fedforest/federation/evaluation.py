"""Scoring the strategies of a pooled model on a site's held-out rows."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from .. import protocol, rules
from ..errors import StrategyUnavailable
from ..intervals import (
    BOOTSTRAP_RESAMPLES,
    INTERVAL_METRICS,
    bootstrap_intervals,
    check_interval,
    event_count,
)
from ..metrics import METRIC_RANGES, N_BINS, calibration_bins, score_all, score_values
from ..model.pooled_model import PooledModel
from ..prediction.cache import PredictionMemo
from ..prediction.classifier import PooledForestClassifier
from ..prediction.out_of_bag import InBag
from ..prediction.regressor import PooledForestRegressor
from ..prediction.selection import default_candidates
from ..prediction.survival import PooledForestSurvival
from ..prediction.weighting import tree_weights
from ..privacy.policy import PrivacyPolicy
from ..validation import PayloadReader, describe
from ..vocabulary import (
    CALIBRATION_METHODS,
    DEFAULT_AUTO_METRIC,
    METRICS,
    REGRESSION_METRICS,
    SURVIVAL_METRICS,
    VALIDATIONS,
)

logger = logging.getLogger(__name__)


def _finite(value) -> float | None:
    return float(value) if np.isfinite(value) else None


#: The longest ``calibration_skipped`` text of a metrics row (a longer one is cut there).
MAX_SKIPPED_TEXT = 1000


def skipped_text(skipped: Mapping[str, str] | None) -> str | None:
    """A row's ``calibration_skipped``: each calibration method the site could not fit and
    why (``isotonic: it needs 10 validation rows of every class; ...``), or None.

    Examples
    --------
    >>> skipped_text({"isotonic": "it needs 10 validation rows of every class"})
    'isotonic: it needs 10 validation rows of every class'
    >>> skipped_text({}) is None
    True
    """
    if not skipped:
        return None
    text = "; ".join(f"{method}: {why}" for method, why in skipped.items())
    return text if len(text) <= MAX_SKIPPED_TEXT else text[: MAX_SKIPPED_TEXT - 1] + "…"


def evaluate_strategies(
    model: PooledModel,
    X_test: pd.DataFrame,
    y_test,
    classes,
    strategies: Sequence[str],
    site: str | None = None,
    voting: str = "soft",
    depth_threshold: int = 2,
    metrics: Sequence[str] = METRICS,
    auto_metric: str = DEFAULT_AUTO_METRIC,
    X_val: pd.DataFrame | None = None,
    y_val=None,
    random_state=0,
    calibration: str = "none",
    models: dict | None = None,
    outcome: str | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    in_bag: InBag | None = None,
    y_train=None,
    horizons: Sequence[float] | None = None,
) -> dict[str, dict]:
    """Score strategies of ``model`` on a site's test rows.

    ``X_test`` holds the site's columns (those neither of the model's forests
    knows are ignored). ``intersection`` scores the model's intersection
    forest; ``auto`` chooses on ``X_val``, ``y_val`` among the strategies that
    fit nothing of their own and the intersection forest. Every strategy
    predicts with the model's forest, imputers, standard deviations,
    intersection forest and pooling weights (``model.settings.owner_weights``)
    and with ``voting``, ``depth_threshold``, ``site`` and ``random_state`` as
    given (:meth:`~fedforest.PooledForestClassifier.from_model`).

    Returns ``{strategy: {metric: value, ..., "rows", "events", "intervals",
    "mean_trees_kept", "fallback_rows", "calibration", "bins"}}``, where
    ``events`` counts the test rows of the outcome
    (:func:`~fedforest.intervals.event_count`; ``None`` for regression),
    ``intervals`` holds the percentile bootstrap 95% interval ``[low, high]``
    of each metric of :data:`~fedforest.intervals.INTERVAL_METRICS` the job
    reports (:func:`~fedforest.intervals.bootstrap_intervals`: ``resamples``
    resamples of the test rows drawn from ``random_state``, the same for every
    strategy; ``resamples=0``: no intervals, ``intervals`` is ``None``),
    ``calibration`` is the method the row's probabilities went through and
    ``bins`` their reliability-diagram bins
    (:func:`~fedforest.metrics.calibration_bins`), with ``outcome`` (the
    target column's name, when given) as the bins' ``outcome``.

    ``calibration`` (one of :data:`~fedforest.vocabulary.CALIBRATIONS`) is
    fitted on the validation rows for every strategy, after it
    (:mod:`fedforest.prediction.calibration`); accuracy and MCC are then
    computed on the calibrated probabilities.

    When the model has no intersection forest (no site shared one: each
    withheld it with ``privacy.share.intersection: false``), the
    ``intersection`` row reports every metric as ``None`` (undefined), no tree
    kept and no fallback row, so the other strategies keep their results
    (:meth:`~fedforest.model.pooled_model.PooledModel.check_strategy`; a
    strategy that needs ``site`` among the forest's owners is refused by the
    same check).

    Each strategy predicts the test rows once: ``auto`` predicts them with the
    strategy it chose, with the same forest, settings and seed as that
    strategy's own row, so when both are requested one prediction serves both
    (the same probabilities, so the same metrics, bit for bit). Likewise every
    strategy predicts the validation rows at most once, for ``auto``'s choice,
    ``wmp``'s fit and the calibration alike, and ``wmp`` reuses the ``fpv``
    (with soft voting) and ``mp`` predictions of the same rows.

    ``models``, when given, receives every fitted classifier by strategy
    (what a site deploys is taken from it).

    ``in_bag`` (:class:`~fedforest.prediction.out_of_bag.InBag` of the rows of
    ``X_val``) makes ``X_val``, ``y_val`` the site's training rows scored out
    of bag: ``auto``'s choice, the calibrators and ``wmp``'s weight are fitted
    on each row's prediction by the trees that did not train on it. Rows no
    tree left out of bag are left out of these fits (their number logged).

    Regression trees (``model.forest.task == "regression"``) are scored with
    :class:`~fedforest.PooledForestRegressor` by the regression ``metrics``
    (:data:`~fedforest.vocabulary.REGRESSION_METRICS`); ``classes``,
    ``voting``, ``auto_metric`` and ``calibration`` do not apply (``auto``
    chooses by validation RMSE), and a row has no calibration bins.

    Survival trees (``model.forest.is_survival``) are scored with
    :class:`~fedforest.PooledForestSurvival` by the survival ``metrics``
    (:data:`~fedforest.vocabulary.SURVIVAL_METRICS`,
    :func:`~fedforest.survival_metrics.score_survival` on the risk scores and
    the survival curves on the forest's time grid); ``y_train`` (the site's
    training rows' survival target, for the censoring distribution of Uno's C
    and the Brier score) is then required, ``auto`` and ``wmp`` choose by
    ``auto_metric`` on the validation rows, ``events`` counts the test rows'
    events, and a row has neither calibration bins nor intervals; its
    ``survival_curves`` give the time-dependent AUC and the calibration at each
    of ``horizons`` within the grid (:func:`survival_horizons`).
    """
    forest = model.forest
    survival = forest.is_survival
    regression = forest.is_regression or survival
    classes = None if regression else np.asarray(classes)
    if survival and y_train is None:
        raise ValueError("survival trees are scored against the site's training rows: y_train")
    if regression and calibration != "none":
        raise ValueError(
            f"calibration={calibration!r}: regression predictions are not calibrated; use 'none'"
        )
    known = set(model.input_features)
    common = dict(depth_threshold=depth_threshold, site=site, random_state=random_state)
    if not regression:
        common.update(voting=voting, calibration=calibration)
    results: dict[str, dict] = {}
    events = int(np.asarray(y_test)["event"].sum()) if survival else event_count(y_test, classes)
    seed = _bootstrap_seed(random_state)
    wanted = [] if survival else [m for m in INTERVAL_METRICS if m in metrics]
    # the pooled forest's predictions of these two tables, shared by every classifier below
    # (same forest and settings): a strategy's own row, auto's candidates and its chosen
    # strategy's test rows, and wmp's parts are each predicted once
    memo = PredictionMemo()
    X_use = X_test[[c for c in X_test.columns if c in known]]
    X_val_use = X_val[[c for c in X_val.columns if c in known]] if X_val is not None else None
    if in_bag is not None and X_val_use is not None:
        X_val_use, y_val, in_bag = _out_of_bag_rows(model, X_val_use, y_val, in_bag, site)
    needs_val = calibration != "none"
    # the horizons every survival row is reported at (one outside the grid logged once)
    reported_at = survival_horizons(forest.times, horizons, site) if survival else None
    for strategy in strategies:
        extra: dict[str, Any] = {}
        rule = rules.get(strategy)
        try:
            model.check_strategy(strategy, site)
        except StrategyUnavailable as err:
            if err.missing != "intersection_forest":
                raise
            logger.warning(
                "site %s: no site shared an intersection forest; %r is not scored",
                site,
                strategy,
            )
            row = dict.fromkeys(metrics)
            row.update(
                rows=int(len(X_test)),
                events=events,
                intervals=dict.fromkeys(wanted) if resamples and wanted else None,
                mean_trees_kept=0.0,
                fallback_rows=0,
            )
            results[strategy] = row
            continue
        Estimator = (
            PooledForestSurvival
            if survival
            else PooledForestRegressor
            if regression
            else PooledForestClassifier
        )
        clf = Estimator.from_model(model, strategy=strategy, **common)
        chooses = rule.family == rules.CHOICE
        if chooses:
            if not regression or survival:
                clf.auto_metric = auto_metric
            has_intersection = model.intersection is not None
            clf.auto_candidates = default_candidates(forest.owners, site, has_intersection)
        if rule.needs_validation or needs_val:
            if X_val is None or y_val is None:
                raise ValueError(f"strategy {strategy!r} needs validation rows")
            clf.fit(X_val_use, y_val, memo=memo, in_bag=in_bag)
        if chooses:
            extra = {
                "chosen": clf.strategy_,
                "chosen_calibration": "none" if regression else clf.calibrator_.method,
                "runner_up": clf.runner_up_,
                "validation": {k: _finite(v) for k, v in clf.selection_scores_.items()},
            }
        elif rule.fitted:
            extra = {"guess_weight": clf.guess_weight_}
        if models is not None:
            models[strategy] = clf
        # auto predicts with its chosen strategy: the memo gives that strategy's own prediction
        if survival:
            row = _survival_row(clf, X_use, y_train, y_test, metrics, memo, reported_at)
            shape = {}
        elif regression:
            predicted = clf.predict(X_use, memo=memo)
            row = {m: _finite(score_values(m, y_test, predicted)) for m in metrics}
            shape = {"predicted": predicted}
        else:
            proba = clf.predict_proba(X_use, memo=memo)
            row = {k: _finite(v) for k, v in score_all(y_test, proba, classes, metrics).items()}
            shape = {"proba": proba, "classes": classes}
        intervals = None
        if resamples and wanted:
            intervals = bootstrap_intervals(
                y_test, metrics=wanted, points=row, resamples=resamples, random_state=seed, **shape
            )
        bins = None
        if survival:
            extra = {**extra, "survival_curves": row.pop("survival_curves")}
        if not regression:
            bins = calibration_bins(y_test, proba, classes)
            if outcome is not None:
                bins["outcome"] = str(outcome)[:200]
        diag = clf.diagnostics_
        row.update(
            rows=int(len(X_use)),
            events=events,
            intervals=intervals,
            mean_trees_kept=float(np.mean(diag.trees_kept)),
            fallback_rows=int(diag.n_fallback),
            calibration=clf.calibrator_.method if hasattr(clf, "calibrator_") else "none",
            calibration_skipped=skipped_text(getattr(clf, "calibration_skipped_", None)),
            bins=bins,
            **extra,
        )
        results[strategy] = row
        logger.info(
            "site %s: %s %s",
            site,
            strategy,
            ", ".join(f"{m}={row[m]:.3f}" for m in metrics if row[m] is not None),
        )
    return results


#: Risk groups of a survival row's curves, and bins of its calibration at the horizon.
RISK_GROUPS = 3
HORIZON_BINS = 5


def survival_horizon(times) -> float:
    """The horizon a survival row's calibration is read at when the job names none: the
    time grid's middle point.

    Examples
    --------
    >>> survival_horizon([30.0, 60.0, 90.0, 120.0])
    90.0
    """
    return float(np.asarray(times)[len(times) // 2])


def survival_horizons(times, horizons=None, site=None) -> list[float]:
    """The horizons a survival row is reported at: the job's ``survival.horizons`` within
    the time grid (the curves are known there only; one outside is left out, logged), or,
    without one inside, :func:`survival_horizon`.

    Examples
    --------
    >>> survival_horizons([30.0, 60.0, 90.0], [45.0, 365.0])
    [45.0]
    >>> survival_horizons([30.0, 60.0, 90.0])
    [60.0]
    """
    times = np.asarray(times, np.float64)
    given = [float(h) for h in horizons or ()]
    inside = [h for h in given if times[0] <= h <= times[-1]]
    if len(inside) < len(given):
        logger.warning(
            "site %s: survival.horizons %s lie outside the time grid [%g, %g]; not reported",
            site,
            [h for h in given if h not in inside],
            times[0],
            times[-1],
        )
    return inside or [survival_horizon(times)]


def _survival_row(clf, X, y_train, y_test, metrics, memo, horizons) -> dict:
    """A survival strategy's metrics on the test rows: risk scores and survival curves on
    the forest's time grid (:func:`~fedforest.survival_metrics.score_survival`), and its
    ``survival_curves``: the mean predicted curve against Kaplan-Meier in
    :data:`RISK_GROUPS` groups of test rows by risk
    (:func:`~fedforest.survival_metrics.risk_groups`), and at each of ``horizons``
    (:func:`survival_horizons`) the time-dependent AUC
    (:func:`~fedforest.survival_metrics.auc_at`) and the calibration
    (:func:`~fedforest.survival_metrics.horizon_calibration`)."""
    from ..survival_metrics import auc_at, horizon_calibration, risk_groups, score_survival

    risk = clf.predict(X, memo=memo)
    curves = clf.predict_survival_function(X, return_array=True, memo=memo)
    times = np.asarray(clf.times_)
    row: dict[str, Any] = {
        m: _finite(score_survival(m, y_test, risk, curves, times, y_ref=y_train)) for m in metrics
    }
    n = len(risk)
    groups = risk_groups(y_test, risk, curves, times, n_groups=min(RISK_GROUPS, n))
    for group in groups:
        del group["risk"]  # risk scores are the model's, not needed to read the curves
    at = []
    for horizon in horizons:
        calibration = horizon_calibration(
            y_test, curves, times, horizon, n_bins=min(HORIZON_BINS, n)
        )
        td_auc = _finite(auc_at(y_test, risk, horizon, y_ref=y_train))
        at.append({**calibration, "td_auc": td_auc})
    row["survival_curves"] = {"times": times.tolist(), "groups": groups, "horizons": at}
    return row


def _out_of_bag_rows(model: PooledModel, X_val, y_val, in_bag: InBag, site):
    """The rows of ``X_val`` with an out-of-bag prediction, once for every strategy."""
    if in_bag.n_rows != len(X_val):
        raise ValueError(
            f"in_bag describes {in_bag.n_rows} rows, but the rows to fit on are {len(X_val)}"
        )
    keep = in_bag.scored(tree_weights(model.forest, model.settings.owner_weights))
    if keep.all():
        return X_val, y_val, in_bag
    if not keep.any():
        raise ValueError(
            f"site {site}: none of the {len(X_val)} training rows has an out-of-bag tree; "
            "nothing to fit on out of bag"
        )
    logger.info(
        "site %s: %d of %d training rows have no out-of-bag tree and are left out of the fits",
        site,
        int((~keep).sum()),
        len(X_val),
    )
    rows = np.flatnonzero(keep)
    return X_val.iloc[rows], np.asarray(y_val)[rows], in_bag.rows(rows)


def _bootstrap_seed(random_state) -> int:
    """The bootstrap's seed: the job's seed itself (an int), else drawn from ``random_state``."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    from sklearn.utils import check_random_state

    return int(check_random_state(random_state).randint(2**31 - 1))


#: The range of each survival metric: concordances, the integrated Brier score and the
#: mean time-dependent AUC all lie in [0, 1].
SURVIVAL_METRIC_RANGES: dict[str, tuple[float, float]] = dict.fromkeys(SURVIVAL_METRICS, (0.0, 1.0))


def _metric_range(metric: str) -> tuple[float, float]:
    """The range a metric's value lies in (:data:`~fedforest.metrics.METRIC_RANGES`)."""
    return METRIC_RANGES.get(metric) or SURVIVAL_METRIC_RANGES[metric]


#: Fields of one strategy's row in a site's metrics, besides the metrics themselves.
ROW_FIELDS = (
    "rows",
    "events",
    "intervals",
    "mean_trees_kept",
    "fallback_rows",
    "calibration",
    "calibration_skipped",
    "bins",
    "chosen",
    "chosen_calibration",
    "runner_up",
    "validation",
    "guess_weight",
    "survival_curves",
)
#: Fields of the ``auto`` row only.
AUTO_FIELDS = ("chosen", "chosen_calibration", "runner_up", "validation")


class SiteMetrics(TypedDict):
    """A site's metrics reply as :func:`read_site_metrics` checked it (plain values: the
    server writes them into ``results.json`` as they are)."""

    site: str
    rows: int
    #: ``{strategy: {metric: value or None, "rows", "events", "intervals", ...}}``.
    strategies: dict[str, dict[str, Any]]
    #: The site's effective privacy policy (``PrivacyPolicy.to_dict``), or None (version 1).
    privacy: dict | None
    #: What the site scored its choices on (``oob`` or ``holdout``; version 6), or None
    #: (not reported).
    validation: str | None


def read_site_metrics(
    payload: Mapping,
    sender: str,
    strategies: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
) -> SiteMetrics:
    """Validate a site's ``fedforest/site-metrics`` reply against what the job asked for.

    ``strategies`` and ``metrics`` are the job's; without them (a site's own privacy
    filter, which does not know the job) the reply is read for the strategies it has
    rows for and the metrics (:data:`~fedforest.vocabulary.METRICS`,
    :data:`~fedforest.vocabulary.REGRESSION_METRICS`) its first row holds.

    Every requested strategy has a row; every requested metric is a finite
    number in its range (:data:`~fedforest.metrics.METRIC_RANGES`) or ``None`` (undefined); counts are non-negative; every
    row scored the reply's ``rows`` and the same ``events`` (at most ``rows``; version 4); each
    bootstrap interval (version 4) is ``[low, high]``, finite, in the metric's range and
    holding the point (:func:`~fedforest.intervals.check_interval`); a scored row's
    ``calibration_skipped`` (version 5) is null or the text of :func:`skipped_text`; ``auto``
    names a strategy it chose; ``wmp`` gives its guess weight in [0, 1]; ``privacy`` (version 2) is the site's effective
    privacy policy, read as a ``privacy:`` block
    (:meth:`~fedforest.privacy.policy.PrivacyPolicy.from_dict`), or
    ``None`` (a version 1 reply, which did not report it); ``validation``
    (version 6) is the site's validation mode
    (:data:`~fedforest.vocabulary.VALIDATIONS`), or absent or ``None`` (not
    reported; a reply before version 6 reads as ``holdout``, the only mode
    then). Anything else is refused with a :class:`~fedforest.PayloadError`
    naming the sender and the field.

    Returns
    -------
    SiteMetrics
        ``{"site", "rows", "strategies", "privacy", "validation"}`` with plain values
        only (``privacy`` as ``PrivacyPolicy.to_dict`` writes it, or ``None``).
    """
    r = PayloadReader(payload, protocol.SITE_METRICS, sender)
    r.check_keys({"site", "rows", "strategies", "privacy", "validation"})
    mode = r.get("validation", None)
    if mode is not None and (not isinstance(mode, str) or mode not in VALIDATIONS):
        r.refuse("validation", mode, f"one of {', '.join(VALIDATIONS)}, or None")
    if r.get("site") != sender:
        r.fail(f"field 'site' is {describe(r.get('site'))}; expected {sender!r}")
    rows = r.read_integer("rows", 0)
    per = r.read_mapping("strategies")
    if strategies is None:
        strategies = [str(s) for s in per]
    if metrics is None:
        first = next(iter(per.values()), None)
        known = (*METRICS, *REGRESSION_METRICS, *SURVIVAL_METRICS)
        metrics = [m for m in known if isinstance(first, Mapping) and m in first]
    if sorted(map(str, per)) != sorted(strategies) or not all(isinstance(k, str) for k in per):
        r.fail(
            f"field 'strategies' has {describe(sorted(map(str, per)))}; expected "
            f"{sorted(strategies)}"
        )
    out: dict[str, dict] = {}
    for name in strategies:
        row = r.entry(per[name], f"strategies[{name!r}]")
        row.check_keys({*metrics, *ROW_FIELDS})
        clean: dict[str, Any] = {}
        for m in metrics:
            value = row.get(m)
            clean[m] = None if value is None else row.number(m, value, *_metric_range(m))
        clean["rows"] = row.read_integer("rows", 0)
        if clean["rows"] != rows:
            row.fail(
                f"field 'rows' is {clean['rows']}; the reply's 'rows' is {rows}: expected every "
                "row to score the site's test rows"
            )
        events = row.get("events", None)
        clean["events"] = None if events is None else row.integer("events", events, 0, rows)
        if out and clean["events"] != out[strategies[0]]["events"]:
            row.fail(
                f"field 'events' is {clean['events']}; the row of {strategies[0]!r} has "
                f"{out[strategies[0]]['events']} (one site, one set of test rows)"
            )
        clean["intervals"] = _read_intervals(row, clean, metrics)
        clean["mean_trees_kept"] = row.number("mean_trees_kept", row.get("mean_trees_kept"), 0)
        clean["fallback_rows"] = row.read_integer("fallback_rows", 0)
        if "calibration" in row.payload:  # absent only in a row that was not scored
            clean["calibration"] = row.choice(
                "calibration", row.get("calibration"), CALIBRATION_METHODS
            )
            clean["calibration_skipped"] = _read_skipped(row)
            clean["bins"] = _read_bins(row, clean["rows"])
        # a name this install has no rule for (a results file of a job with a strategy of its
        # own) reads as an ordinary row: no choice fields, no fitted weight
        rule = rules.find(name)
        family = None if rule is None else rule.family
        if family == rules.CHOICE:
            choosable = rules.deployable()
            clean["chosen"] = row.choice("chosen", row.get("chosen"), choosable)
            clean["chosen_calibration"] = row.choice(
                "chosen_calibration", row.get("chosen_calibration"), CALIBRATION_METHODS
            )
            runner_up = row.get("runner_up")
            clean["runner_up"] = (
                None if runner_up is None else row.choice("runner_up", runner_up, choosable)
            )
            validation = row.read_mapping("validation")
            clean["validation"] = {
                str(k): None if v is None else row.number(f"validation.{k}", v)
                for k, v in validation.items()
                if row.choice("validation", k, choosable)
            }
        elif any(k in row.payload for k in AUTO_FIELDS):
            choice = ", ".join(repr(r.name) for r in rules.all_rules() if r.family == rules.CHOICE)
            row.fail(
                f"fields {', '.join(map(repr, AUTO_FIELDS))} belong to the {choice} row only; "
                "expected none of them here"
            )
        if row.get("survival_curves", None) is not None:
            clean["survival_curves"] = _read_survival_curves(row, clean["rows"])
        if rule is not None and rule.fitted:
            clean["guess_weight"] = row.number("guess_weight", row.get("guess_weight"), 0.0, 1.0)
        elif "guess_weight" in row.payload:
            row.fail(
                f"field 'guess_weight' belongs to the {', '.join(rules.fitted())} row only; "
                "expected none here"
            )
        out[name] = clean
    return SiteMetrics(
        site=sender, rows=rows, strategies=out, privacy=_read_policy(r), validation=mode
    )


def _read_skipped(row: PayloadReader) -> str | None:
    """A row's ``calibration_skipped`` (version 5): null, or the text :func:`skipped_text`
    writes: a string of 1 to :data:`MAX_SKIPPED_TEXT` characters, no control characters."""
    value = row.get("calibration_skipped", None)
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_SKIPPED_TEXT
        or re.search(r"[\x00-\x1f\x7f-\x9f]", value)
    ):
        row.refuse(
            "calibration_skipped",
            value,
            f"null or a text of 1 to {MAX_SKIPPED_TEXT} characters without control characters "
            "(why a calibration method could not be fitted)",
        )
    return str.__str__(value)


def _read_intervals(row: PayloadReader, clean: Mapping, metrics: Sequence[str]) -> dict | None:
    """A row's bootstrap intervals: ``{metric: [low, high] or None}`` for metrics of
    :data:`~fedforest.intervals.INTERVAL_METRICS` the job asked for, each holding its point
    (:func:`~fedforest.intervals.check_interval`)."""
    value = row.get("intervals", None)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        row.refuse("intervals", value, "a dict of [low, high] per metric, or null")
    allowed = [m for m in INTERVAL_METRICS if m in metrics]
    out = {}
    for metric, interval in value.items():
        if metric not in allowed:
            row.fail(f"field 'intervals' names {describe(metric)}; allowed: {allowed}")
        problem = check_interval(metric, clean[metric], interval)
        if problem:
            row.fail(f"field 'intervals.{metric}': {problem}")
        out[metric] = None if interval is None else [float(interval[0]), float(interval[1])]
    return out


def _read_bins(row: PayloadReader, rows: int) -> dict | None:
    """A row's reliability-diagram bins (:func:`~fedforest.metrics.calibration_bins`)."""
    value = row.get("bins")
    if value is None:
        return None
    bins = row.entry(value, "bins")
    bins.check_keys({"target", "outcome", "count", "predicted", "observed"})
    target = bins.read_string("target")
    out: dict[str, Any] = {"target": target[:200]}
    if bins.get("outcome", None) is not None:
        out["outcome"] = bins.read_string("outcome")[:200]
    lists = {}
    for key in ("count", "predicted", "observed"):
        items = bins.get(key)
        if not isinstance(items, (list, tuple)) or len(items) != N_BINS:
            bins.refuse(key, items, f"a list of {N_BINS} entries")
        lists[key] = list(items)
    count = [bins.integer(f"count[{i}]", c, 0, rows) for i, c in enumerate(lists["count"])]
    if sum(count) > rows:
        bins.fail(f"field 'count' adds up to {sum(count)} rows; the row scored {rows}")
    out["count"] = count
    for key in ("predicted", "observed"):
        values = []
        for i, (v, c) in enumerate(zip(lists[key], count, strict=True)):
            if c == 0:
                if v is not None:
                    bins.fail(f"field '{key}[{i}]' must be null for an empty bin")
                values.append(None)
            else:
                values.append(bins.number(f"{key}[{i}]", v, 0.0, 1.0))
        out[key] = values
    return out


def _read_survival_curves(row: PayloadReader, rows: int) -> dict:
    """A survival row's ``survival_curves``: the time grid, the risk groups' predicted and
    Kaplan-Meier curves on it (version 7), and at each horizon within the grid the
    time-dependent AUC and the calibration (version 8; a version 7 row's one calibration
    reads as its only horizon); every probability in [0, 1], every count within the row's
    test rows."""
    from .time_grid import MAX_HORIZONS, check_grid

    curves = row.entry(row.get("survival_curves"), "survival_curves")
    curves.check_keys({"times", "groups", "horizons"})
    try:
        times = check_grid(curves.get("times"), "field 'times'").tolist()
    except ValueError as err:
        curves.fail(str(err))
    n = len(times)
    groups = curves.get("groups")
    if not isinstance(groups, (list, tuple)) or not 1 <= len(groups) <= RISK_GROUPS:
        curves.refuse("groups", groups, f"a list of 1 to {RISK_GROUPS} risk groups")
    out_groups = []
    for i, value in enumerate(groups):
        g = curves.entry(value, f"groups[{i}]")
        g.check_keys({"rows", "events", "predicted", "observed"})
        n_rows = g.read_integer("rows", 1, rows)
        group = {"rows": n_rows, "events": g.read_integer("events", 0, n_rows)}
        for key in ("predicted", "observed"):
            values = g.get(key)
            if not isinstance(values, (list, tuple)) or len(values) != n:
                g.refuse(key, values, f"a list of {n} probabilities (one per time of 'times')")
            group[key] = [g.number(f"{key}[{j}]", v, 0.0, 1.0) for j, v in enumerate(values)]
        out_groups.append(group)
    if sum(g["rows"] for g in out_groups) != rows:
        curves.fail(f"field 'groups' holds {sum(g['rows'] for g in out_groups)} rows, not {rows}")
    at = curves.get("horizons")
    if not isinstance(at, (list, tuple)) or not 1 <= len(at) <= MAX_HORIZONS:
        curves.refuse("horizons", at, f"a list of 1 to {MAX_HORIZONS} horizons")
    horizons = [_read_horizon(curves.entry(v, f"horizons[{i}]"), rows) for i, v in enumerate(at)]
    order = [h["horizon"] for h in horizons]
    if any(b <= a for a, b in zip(order[:-1], order[1:], strict=True)):
        curves.refuse("horizons", order, "horizons in strictly increasing order")
    if order[0] < times[0] or order[-1] > times[-1]:
        curves.refuse("horizons", order, f"horizons within the grid [{times[0]:g}, {times[-1]:g}]")
    return {"times": times, "groups": out_groups, "horizons": horizons}


def _read_horizon(c: PayloadReader, rows: int) -> dict:
    """One horizon of a survival row (version 8): its time-dependent AUC (null when the
    test rows cannot give it) and the calibration of the curves there, in bins of rows."""
    c.check_keys({"horizon", "td_auc", "predicted", "observed", "rows", "ici"})
    horizon = c.number("horizon", c.get("horizon"), 0.0)
    td_auc = c.get("td_auc")
    td_auc = None if td_auc is None else c.number("td_auc", td_auc, 0.0, 1.0)
    counts = c.get("rows")
    if not isinstance(counts, (list, tuple)) or not 1 <= len(counts) <= HORIZON_BINS:
        c.refuse("rows", counts, f"a list of 1 to {HORIZON_BINS} bins' rows")
    bins = {"rows": [c.integer(f"rows[{j}]", v, 1, rows) for j, v in enumerate(counts)]}
    if sum(bins["rows"]) != rows:
        c.fail(f"field 'rows' adds up to {sum(bins['rows'])} rows, not {rows}")
    for key in ("predicted", "observed"):
        values = c.get(key)
        if not isinstance(values, (list, tuple)) or len(values) != len(counts):
            c.refuse(key, values, f"a list of {len(counts)} probabilities (one per bin)")
        bins[key] = [c.number(f"{key}[{j}]", v, 0.0, 1.0) for j, v in enumerate(values)]
    ici = c.number("ici", c.get("ici"), 0.0, 1.0)
    return {"horizon": horizon, "td_auc": td_auc, **bins, "ici": ici}


def _read_policy(r: PayloadReader) -> dict | None:
    """The ``privacy`` field of a metrics reply as a clean policy dict (or ``None``)."""
    value = r.get("privacy")
    if value is None:
        return None
    if not isinstance(value, Mapping):
        r.refuse("privacy", value, "a privacy policy (a dict) or None")
    try:
        policy = PrivacyPolicy.from_dict(dict(value), source=f"the reply of {r.sender!r}")
    except Exception as err:  # noqa: BLE001 - any malformed policy is the sender's fault
        text = str(err)
        r.fail(f"field 'privacy' is not a privacy policy: {text[:400]}")
    return policy.to_dict()
