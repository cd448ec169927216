"""The version 2 pooled-forest payload: preorder trees, leaf counts, round trips, size.

Round trips of real scikit-learn forests must give back every array bit for bit
and every strategy's probabilities bit for bit; the reader must refuse what is
malformed before it allocates anything large.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

from fedforest import STRATEGIES, PayloadError, PooledForest, fit_imputers, fit_surrogates
from fedforest.federation.results import payload_bytes
from fedforest.model import forest_format as ff
from fedforest.model.payload_checks import MAX_NODES
from fedforest.privacy.dp_forest import fit_dp_forest
from fedforest.privacy.transforms import add_count_noise, enforce_min_leaf_rows

from .hostile import parts
from .same import assert_same_arrays, assert_same_predictions


# ------------------------------------------------------------------ structure
def test_preorder_links_rebuild_the_children():
    # tree 0: 0 -> (1, 4), 1 -> (2, 3); tree 1: a single leaf; tree 2: 6 -> (7, 8)
    is_leaf = np.array([0, 0, 1, 1, 1, 1, 0, 1, 1], bool)
    valid, left, right, end = ff.preorder_links(np.array([0, 5, 6, 9]), is_leaf)
    assert valid.tolist() == [True, True, True]
    assert left.tolist() == [1, 2, -1, -1, -1, -1, 7, -1, -1]
    assert right.tolist() == [4, 3, -1, -1, -1, -1, 8, -1, -1]
    assert end.tolist() == [5, 4, 3, 4, 5, 6, 9, 8, 9]


@pytest.mark.parametrize(
    "bits, starts, bad",
    [
        ([0, 1, 1, 1], [0, 4], [0]),  # closes after 3 nodes: one node too many
        ([0, 0, 1, 1], [0, 4], [0]),  # never closes
        ([0, 0, 0, 0], [0, 4], [0]),  # every node internal
        ([1, 0, 1, 1], [0, 1, 4], []),  # two good trees
        ([1, 0, 1, 1], [0, 2, 4], [0, 1]),  # a boundary in the wrong place breaks both
        ([1, 1, 1], [0, 3], [0]),  # three leaves are no tree
    ],
)
def test_preorder_links_flag_flags_that_are_not_trees(bits, starts, bad):
    valid, *_ = ff.preorder_links(np.array(starts), np.array(bits, bool))
    assert np.flatnonzero(~valid).tolist() == bad


# ------------------------------------------------------------------ round trips
def _round_trip(forest: PooledForest) -> PooledForest:
    payload = forest.to_payload()
    assert payload["version"] == 4
    back = PooledForest.from_payload(payload, sender="site-9")
    again = back.to_payload()  # a second round trip writes the very same payload
    for key, value in payload.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == again[key].dtype and np.array_equal(value, again[key]), key
        else:
            assert value == again[key], key
    return back


def test_a_real_forest_with_categories_missing_values_and_surrogates_round_trips():
    p = parts()
    forest = p["forest"]
    assert forest.categories and forest.saw_missing.any() and (forest.surrogate_feature >= 0).any()
    back = _round_trip(forest)
    assert_same_arrays(back, forest)
    assert forest.to_payload()["value_trees"].size == 0  # every tree sent as counts
    checked = assert_same_predictions(back, forest, p["imputers"], p["feature_std"])
    assert checked == 3 * len(STRATEGIES) * 2  # frames x strategies x votings
    inter = p["intersection"]
    assert_same_arrays(_round_trip(inter), inter)


def _table(n=400, classes=3, seed=0):
    rng = np.random.RandomState(seed)
    X = pd.DataFrame(rng.normal(size=(n, 5)), columns=[f"x{i}" for i in range(5)])
    X["c"] = rng.randint(0, 4, n).astype(float)
    score = X["x0"] - X["x1"] + 0.5 * X["c"] + rng.normal(scale=0.5, size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    X.loc[rng.rand(n) < 0.1, "x2"] = np.nan
    return X, y


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestClassifier(n_estimators=8, random_state=0),
        lambda: RandomForestClassifier(n_estimators=8, min_samples_leaf=7, random_state=1),
        lambda: RandomForestClassifier(n_estimators=8, max_depth=3, random_state=2),
        lambda: RandomForestClassifier(n_estimators=6, max_samples=0.5, random_state=3),
        lambda: RandomForestClassifier(n_estimators=6, class_weight="balanced", random_state=4),
        lambda: RandomForestClassifier(n_estimators=6, max_leaf_nodes=12, random_state=5),
        lambda: ExtraTreesClassifier(n_estimators=6, random_state=6),
    ],
    ids=["grown", "min_leaf", "shallow", "max_samples", "class_weight", "best_first", "extra"],
)
@pytest.mark.parametrize("classes", [2, 3, 5])
def test_scikit_learn_forests_round_trip_and_predict_bit_for_bit(make, classes):
    X, y = _table(classes=classes)
    labels = np.array([f"class-{k}" for k in range(classes)])[y]
    rf = make().fit(X.to_numpy(np.float32), labels)
    cats = {"c": ["a", "b", "c", "d"]}
    forest = PooledForest.from_sklearn(rf, list(X.columns), "site-1", X=X, categories=cats)
    forest = fit_surrogates(forest, X, ["x0", "x1", "c"], min_agreement=0.0, min_rows=2)
    imputers = fit_imputers(X, ["x2", "x3", "x4"], ["x0", "x1"], owner="site-1", cv=None)
    std = {c: float(X[c].std(ddof=0)) for c in X.columns if c != "c"}
    back = _round_trip(forest)
    if type(rf).__name__ == "RandomForestClassifier" and rf.max_leaf_nodes is not None:
        # best-first trees are not in preorder: the same trees, renumbered
        assert not np.array_equal(back.children_left, forest.children_left)
        assert_same_arrays(back, _round_trip(back))
    else:
        assert_same_arrays(back, forest)
    assert assert_same_predictions(back, forest, imputers, std) == 3 * len(STRATEGIES) * 2


def test_pooled_forests_with_classes_a_site_never_saw_round_trip():
    X, y = _table(classes=3)
    a = RandomForestClassifier(n_estimators=4, random_state=0).fit(X[y < 2], y[y < 2])
    b = RandomForestClassifier(n_estimators=4, random_state=1).fit(X[y > 0], y[y > 0])
    pooled = PooledForest.concat(
        [
            PooledForest.from_sklearn(a, list(X.columns), "a", X=X[y < 2]),
            PooledForest.from_sklearn(b, list(X.columns), "b", X=X[y > 0]),
        ]
    )
    back = _round_trip(pooled)
    assert_same_arrays(back, pooled)
    assert pooled.to_payload()["value_trees"].size == 0
    assert assert_same_predictions(back, pooled, strategies=("fpv", "pr", "park")) == 18


def test_distributions_that_are_not_count_ratios_are_sent_as_float64():
    X, y = _table(classes=2)
    rf = RandomForestClassifier(n_estimators=6, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, list(X.columns), "s", X=X)
    noisy = enforce_min_leaf_rows(add_count_noise(forest, 1.0, random_state=0), 3)
    payload = noisy.to_payload()
    assert payload["value_trees"].size == noisy.n_trees  # Laplace noise: no counts
    assert payload["value"].shape == (noisy.n_nodes, 2)
    back = _round_trip(noisy)
    assert_same_arrays(back, noisy)
    assert assert_same_predictions(back, noisy, strategies=("fpv", "mp")) == 12
    # a mix: some trees as counts, some as float64
    mixed = PooledForest.concat([forest, noisy.select_trees(np.arange(noisy.n_trees) < 2)])
    payload = mixed.to_payload()
    assert payload["value_trees"].tolist() == [6, 7]
    assert_same_arrays(_round_trip(mixed), mixed)


def test_differentially_private_forests_round_trip():
    X, y = _table(classes=2)
    X = X.drop(columns="x2")
    ranges = {c: (-5.0, 5.0) for c in X.columns if c != "c"}
    forest = fit_dp_forest(
        X,
        y,
        ranges,
        {"c": ["a", "b", "c", "d"]},
        n_trees=5,
        max_depth=3,
        epsilon=1.0,
        random_state=0,
        noise_state=0,
    )
    back = _round_trip(forest)
    assert_same_arrays(back, forest)
    assert assert_same_predictions(back, forest, strategies=("fpv", "pr")) == 12


def test_a_hand_made_forest_round_trips(two_site_forest):
    forest = two_site_forest[0]
    weird = PooledForest(
        **{
            **{k: getattr(forest, k) for k in ("feature_names", "classes", "owners", "categories")},
            **{k: getattr(forest, k) for k in ("tree_start", "tree_owner", "missing_left")},
            **{k: getattr(forest, k) for k in ("children_left", "children_right", "feature")},
            "threshold": forest.threshold * np.pi,  # thresholds with every bit used
            "n_node_samples": forest.n_node_samples + 3 * (forest.feature >= 0),  # no sums
            "saw_missing": forest.feature >= 0,
            "value": np.where(forest.feature[:, None] >= 0, 0.5, forest.value),
        }
    )
    payload = weird.to_payload()
    assert payload["samples_delta"].size > 0.3 * payload["feature"].size
    assert payload["threshold_exact_at"].size > 0.5 * payload["threshold"].size
    assert_same_arrays(_round_trip(weird), weird)


# ------------------------------------------------------------------ size
def _bench_forest(seed=0):
    """Like benchmarks/bench_inference.py, smaller: fully grown trees on 20 features."""
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=2000, n_features=20, n_informative=10, n_redundant=4, random_state=seed
    )
    names = [f"f{i:02d}" for i in range(20)]
    frame = pd.DataFrame(X, columns=names)
    rf = RandomForestClassifier(n_estimators=20, random_state=seed).fit(frame, y)
    forest = PooledForest.from_sklearn(rf, names, owner="site-1")
    return fit_surrogates(forest, frame, names[:10])


def test_a_pooled_forest_takes_at_most_16_bytes_per_node():
    forest = _bench_forest()
    payload = forest.to_payload()
    per_node = payload_bytes(payload) / forest.n_nodes
    assert per_node <= 16, per_node
    from .v1_payloads import v1_payload

    assert payload_bytes(v1_payload(forest)) / forest.n_nodes > 4 * per_node


# ------------------------------------------------------------------ hostile payloads
def test_a_huge_node_count_is_refused_before_anything_is_allocated():
    payload = _bench_forest().to_payload()
    for starts in ([0, MAX_NODES], [0, 10, MAX_NODES]):
        bad = dict(payload, tree_start=np.array(starts), tree_owner=np.zeros(len(starts) - 1))
        start = time.perf_counter()
        with pytest.raises(PayloadError, match="field 'tree_owner'|field 'leaf_bits'"):
            PooledForest.from_payload(bad, "site-3")
        assert time.perf_counter() - start < 1.0
    bad = dict(payload, tree_start=np.array([0, MAX_NODES + 1]))
    with pytest.raises(PayloadError, match="field 'tree_start'"):
        PooledForest.from_payload(bad, "site-3")


def test_flags_that_never_close_a_tree_are_refused_at_any_size():
    payload = _bench_forest().to_payload()
    n = int(payload["tree_start"][-1])
    for bits in (np.zeros(n, bool), np.ones(n, bool)):  # all internal / all leaves
        bad = dict(payload, leaf_bits=np.packbits(bits))
        with pytest.raises(PayloadError, match="field 'leaf_bits' does not describe tree 0"):
            PooledForest.from_payload(bad, "site-3")


@pytest.mark.parametrize(
    "field, change",
    [
        ("feature", lambda a: a[:-1]),
        ("threshold", lambda a: a[:-1]),
        ("leaf_samples", lambda a: a[:-1]),
        ("leaf_counts", lambda a: a[:-1]),
        ("surrogate_agreement", lambda a: a[:-1]),
        ("missing_left", lambda a: a[:-1]),
    ],
)
def test_every_field_is_checked_before_the_trees_are_rebuilt(monkeypatch, field, change):
    """Only leaf flags, however many nodes they announce, never make the reader build trees:
    every field must first be as long as the flags say."""
    payload = _bench_forest().to_payload()

    def not_yet(*args, **kwargs):
        raise AssertionError("the trees were rebuilt before every field was checked")

    monkeypatch.setattr(ff, "preorder_links", not_yet)
    with pytest.raises(PayloadError, match=f"field {field!r}"):
        PooledForest.from_payload(dict(payload, **{field: change(payload[field])}), "site-3")
