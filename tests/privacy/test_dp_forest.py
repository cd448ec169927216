"""DP mode's random trees (privacy/dp_forest.py) and its budget."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.prediction.classifier import PooledForestClassifier
from fedforest.privacy.dp_forest import fit_dp_forest
from fedforest.privacy.policy import PrivacyPolicy, dp_budget
from fedforest.privacy.transforms import prepare_forest, recount

from .privacy_data import (
    LEVELS,
    NAMES,
    NUMERIC,
    RANGES,
    assert_predicts,
    hand_forest,
    make_data,
    round_trip,
)


# ---------------------------------------------------------------- DP mode
def test_dp_structure_does_not_depend_on_the_rows():
    X, y = make_data()
    X2, y2 = X.iloc[1:], y[1:]  # neighbours: one row removed
    args = (RANGES, {"cat": LEVELS}, 6, 4, 1.0)
    a = fit_dp_forest(X, y, *args, random_state=7, classes=[0, 1], noise_state=1)
    b = fit_dp_forest(X2, y2, *args, random_state=7, classes=[0, 1], noise_state=1)
    for key in ("tree_start", "children_left", "children_right", "feature", "threshold"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key
    assert not np.array_equal(a.value, b.value)
    c = fit_dp_forest(X, y, *args, random_state=8, classes=[0, 1], noise_state=1)
    assert not np.array_equal(a.threshold, c.threshold)
    out = round_trip(a)
    assert out.n_trees == 6 and np.all(out.node_depth <= 4)
    internal = out.feature >= 0
    for j, name in enumerate(NAMES):
        t = out.threshold[internal & (out.feature == j)]
        if name == "cat":
            assert np.all(np.floor(t) + 0.5 == t) and np.all((t > 0) & (t < 3))
        else:
            assert np.all((t >= -4) & (t <= 4))
    assert not out.saw_missing.any()
    assert_predicts(out, X)


def test_dp_leaf_counts_have_laplace_noise_of_scale_trees_over_epsilon():
    X, y = make_data()
    n_trees, epsilon = 4, 2.0  # scale 2, variance 8
    args = (X, y, RANGES, {"cat": LEVELS}, n_trees, 1, epsilon)
    structure = fit_dp_forest(*args, random_state=3, classes=[0, 1], noise_state=0)
    true = recount(structure, X, y)  # the plain counts of every row, same structure
    assert np.array_equal(true.feature, structure.feature)
    leaf = true.feature < 0
    true_counts = (true.value * true.n_node_samples[:, None])[leaf]
    far = true_counts >= 30
    diffs = []
    for seed in range(150):
        noisy = fit_dp_forest(*args, random_state=3, classes=[0, 1], noise_state=seed)
        counts = (noisy.value * noisy.n_node_samples[:, None])[leaf]
        diffs.append((counts - true_counts)[far])
    d = np.concatenate(diffs)
    assert d.var() == pytest.approx(2 * (n_trees / epsilon) ** 2, rel=0.15)


def test_dp_forest_learns_with_a_large_budget_and_needs_public_ranges():
    X, y = make_data()
    forest = fit_dp_forest(
        X, y, RANGES, {"cat": LEVELS}, 20, 4, 1e6, random_state=0, classes=[0, 1]
    )
    proba = PooledForestClassifier(forest, strategy="fpv").predict_proba(X)
    assert np.mean((proba[:, 1] > 0.5) == y) > 0.7
    with pytest.raises(ValueError, match=r"columns \['x3'\] have no public range"):
        fit_dp_forest(X, y, {k: RANGES[k] for k in NUMERIC[:3]}, {"cat": LEVELS}, 2, 2, 1.0)
    with pytest.raises(ValueError, match="max_depth"):
        fit_dp_forest(X, y, RANGES, {"cat": LEVELS}, 2, 0, 1.0)


def test_dp_budget_and_dp_mode_withholds_unprotected_parts():
    policy = PrivacyPolicy.from_dict({"dp_epsilon": 2.0}, "job.yaml")
    assert policy.share == {
        "imputers": False,
        "feature_std": False,
        "surrogates": False,
        "intersection": True,
    }
    assert dp_budget(policy, intersection=True) == {"forest": 1.0, "intersection": 1.0}
    assert dp_budget(policy, intersection=False) == {"forest": 2.0}
    assert dp_budget(PrivacyPolicy(), intersection=True) == {}
    assert (policy.n_dp_trees, policy.dp_depth) == (10, 4)
    with pytest.raises(ValueError, match="fit_dp_forest"):
        prepare_forest(hand_forest(4), policy)
