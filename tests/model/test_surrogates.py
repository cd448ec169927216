from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest.model import traversal
from fedforest.model.forest import PooledForest
from fedforest.model.surrogates import fit_surrogates


# ----------------------------------------------------------------- helpers
def _reach(forest: PooledForest, Xg: np.ndarray) -> dict[int, list[int]]:
    """Rows reaching every global node, routed one row at a time (reference)."""
    reach: dict[int, list[int]] = {}
    for t in range(forest.n_trees):
        base = int(forest.tree_start[t])
        for r in range(Xg.shape[0]):
            node = base
            while True:
                reach.setdefault(node, []).append(r)
                f = forest.feature[node]
                if f < 0:
                    break
                x = Xg[r, f]
                if np.isnan(x):
                    if not forest.saw_missing[node]:
                        break
                    left = bool(forest.missing_left[node])
                else:
                    left = bool(x <= forest.threshold[node])
                child = forest.children_left[node] if left else forest.children_right[node]
                node = base + int(child)
    return reach


def _brute_force(forest, Xg, shared_idx, min_agreement, min_rows):
    """Loop over nodes, candidate features and thresholds."""
    n = forest.n_nodes
    feat = np.full(n, -1)
    thr = np.zeros(n)
    le = np.ones(n, bool)
    agr = np.zeros(n)
    reach = _reach(forest, Xg)
    for node, rows in reach.items():
        f = forest.feature[node]
        if f < 0 or f in shared_idx:
            continue
        rows = [r for r in rows if not np.isnan(Xg[r, f])]
        best = None
        for j in sorted(shared_idx):
            rr = [r for r in rows if not np.isnan(Xg[r, j])]
            if len(rr) < min_rows:
                continue
            prim = Xg[rr, f] <= forest.threshold[node]
            xj = Xg[rr, j].astype(np.float64)
            n_tot = len(rr)
            n_left = int(prim.sum())
            n_maj = max(n_left, n_tot - n_left)
            if n_tot == n_maj:
                continue
            vals = np.unique(xj)
            for a, b in zip(vals[:-1], vals[1:], strict=True):
                t = a / 2.0 + b / 2.0
                if t == b:
                    t = a
                agree_le = int(((xj <= t) == prim).sum())
                for orient, agree in ((True, agree_le), (False, n_tot - agree_le)):
                    adj = (agree - n_maj) / (n_tot - n_maj)
                    key = (adj, -j, -t, orient)
                    if best is None or key > best[0]:
                        best = (key, j, t, orient, adj)
        if best is not None and best[4] >= min_agreement:
            _, feat[node], thr[node], le[node], agr[node] = best
    return feat, thr, le, agr


def _goes_left(forest, Xg, node, rows):
    return Xg[rows, forest.feature[node]] <= forest.threshold[node]


def _surrogate_left(out, Xg, node, rows):
    xs = Xg[rows, out.surrogate_feature[node]]
    return (xs <= out.surrogate_threshold[node]) == out.surrogate_left_le[node]


def _copy_setup(sign: float, n=300, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n)
    X = pd.DataFrame({"s": s, "noise": rng.normal(size=n), "p": sign * s})
    y = (s + 0.5 * rng.normal(size=n) > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=8, max_depth=4, max_features=1, random_state=0)
    rf.fit(X, y)
    forest = PooledForest.from_sklearn(rf, list(X.columns), owner="s1")
    return X, forest


def _check_copy(sign: float, expect_left_le: bool):
    X, forest = _copy_setup(sign)
    out = fit_surrogates(forest, X, ["s", "noise"])
    Xg = X.to_numpy(dtype=np.float32)
    reach = _reach(forest, Xg)
    checked = 0
    for node in np.flatnonzero(forest.feature == 2):
        rows = reach.get(int(node), [])
        primary = _goes_left(forest, Xg, node, rows)
        if len(rows) < 6 or primary.all() or not primary.any():
            assert out.surrogate_feature[node] == -1
            continue
        assert out.surrogate_feature[node] == 0
        assert out.surrogate_agreement[node] == 1.0
        assert out.surrogate_left_le[node] == expect_left_le
        np.testing.assert_array_equal(_surrogate_left(out, Xg, node, rows), primary)
        checked += 1
    assert checked >= 5
    assert np.all(out.surrogate_feature[forest.feature == 0] == -1)
    assert np.all(out.surrogate_feature[forest.feature == 1] == -1)
    assert np.all(out.surrogate_feature[forest.feature < 0] == -1)


# ------------------------------------------------------------------- tests
def test_exact_copy_gets_perfect_surrogate():
    _check_copy(1.0, expect_left_le=True)


def test_reversed_copy_gets_reversed_orientation():
    _check_copy(-1.0, expect_left_le=False)


def test_noise_gives_no_surrogate():
    rng = np.random.default_rng(1)
    n = 800
    X = pd.DataFrame({"n1": rng.normal(size=n), "n2": rng.normal(size=n), "p": rng.normal(size=n)})
    y = (X["p"] > 0.2).astype(int)
    rf = RandomForestClassifier(n_estimators=5, max_depth=2, max_features=None, random_state=0)
    forest = PooledForest.from_sklearn(rf.fit(X, y), list(X.columns), owner="s1")
    out = fit_surrogates(forest, X, ["n1", "n2"])
    reach = _reach(forest, X.to_numpy(dtype=np.float32))
    big = [nd for nd in np.flatnonzero(forest.feature == 2) if len(reach[int(nd)]) >= 100]
    assert big
    for nd in big:
        assert out.surrogate_feature[nd] == -1
        assert out.surrogate_agreement[nd] == 0.0
    # a negative minimum accepts the best (poor) candidate everywhere it can be computed
    loose = fit_surrogates(forest, X, ["n1", "n2"], min_agreement=-1.0)
    assert all(loose.surrogate_feature[nd] in (0, 1) for nd in big)
    assert all(loose.surrogate_agreement[nd] < 0.25 for nd in big)


@pytest.mark.parametrize(("with_nan", "max_pairs"), [(False, None), (True, None), (True, 300)])
def test_matches_brute_force(with_nan, max_pairs, monkeypatch):
    if max_pairs is not None:  # several chunks of trees (2 trees of 150 rows per chunk)
        monkeypatch.setattr(traversal, "MAX_PAIRS", max_pairs)
    rng = np.random.default_rng(7)
    n = 150
    Z = rng.normal(size=(n, 5))
    names = ["s1", "s2", "s3", "p1", "p2"]
    Z[:, 3] = Z[:, 0] + 0.7 * rng.normal(size=n)  # private features correlated with shared
    Z[:, 4] = np.round(Z[:, 1] - Z[:, 2], 1)  # ties among values
    Z[:, 2] = np.round(Z[:, 2], 1)
    y = (Z[:, 3] + Z[:, 4] + 0.5 * rng.normal(size=n) > 0).astype(int)
    if with_nan:
        Z[rng.random(size=Z.shape) < 0.08] = np.nan
    X = pd.DataFrame(Z, columns=names)
    rf = RandomForestClassifier(n_estimators=5, max_depth=5, random_state=3).fit(Z, y)
    forest = PooledForest.from_sklearn(rf, names, owner="s1", X=Z if with_nan else None)
    if with_nan:
        assert forest.saw_missing.any()
    # X in a different column order: matched by name
    out = fit_surrogates(forest, X[names[::-1]], ["s1", "s2", "s3"], min_agreement=0.1)
    Xg = Z.astype(np.float32)
    feat, thr, le, agr = _brute_force(forest, Xg, {0, 1, 2}, 0.1, 6)
    assert (feat >= 0).sum() >= 5
    np.testing.assert_array_equal(out.surrogate_feature, feat)
    np.testing.assert_allclose(out.surrogate_threshold, thr)
    np.testing.assert_array_equal(out.surrogate_left_le, le)
    np.testing.assert_allclose(out.surrogate_agreement, agr)
    # the result travels
    back = PooledForest.from_payload(out.to_payload(), sender="s1")
    np.testing.assert_array_equal(back.surrogate_feature, feat)


def test_input_forest_unchanged_and_min_rows():
    X, forest = _copy_setup(1.0)
    before = forest.surrogate_feature.copy()
    out = fit_surrogates(forest, X, ["s", "noise"], min_rows=10**6)
    np.testing.assert_array_equal(forest.surrogate_feature, before)
    assert np.all(out.surrogate_feature == -1)
    assert out.n_nodes == forest.n_nodes
    # every feature shared: nothing to do
    none = fit_surrogates(forest, X, ["s", "noise", "p"])
    assert np.all(none.surrogate_feature == -1)


def test_validation_errors():
    X, forest = _copy_setup(1.0)
    with pytest.raises(ValueError, match="'zz'"):
        fit_surrogates(forest, X, ["s", "zz"])
    with pytest.raises(ValueError, match="min_agreement"):
        fit_surrogates(forest, X, ["s"], min_agreement=1.5)
    with pytest.raises(ValueError, match="min_rows"):
        fit_surrogates(forest, X, ["s"], min_rows=0)
    with pytest.raises(ValueError, match=r"lacks columns \['p'\]"):
        fit_surrogates(forest, X[["s", "noise"]], ["s", "noise"])
    with pytest.raises(ValueError, match="does not know"):
        fit_surrogates(forest, X.assign(target=1), ["s", "noise"])
