"""The bootstrap samples of a scikit-learn forest and the site's in-bag record of its trees."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from fedforest.model.forest import PooledForest
from fedforest.model.in_bag import (
    InBagRecord,
    sample_counts,
    tagged_by_tree,
    tree_fingerprints,
    tree_origin,
)
from fedforest.privacy.transforms import bootstrap_weights, enforce_min_leaf_rows


def table(n=150, seed=0):
    rng = np.random.RandomState(seed)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    y = (X["a"] - X["b"] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, y


@pytest.mark.parametrize("max_samples", [None, 0.4, 37])
def test_sample_counts_are_scikit_learns_bootstrap_samples(max_samples):
    X, y = table()
    rf = RandomForestClassifier(n_estimators=6, max_samples=max_samples, random_state=3)
    rf.fit(X, y, sample_weight=None)
    counts = sample_counts(rf, len(X))
    expected = np.stack([np.bincount(s, minlength=len(X)) for s in rf.estimators_samples_])
    assert counts.dtype == np.int64 and np.array_equal(counts, expected)
    size = len(X) if max_samples is None else (37 if max_samples == 37 else 60)
    assert (counts.sum(axis=1) == size).all()
    # the rows scikit-learn's OOB score leaves to each tree are the rows counted 0
    oob = RandomForestClassifier(
        n_estimators=6, max_samples=max_samples, random_state=3, oob_score=True
    ).fit(X, y)
    has_oob = (counts == 0).any(axis=0)
    assert np.array_equal(np.isnan(oob.oob_decision_function_).any(axis=1) | ~has_oob, ~has_oob)
    assert np.array_equal(bootstrap_weights(rf, len(X)), counts)


def test_without_bootstrap_every_row_counts_once_in_every_tree():
    X, y = table()
    rf = RandomForestRegressor(n_estimators=3, bootstrap=False, random_state=0).fit(X, y)
    assert np.array_equal(sample_counts(rf, len(X)), np.ones((3, len(X)), np.int64))


def test_sample_counts_refuse_another_number_of_rows():
    X, y = table()
    rf = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="n_rows=100, but the forest was fitted on 150 rows"):
        sample_counts(rf, 100)


@pytest.fixture(scope="module")
def two_sites():
    """s1's trees on columns (b, a); s2's on (a, c, b) with a third class."""
    X, y = table()
    rf1 = RandomForestClassifier(n_estimators=8, max_depth=4, random_state=1)
    rf1.fit(X[["b", "a"]], y)
    f1 = PooledForest.from_sklearn(rf1, ["b", "a"], owner="s1")
    y3 = np.where(X["c"] > 1, 2, y)
    rf2 = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=2)
    rf2.fit(X[["a", "c", "b"]], y3)
    f2 = PooledForest.from_sklearn(rf2, ["a", "c", "b"], owner="s2")
    counts = sample_counts(rf1, len(X))
    return f1, f2, InBagRecord.build("s1", f1, counts), counts > 0


def test_the_record_finds_the_sites_trees_after_pooling_and_a_payload(two_sites):
    f1, f2, record, in_bag = two_sites
    # another site first, features renumbered, classes widened, and back from a payload
    pooled = PooledForest.from_payload(PooledForest.concat([f2, f1]).to_payload())
    matrix = record.matrix(pooled)
    assert matrix.shape == (13, 150) and matrix.dtype == bool
    assert not matrix[:5].any()  # s2's trees never saw s1's rows
    assert np.array_equal(matrix[5:], in_bag)
    assert tree_fingerprints(pooled)[5:] == record.fingerprints
    # trees in another order: each still finds its own row
    order = np.r_[12, 5:12, 0:5]
    shuffled = PooledForest.concat([pooled.select_trees(np.arange(13) == t) for t in order])
    assert np.array_equal(record.matrix(shuffled), matrix[order])


def test_a_tree_changed_after_the_record_counts_as_trained_on_every_row(two_sites, caplog):
    f1, f2, record, in_bag = two_sites
    first = np.arange(8) < 2
    # two trees pruned after the record was made, as a privacy filter would
    pruned = PooledForest.concat(
        [enforce_min_leaf_rows(f1.select_trees(first), 30), f1.select_trees(~first), f2]
    )
    assert tree_fingerprints(pruned)[:2] != record.fingerprints[:2]
    with caplog.at_level(logging.WARNING):
        matrix = record.matrix(pruned)
    assert "2 of its 8 trees in the forest match no entry" in caplog.text
    assert matrix[:2].all()
    assert np.array_equal(matrix[2:8], in_bag[2:]) and not matrix[8:].any()


def test_a_dropped_tree_leaves_its_entry_unused(two_sites):
    f1, f2, record, in_bag = two_sites
    keep = np.arange(8) % 3 != 0
    matrix = record.matrix(PooledForest.concat([f1.select_trees(keep), f2]))
    assert np.array_equal(matrix[: keep.sum()], in_bag[keep])


def test_a_record_of_another_forest_is_refused(two_sites):
    f1, f2, record, _ = two_sites
    X, y = table(seed=9)
    other = PooledForest.from_sklearn(
        RandomForestClassifier(n_estimators=3, random_state=0).fit(X[["b", "a"]], y),
        ["b", "a"],
        owner="s1",
    )
    with pytest.raises(ValueError, match="matches none of the forest's 3 trees of 's1'"):
        record.matrix(other)
    assert not record.matrix(f2).any()  # a forest without s1's trees: none trained on them
    with pytest.raises(ValueError, match=r"counts must have shape \(8, n_rows\)"):
        InBagRecord.build("s1", f1, np.ones((3, 150)))
    with pytest.raises(ValueError, match="must be a bool array"):
        InBagRecord("s1", record.fingerprints, np.ones((8, 150), int))


def test_equal_trees_are_matched_in_the_order_they_come():
    X = pd.DataFrame({"a": np.arange(40.0)})
    y = (X["a"] > 19).astype(int)
    # stumps on a clean split: every tree is the same, their samples are not
    rf = RandomForestClassifier(n_estimators=4, max_depth=1, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, ["a"], owner="s1")
    counts = sample_counts(rf, 40)
    record = InBagRecord.build("s1", forest, counts)
    assert np.array_equal(record.matrix(forest), counts > 0)


def test_trees_are_followed_through_a_transform_that_drops_some(two_sites):
    f1, *_ = two_sites
    tagged = tagged_by_tree(f1)
    keep = np.array([True, False, True, True, False, True, True, True])
    forest, origin = tree_origin(tagged.select_trees(keep), "s1")
    assert origin.tolist() == np.flatnonzero(keep).tolist()
    assert forest.owners == ["s1"] and (forest.tree_owner == 0).all()
    assert forest.to_payload().keys() == f1.to_payload().keys()
    same, _ = tree_origin(tagged, "s1")
    for key, value in f1.to_payload().items():
        other = same.to_payload()[key]
        assert np.array_equal(value, other) if isinstance(value, np.ndarray) else value == other
