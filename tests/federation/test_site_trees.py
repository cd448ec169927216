"""Which trees a site evaluates under ``evaluation.trees_per_site``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest
from fedforest.federation.site_trees import forest_for_site, reachable_share, trees_for_site

NAMES = [f"f{i}" for i in range(6)]


@pytest.fixture(scope="module")
def pooled():
    """Three sites' forests on different columns, one trained with missing values."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 6)), columns=NAMES)
    y = (X.f0 + X.f1 - X.f4 > 0).astype(int)
    X_nan = X.copy()
    X_nan.loc[rng.random(400) < 0.3, "f4"] = np.nan  # learned directions for missing f4
    forests = []
    for k, (site, cols, table) in enumerate(
        [("a", NAMES[:4], X), ("b", NAMES[2:], X_nan), ("c", NAMES, X)]
    ):
        rf = RandomForestClassifier(8, max_depth=5, random_state=k).fit(table[cols], y)
        forests.append(PooledForest.from_sklearn(rf, cols, owner=site))
    return PooledForest.concat(forests)


def naive_share(forest: PooledForest, columns) -> np.ndarray:
    """Node by node: the share of a tree's training rows that reach a leaf on ``columns``."""
    left, right = forest.global_children
    out = np.zeros(forest.n_trees)
    for t in range(forest.n_trees):
        stack = [(int(forest.tree_start[t]), 1.0)]
        while stack:
            node, share = stack.pop()
            f = forest.feature[node]
            if f < 0:
                out[t] += share
            elif forest.feature_names[f] in columns:
                n = forest.n_node_samples
                stack.append((int(left[node]), share * n[left[node]] / n[node]))
                stack.append((int(right[node]), share * n[right[node]] / n[node]))
            elif forest.saw_missing[node]:
                child = left[node] if forest.missing_left[node] else right[node]
                stack.append((int(child), share))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_reachable_share_follows_the_node_counts(pooled, seed):
    rng = np.random.default_rng(seed)
    columns = [c for c in NAMES if rng.random() < 0.5]
    share = reachable_share(pooled, columns)
    assert np.allclose(share, naive_share(pooled, columns), rtol=0, atol=1e-12)
    assert np.all((share >= 0) & (share <= 1))
    assert np.allclose(reachable_share(pooled, NAMES), 1.0)
    assert np.array_equal(reachable_share(pooled, []), naive_share(pooled, []))


def test_a_learned_direction_for_missing_values_is_followed(pooled):
    on_f4 = [t for t in range(pooled.n_trees) if pooled.tree_owner[t] == 1]
    learned = pooled.saw_missing & (pooled.feature == pooled.feature_names.index("f4"))
    assert learned.any()
    without_f4 = reachable_share(pooled, [c for c in NAMES if c != "f4"])
    trees = np.unique(pooled.tree_of_node[learned])
    assert set(trees) <= set(on_f4) and np.all(without_f4[trees] > 0)


def ranked(forest, owner, share):
    """An owner's trees, best reached first (ties by pooled order), unreached last."""
    trees = np.flatnonzero(forest.owner_mask(owner))
    trees = trees[np.argsort(-share[trees], kind="stable")]
    return [t for t in trees if share[t] > 0] + [t for t in trees if share[t] <= 0]


@pytest.mark.parametrize("cap", [1, 8, 10, 13, 16, 23])
def test_a_site_keeps_its_own_trees_and_the_others_take_turns(pooled, cap):
    columns = NAMES[:4]  # site a's
    mask = trees_for_site(pooled, "a", columns, cap)
    own = pooled.owner_mask("a")
    assert np.all(mask[own])
    assert mask.sum() == max(cap, own.sum())
    share = reachable_share(pooled, columns)
    kept = {}
    for owner in ("b", "c"):
        order = ranked(pooled, owner, share)
        k = int(mask[pooled.owner_mask(owner)].sum())
        # each owner gives its best reached trees first
        assert set(np.flatnonzero(mask & pooled.owner_mask(owner))) == set(order[:k])
        kept[owner] = (k, sum(share[t] > 0 for t in order))
    # turns: while both still have reached trees, neither is more than one tree ahead
    (kb, rb), (kc, rc) = kept["b"], kept["c"]
    if kb < rb and kc < rc:
        assert abs(kb - kc) <= 1


def test_a_site_that_looks_reachable_everywhere_gets_only_its_turn():
    """Site z's trees use only columns every site has (share 1 everywhere, as inflated
    node counts would make them look): ranked by share alone it would fill all 8 places
    left at site a; taking turns, it gets 4 while site b still has reached trees."""
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(300, 6)), columns=NAMES)
    y = (X.f0 + X.f2 > 0).astype(int)
    parts = []
    for k, (site, cols) in enumerate([("a", NAMES[:3]), ("b", NAMES[:4]), ("z", NAMES[:2])]):
        rf = RandomForestClassifier(8, max_depth=4, random_state=k).fit(X[cols], y)
        parts.append(PooledForest.from_sklearn(rf, cols, owner=site))
    pooled = PooledForest.concat(parts)
    share = reachable_share(pooled, NAMES[:3])  # site a's columns
    z, b = share[pooled.owner_mask("z")], share[pooled.owner_mask("b")]
    assert np.allclose(z, 1.0) and np.all(b < z.min() - 1e-9)
    reached_b = int((b > 0).sum())
    assert reached_b >= 4
    mask = trees_for_site(pooled, "a", NAMES[:3], 16)
    assert mask[pooled.owner_mask("z")].sum() == 4 and mask[pooled.owner_mask("b")].sum() == 4


def test_no_cap_or_a_cap_above_the_pool_keeps_every_tree(pooled):
    for cap in (None, pooled.n_trees, pooled.n_trees + 5):
        assert trees_for_site(pooled, "b", NAMES[2:], cap).all()
        assert forest_for_site(pooled, "b", NAMES[2:], cap) is pooled


def test_a_site_without_trees_gets_the_best_reached_trees_only(pooled):
    mask = trees_for_site(pooled, "newcomer", NAMES[:4], 5)
    assert mask.sum() == 5


def test_the_site_forest_is_the_pooled_forest_restricted(pooled):
    sub = forest_for_site(pooled, "c", NAMES[:3], 12)
    mask = trees_for_site(pooled, "c", NAMES[:3], 12)
    assert sub.n_trees == 12 and sub.owners == pooled.owners
    assert np.array_equal(sub.tree_owner, pooled.tree_owner[mask])
    X = pd.DataFrame(np.random.default_rng(1).normal(size=(20, 6)), columns=NAMES)
    from fedforest import PooledForestClassifier

    full = PooledForestClassifier(pooled.select_trees(mask), strategy="fpv").predict_proba(X)
    assert np.array_equal(PooledForestClassifier(sub, strategy="fpv").predict_proba(X), full)
