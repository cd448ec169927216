"""Tree surgery on a pooled forest: with_arrays, prune (model/forest_edit.py), from_structure."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_tree_forest
from fedforest.model.forest import NODE_FIELDS, PooledForest
from fedforest.model.forest_edit import KEEP, LEAF, TO_LEFT, TO_RIGHT

NAMES = ["a", "b"]
#: root a <= 0 -> leaf | (b <= 1 -> leaf, leaf); a second tree: one split on b
TREES = [
    [
        ("split", "a", 0.0, 1, 2, 10, {"saw_missing": True}),
        ("leaf", [1.0, 0.0], 4),
        ("split", "b", 1.0, 3, 4, 6),
        ("leaf", [0.2, 0.8], 5),
        ("leaf", [0.0, 1.0], 1),
    ],
    [("split", "b", 2.0, 1, 2, 8), ("leaf", [0.5, 0.5], 3), ("leaf", [0.4, 0.6], 5)],
]


def forest() -> PooledForest:
    return make_tree_forest(TREES, NAMES, surrogates={0: ("b", 0.5, True)})


def test_with_arrays_replaces_only_what_it_is_given():
    f = forest()
    n = np.arange(1, f.n_nodes + 1)
    out = f.with_arrays(n_node_samples=n, threshold=f.threshold + 1)
    assert np.array_equal(out.n_node_samples, n) and np.array_equal(out.threshold, f.threshold + 1)
    for key in set(NODE_FIELDS) - {"n_node_samples", "threshold"}:
        assert np.array_equal(getattr(out, key), getattr(f, key)), key
    assert np.array_equal(out.value, f.value) and np.array_equal(out.tree_start, f.tree_start)
    with pytest.raises(ValueError, match="not per-node arrays"):
        f.with_arrays(tree_start=[0, 8])
    with pytest.raises(ValueError, match="differ in length"):
        f.with_arrays(threshold=np.zeros(3))


def test_prune_makes_a_leaf_replaces_by_a_child_and_drops_trees():
    f = forest()
    action = np.full(f.n_nodes, KEEP, np.int8)
    assert f.prune(action) is f
    action[0] = LEAF  # the first root becomes a leaf: it loses its split and its surrogate
    out = f.prune(action)
    assert out.n_trees == 2 and list(out.tree_start) == [0, 1, 4]
    assert out.feature[0] == -1 and out.threshold[0] == 0.0 and not out.saw_missing[0]
    assert out.surrogate_feature[0] == -1 and out.n_node_samples[0] == 10
    assert np.array_equal(out.value[0], f.value[0])
    action[0] = TO_RIGHT  # the first root is replaced by its right subtree, renumbered
    out = f.prune(action, keep_tree=np.array([True, False]))
    assert out.n_trees == 1 and list(out.n_node_samples) == [6, 5, 1]
    assert list(out.children_left) == [1, -1, -1] and list(out.children_right) == [2, -1, -1]
    action[0], action[5] = KEEP, TO_LEFT  # the second root is replaced by its left leaf
    out = f.prune(action)
    assert list(out.tree_start) == [0, 5, 6] and out.n_node_samples[5] == 3
    with pytest.raises(ValueError, match="no tree is left"):
        f.prune(action, keep_tree=np.zeros(2, bool))


def test_from_structure_has_one_row_per_node_and_uniform_classes():
    out = PooledForest.from_structure(
        feature_names=NAMES,
        classes=["x", "y", "z"],
        owner="s1",
        tree_start=[0, 3, 4],
        children_left=[1, -1, -1, -1],
        children_right=[2, -1, -1, -1],
        feature=[1, -1, -1, -1],
        threshold=[0.5, 0.0, 0.0, 0.0],
        missing_left=[True, False, False, False],
    )
    assert out.n_trees == 2 and out.owners == ["s1"] and list(out.tree_owner) == [0, 0]
    assert np.array_equal(out.n_node_samples, np.ones(4)) and not out.saw_missing.any()
    assert np.allclose(out.value, 1 / 3)
    PooledForest.from_payload(out.to_payload())  # a valid forest
