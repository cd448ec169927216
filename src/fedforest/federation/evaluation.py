"""Scoring the strategies of a pooled model on a site's held-out rows."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .. import protocol
from ..metrics import METRIC_RANGES, score_all
from ..model.forest import PooledForest
from ..model.imputers import ImputerSet
from ..prediction.classifier import PooledForestClassifier
from ..prediction.selection import default_candidates
from ..privacy.policy import PrivacyPolicy
from ..validation import PayloadReader, describe
from ..vocabulary import FITTED_STRATEGIES, METRICS, STRATEGIES

logger = logging.getLogger(__name__)


def _on_classes(proba: np.ndarray, have, classes: np.ndarray) -> np.ndarray:
    """Place probability columns for ``have`` into the global ``classes`` order."""
    out = np.zeros((proba.shape[0], len(classes)))
    out[:, np.searchsorted(classes, np.asarray(have))] = proba
    return out


def _finite(value) -> float | None:
    return float(value) if np.isfinite(value) else None


def evaluate_strategies(
    forest: PooledForest,
    imputers: ImputerSet | None,
    feature_std: Mapping[str, float],
    intersection: PooledForest | None,
    X_test: pd.DataFrame,
    y_test,
    classes,
    strategies: Sequence[str],
    site: str | None = None,
    voting: str = "soft",
    depth_threshold: int = 2,
    metrics: Sequence[str] = METRICS,
    auto_metric: str = "auprc",
    X_val: pd.DataFrame | None = None,
    y_val=None,
    random_state=0,
) -> dict[str, dict]:
    """Score strategies on a site's test rows.

    ``X_test`` holds the site's columns (those the forest does not know are
    ignored). ``intersection`` scores the intersection forest; ``auto`` chooses
    on ``X_val``, ``y_val``. Returns ``{strategy: {metric: value, ..., "rows",
    "mean_trees_kept", "fallback_rows"}}``.

    When ``intersection`` is ``None`` (no site shared an intersection forest:
    each withheld it with ``privacy.share.intersection: false``), the
    ``intersection`` row reports every metric as ``None`` (undefined), no tree
    kept and no fallback row, so the other strategies keep their results.

    Each strategy predicts the test rows once: ``auto`` predicts them with the
    strategy it chose, with the same forest, settings and seed as that
    strategy's own row, so when both are requested one prediction serves both
    (the same probabilities, so the same metrics, bit for bit). Likewise every
    strategy predicts the validation rows at most once, for ``auto``'s choice
    and ``wmp``'s fit alike, and ``wmp`` reuses the ``fpv`` (with soft voting)
    and ``mp`` predictions of the same rows.
    """
    classes = np.asarray(classes)
    cols = [c for c in X_test.columns if c in forest.feature_names]
    common = dict(
        imputers=imputers,
        feature_std=feature_std,
        voting=voting,
        depth_threshold=depth_threshold,
        site=site,
        random_state=random_state,
    )
    results: dict[str, dict] = {}
    # the pooled forest's predictions of these two tables, shared by every classifier below
    # (same forest and settings): a strategy's own row, auto's candidates and its chosen
    # strategy's test rows, and wmp's parts are each predicted once
    memo: dict = {}
    X_test_use = X_test[cols]
    X_val_use = X_val[cols] if X_val is not None else None
    for strategy in strategies:
        extra: dict[str, Any] = {}
        X_use = X_test_use
        if strategy == "intersection":
            if intersection is None:
                logger.warning(
                    "site %s: no site shared an intersection forest; 'intersection' is not scored",
                    site,
                )
                row = dict.fromkeys(metrics)
                row.update(rows=int(len(X_test)), mean_trees_kept=0.0, fallback_rows=0)
                results[strategy] = row
                continue
            clf = PooledForestClassifier(
                intersection, strategy="fpv", voting=voting, random_state=random_state
            )
            X_use = X_test[[c for c in intersection.feature_names if c in X_test.columns]]
        elif strategy == "auto":
            if X_val is None or y_val is None:
                raise ValueError("strategy 'auto' needs validation rows")
            candidates = default_candidates(forest.owners, site)
            clf = PooledForestClassifier(
                forest,
                strategy="auto",
                auto_metric=auto_metric,
                auto_candidates=candidates,
                **common,
            )
            clf._memo = memo
            clf.fit(X_val_use, y_val)
            extra = {
                "chosen": clf.strategy_,
                "validation": {k: _finite(v) for k, v in clf.selection_scores_.items()},
            }
        elif strategy in FITTED_STRATEGIES:
            if X_val is None or y_val is None:
                raise ValueError(f"strategy {strategy!r} needs validation rows")
            clf = PooledForestClassifier(forest, strategy=strategy, **common)
            clf._memo = memo
            clf.fit(X_val_use, y_val)
            extra = {"guess_weight": clf.guess_weight_}
        else:
            clf = PooledForestClassifier(forest, strategy=strategy, **common)
            clf._memo = memo
        # auto predicts with its chosen strategy: the memo gives that strategy's own prediction
        proba = _on_classes(clf.predict_proba(X_use), clf.classes_, classes)
        diag = clf.diagnostics_
        row = {k: _finite(v) for k, v in score_all(y_test, proba, classes, metrics).items()}
        row.update(
            rows=int(len(X_use)),
            mean_trees_kept=float(np.mean(diag.trees_kept)),
            fallback_rows=int(diag.n_fallback),
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


#: Fields of one strategy's row in a site's metrics, besides the metrics themselves.
ROW_FIELDS = ("rows", "mean_trees_kept", "fallback_rows", "chosen", "validation", "guess_weight")


def read_site_metrics(
    payload: Mapping, sender: str, strategies: Sequence[str], metrics: Sequence[str]
) -> dict:
    """Validate a site's ``fedforest/site-metrics`` reply against what the job asked for.

    Every requested strategy has a row; every requested metric is a finite
    number in its range (:data:`~fedforest.metrics.METRIC_RANGES`) or ``None`` (undefined); counts are non-negative; ``auto``
    names a strategy it chose; ``wmp`` gives its guess weight in [0, 1]; ``privacy`` (version 2) is the site's effective
    privacy policy, read as a ``privacy:`` block
    (:meth:`~fedforest.privacy.policy.PrivacyPolicy.from_dict`), or
    ``None`` (a version 1 reply, which did not report it). Anything else is
    refused with a :class:`~fedforest.PayloadError` naming the sender and the
    field.

    Returns
    -------
    dict
        ``{"site", "rows", "strategies", "privacy"}`` with plain values only
        (``privacy`` as ``PrivacyPolicy.to_dict`` writes it, or ``None``).
    """
    r = PayloadReader(payload, protocol.SITE_METRICS, sender)
    r.check_keys({"site", "rows", "strategies", "privacy"})
    if r.get("site") != sender:
        r.fail(f"field 'site' is {describe(r.get('site'))}; expected {sender!r}")
    rows = r.read_integer("rows", 0)
    per = r.read_mapping("strategies")
    if sorted(map(str, per)) != sorted(strategies) or not all(isinstance(k, str) for k in per):
        r.fail(f"field 'strategies' has {sorted(map(str, per))}; expected {sorted(strategies)}")
    out: dict[str, dict] = {}
    for name in strategies:
        row = r.entry(per[name], f"strategies[{name!r}]")
        row.check_keys({*metrics, *ROW_FIELDS})
        clean: dict[str, Any] = {}
        for m in metrics:
            value = row.get(m)
            clean[m] = None if value is None else row.number(m, value, *METRIC_RANGES[m])
        clean["rows"] = row.read_integer("rows", 0)
        clean["mean_trees_kept"] = row.number("mean_trees_kept", row.get("mean_trees_kept"), 0)
        clean["fallback_rows"] = row.read_integer("fallback_rows", 0)
        if name == "auto":
            clean["chosen"] = row.choice("chosen", row.get("chosen"), STRATEGIES)
            validation = row.read_mapping("validation")
            clean["validation"] = {
                str(k): None if v is None else row.number(f"validation.{k}", v)
                for k, v in validation.items()
                if row.choice("validation", k, STRATEGIES)
            }
        elif "chosen" in row.payload or "validation" in row.payload:
            row.fail("fields 'chosen' and 'validation' belong to the 'auto' row only")
        if name in FITTED_STRATEGIES:
            clean["guess_weight"] = row.number("guess_weight", row.get("guess_weight"), 0.0, 1.0)
        elif "guess_weight" in row.payload:
            row.fail(f"field 'guess_weight' belongs to the {', '.join(FITTED_STRATEGIES)} row only")
        out[name] = clean
    return {"site": sender, "rows": rows, "strategies": out, "privacy": _read_policy(r)}


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
