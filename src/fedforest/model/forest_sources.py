"""How fitted scikit-learn and scikit-survival forests become pooled forests.

:meth:`PooledForest.from_sklearn <fedforest.model.forest.PooledForest.from_sklearn>`
and :meth:`~fedforest.model.forest.PooledForest.from_sksurv` take their
constructor arguments from here: every tree's per-node arrays read from its
``tree_``, the names and levels checked against what the forest saw, and the
values of each task (class distributions, means, or curves on a time grid).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .payload_checks import plain_labels


def sklearn_fields(rf, feature_names: Sequence[str], X, categories) -> dict:
    """The constructor arguments (but ``owners``) of a fitted scikit-learn forest."""
    if not hasattr(rf, "estimators_"):
        raise ValueError("from_sklearn needs a fitted forest (no estimators_ found)")
    if hasattr(rf, "unique_times_"):
        raise ValueError(
            "a survival forest has curves on its own times: use PooledForest.from_sksurv("
            "rf, feature_names, owner, times=grid)"
        )
    if getattr(rf, "n_outputs_", 1) != 1:
        raise ValueError("only single-output forests are supported")
    feature_names = _checked_names(rf, feature_names)
    categories = _checked_categories(categories, feature_names)
    regression = not hasattr(rf, "classes_")
    classes = np.zeros(0) if regression else rf.classes_
    plain_labels(classes)

    def value_of(t) -> np.ndarray:
        value = t.value[:, 0, :].astype(np.float64)
        if not regression:
            sums = value.sum(axis=1, keepdims=True)
            if not np.allclose(sums, 1.0):
                value = value / np.where(sums > 0, sums, 1.0)
        return value

    return dict(
        feature_names=feature_names,
        classes=classes,
        task="regression" if regression else "classification",
        categories=categories,
        **_tree_arrays(rf, value_of, 1 if regression else len(classes), X),
    )


def sksurv_fields(rsf, feature_names: Sequence[str], times, X, categories: Mapping | None) -> dict:
    """The constructor arguments (but ``owners``) of a fitted scikit-survival forest on
    ``times``."""
    if not hasattr(rsf, "unique_times_") or not hasattr(rsf, "estimators_"):
        raise ValueError(
            "from_sksurv needs a fitted scikit-survival forest (no unique_times_ or "
            "estimators_ found); for a scikit-learn forest use from_sklearn"
        )
    if getattr(rsf, "low_memory", False):
        raise ValueError(
            "the forest was fitted with low_memory=True: its trees keep only a risk score, "
            "not their curves; fit it with low_memory=False"
        )
    feature_names = _checked_names(rsf, feature_names)
    categories = _checked_categories(categories, feature_names)
    grid = np.asarray(times, dtype=np.float64)
    check_times(grid, "survival")
    # the last of the forest's times at or before each grid point (-1: before the first)
    at = np.searchsorted(np.asarray(rsf.unique_times_, np.float64), grid, side="right") - 1
    before = at < 0
    take = np.maximum(at, 0)

    def value_of(t) -> np.ndarray:
        chf = t.value[:, take, 0].astype(np.float64)
        surv = t.value[:, take, 1].astype(np.float64)
        chf[:, before] = 0.0
        surv[:, before] = 1.0
        return np.concatenate([chf, surv], axis=1)

    return dict(
        feature_names=feature_names,
        classes=np.zeros(0),
        task="survival",
        times=grid,
        categories=categories,
        **_tree_arrays(rsf, value_of, 2 * grid.shape[0], X),
    )


def check_times(times: np.ndarray, task: str) -> None:
    """Refuse a time grid that survival trees cannot use, or one given for another task.

    Raises
    ------
    ValueError
        A survival grid that is empty, not one-dimensional, not finite, below 0 or not
        strictly increasing; a non-empty grid for classification or regression trees.
    """
    if task != "survival":
        if times.size:
            raise ValueError(f"{task} trees have no time grid (times must be empty)")
        return
    if times.ndim != 1 or times.size == 0:
        raise ValueError(
            f"the time grid must be a non-empty list of times, got shape {times.shape}"
        )
    if not np.isfinite(times).all() or times.min() < 0:
        raise ValueError("the time grid must hold finite times of at least 0")
    if np.any(np.diff(times) <= 0):
        raise ValueError("the time grid must be strictly increasing")


def _checked_names(rf, feature_names) -> list[str]:
    """The global names of a fitted forest's columns, checked against what it saw."""
    feature_names = [str(f) for f in feature_names]
    if len(feature_names) != rf.n_features_in_:
        raise ValueError(
            f"feature_names has {len(feature_names)} names but the forest was trained on "
            f"{rf.n_features_in_} features"
        )
    if len(set(feature_names)) != len(feature_names):
        raise ValueError("feature_names has duplicates")
    seen_names = getattr(rf, "feature_names_in_", None)
    if seen_names is not None and list(map(str, seen_names)) != feature_names:
        raise ValueError(
            f"feature_names {feature_names} differ from the columns the forest was "
            f"trained on {list(seen_names)}"
        )
    return feature_names


def _checked_categories(categories, feature_names) -> dict:
    categories = dict(categories or {})
    unknown = sorted(set(categories) - set(feature_names))
    if unknown:
        raise ValueError(f"categories names features the forest does not have: {unknown}")
    return categories


def _tree_arrays(rf, value_of, width: int, X) -> dict:
    """The per-node arrays of a fitted forest's trees, ``value_of(tree_)`` their values."""
    starts = [0]
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("l", "r", "f", "t", "n", "m", "v")}
    for est in rf.estimators_:
        t = est.tree_
        leaf = t.children_left < 0
        parts["l"].append(np.where(leaf, -1, t.children_left))
        parts["r"].append(np.where(leaf, -1, t.children_right))
        parts["f"].append(np.where(leaf, -1, t.feature))
        parts["t"].append(np.where(leaf, 0.0, t.threshold))
        parts["n"].append(t.n_node_samples)
        mgl = getattr(t, "missing_go_to_left", None)
        parts["m"].append(
            np.zeros(t.node_count, bool) if mgl is None else np.asarray(mgl).astype(bool)
        )
        parts["v"].append(value_of(t))
        starts.append(starts[-1] + t.node_count)
    threshold = np.concatenate(parts["t"])
    saw = np.isposinf(threshold)
    if X is not None:
        saw |= _nodes_that_saw_missing(rf, X, starts)
    return {
        "tree_start": np.asarray(starts),
        "tree_owner": np.zeros(len(rf.estimators_), np.int32),
        "children_left": np.concatenate(parts["l"]),
        "children_right": np.concatenate(parts["r"]),
        "feature": np.concatenate(parts["f"]),
        "threshold": threshold,
        "n_node_samples": np.concatenate(parts["n"]),
        "missing_left": np.concatenate(parts["m"]),
        "saw_missing": saw,
        "value": np.concatenate(parts["v"]) if starts[-1] else np.zeros((0, width)),
    }


def _nodes_that_saw_missing(rf, X, starts) -> np.ndarray:
    """Mark nodes reached in training by an in-bag row missing the node's feature."""
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2 or X.shape[1] != rf.n_features_in_:
        raise ValueError(
            f"X has shape {X.shape}; expected the training rows with {rf.n_features_in_} columns"
        )
    saw = np.zeros(starts[-1], dtype=bool)
    nan_rows = np.flatnonzero(np.isnan(X).any(axis=1))
    if nan_rows.size == 0:
        return saw
    if getattr(rf, "bootstrap", False):
        in_bag = rf.estimators_samples_
    else:
        in_bag = [np.arange(X.shape[0])] * len(rf.estimators_)
    for i, est in enumerate(rf.estimators_):
        rows = np.intersect1d(np.asarray(in_bag[i]), nan_rows)
        if rows.size == 0:
            continue
        path = est.decision_path(X[rows]).tocoo()
        feat = est.tree_.feature[path.col]
        internal = feat >= 0
        r, c, f = path.row[internal], path.col[internal], feat[internal]
        hit = np.isnan(X[rows][r, f])
        saw[starts[i] + c[hit]] = True
    return saw
