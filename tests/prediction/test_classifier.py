"""PooledForestClassifier: exactness against scikit-learn and every strategy by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.ensemble import RandomForestClassifier

from conftest import make_tree_forest
from fedforest import Imputer, ImputerSet, PooledForest, PooledForestClassifier, fit_imputers
from fedforest.prediction import pipeline as classifier_module
from fedforest.vocabulary import STRATEGIES

NAMES = ["a", "b", "c"]
CATS = {"c": ["x", "y", "z"]}

# T1: root on b (depth 0); right child splits on a.
T1 = [
    ("split", "b", 0.5, 1, 2, 100),
    ("leaf", [1.0, 0.0], 30),
    ("split", "a", 0.0, 3, 4, 70),
    ("leaf", [0.0, 1.0], 40),
    ("leaf", [0.2, 0.8], 30),
]
# T2: only a.
T2 = [
    ("split", "a", 0.0, 1, 2, 100),
    ("leaf", [0.9, 0.1], 55),
    ("leaf", [0.3, 0.7], 45),
]
# T3: categorical c, codes {x, y} left, {z} right.
T3 = [
    ("split", "c", 1.5, 1, 2, 100),
    ("leaf", [1.0, 0.0], 60),
    ("leaf", [0.0, 1.0], 40),
]
# T4: b, but the node saw missing values in training and learned "right".
T4 = [
    ("split", "b", 0.5, 1, 2, 100, {"saw_missing": True, "missing_left": False}),
    ("leaf", [1.0, 0.0], 50),
    ("leaf", [0.0, 1.0], 50),
]


def numeric_imputer(feature="b", slope=1.0, intercept=2.0, score=0.9):
    return Imputer(
        feature=feature,
        kind="numeric",
        predictors=["a"],
        intercept=np.array([intercept]),
        coef=np.array([slope]),
        center=np.array([0.0]),
        scale=np.ones(1),
        score=score,
        n_train=100,
        owner="s1",
    )


def categorical_imputer(probs=(0.2, 0.3, 0.5)):
    return Imputer(
        feature="c",
        kind="categorical",
        predictors=["a"],
        intercept=np.log(np.array(probs)),
        coef=np.zeros((3, 1)),
        center=np.zeros(1),
        scale=np.ones(1),
        levels=np.arange(3),
        n_levels=3,
        score=0.5,
        n_train=100,
        owner="s1",
    )


def rows(a_values, **cols):
    frame = pd.DataFrame({"a": np.asarray(a_values, dtype=float)})
    for k, v in cols.items():
        frame[k] = v
    return frame


def proba(forest, X, **params):
    clf = PooledForestClassifier(forest, **params)
    return clf.predict_proba(X), clf


# ----------------------------------------------------------------- by hand
def test_fpv_discards_a_tree_that_meets_an_unavailable_feature():
    forest = make_tree_forest([T1, T2], NAMES, categories=CATS)
    p, clf = proba(forest, rows([-1.0]), strategy="fpv")
    assert np.allclose(p, [[0.9, 0.1]])
    assert clf.diagnostics_.trees_kept.tolist() == [1]


def test_pr_discards_at_shallow_depth_and_routes_by_training_fractions_below():
    forest = make_tree_forest([T1, T2], NAMES, categories=CATS)
    p, clf = proba(forest, rows([-1.0]), strategy="pr", depth_threshold=2)
    assert np.allclose(p, [[0.9, 0.1]]) and clf.diagnostics_.trees_kept.tolist() == [1]
    n = 20000
    # distinct rows that all route alike where a is read (a <= 0): each draws its own coin
    a = np.linspace(-2.0, -1.0, n)
    p, clf = proba(forest, rows(a), strategy="pr", depth_threshold=0, random_state=0)
    went_right = np.isclose(p[:, 1], (1.0 + 0.1) / 2)
    went_left = np.isclose(p[:, 1], (0.0 + 0.1) / 2)
    assert np.all(went_right | went_left)
    assert abs(went_right.mean() - 0.7) < 0.015  # N_right / N_node = 70 / 100
    assert clf.diagnostics_.trees_kept.min() == 2
    # identical rows draw the same coin
    same, _ = proba(forest, rows(np.full(50, -1.0)), strategy="pr", depth_threshold=0)
    assert (same == same[0]).all()


def test_mi_routes_by_the_imputed_value():
    forest = make_tree_forest([T1, T2], NAMES, categories=CATS)
    imps = ImputerSet([numeric_imputer()])  # b = a + 2
    p, _ = proba(forest, rows([-1.0, -3.0]), strategy="mi", imputers=imps)
    # a=-1: b=1 > 0.5 goes right, then a <= 0 -> [0, 1]; a=-3: b=-1 goes left -> [1, 0]
    assert np.allclose(p, [[0.45, 0.55], [0.95, 0.05]])


def test_ipr_routes_with_sigmoid_probability():
    forest = make_tree_forest([T1, T2], NAMES, categories=CATS)
    imps = ImputerSet([numeric_imputer()])
    n = 20000
    a = np.linspace(-1.01, -0.99, n)  # distinct rows, each its own draw; the route of a <= 0
    p, _ = proba(
        forest, rows(a), strategy="ipr", imputers=imps, feature_std={"b": 2.0}, random_state=1
    )
    expected = expit((a + 2.0 - 0.5) / 2.0).mean()  # b imputed as a + 2
    went_right = np.isclose(p[:, 1], 0.55)
    assert abs(went_right.mean() - expected) < 0.015


def test_mp_weights_both_children():
    forest = make_tree_forest([T1, T2], NAMES, categories=CATS)
    # no imputer: N_right / N_node = 0.7
    p, clf = proba(forest, rows([-1.0]), strategy="mp")
    assert np.allclose(p, [[(0.3 + 0.9) / 2, (0.7 + 0.1) / 2]])
    assert clf.diagnostics_.trees_kept.tolist() == [2]
    # imputer: p_right = sigmoid((1 - 0.5) / 2)
    pr = expit(0.25)
    p, _ = proba(
        forest,
        rows([-1.0]),
        strategy="mp",
        imputers=ImputerSet([numeric_imputer()]),
        feature_std={"b": 2.0},
    )
    assert np.allclose(p, [[((1 - pr) + 0.9) / 2, (pr + 0.1) / 2]])


def test_ss_follows_the_surrogate_in_either_orientation():
    forest = make_tree_forest([T1, T2], NAMES, categories=CATS, surrogates={0: ("a", -0.5, True)})
    p, _ = proba(forest, rows([-1.0, 0.2]), strategy="ss")
    # a=-1 <= -0.5 -> left leaf [1,0]; a=0.2 -> right, then a > 0 -> [0.2, 0.8]
    assert np.allclose(p, [[0.95, 0.05], [(0.2 + 0.3) / 2, (0.8 + 0.7) / 2]])
    reversed_ = make_tree_forest(
        [T1, T2], NAMES, categories=CATS, surrogates={0: ("a", -0.5, False)}
    )
    p, _ = proba(reversed_, rows([-1.0]), strategy="ss")
    assert np.allclose(p, [[0.45, 0.55]])


def test_ss_without_surrogate_falls_back_to_pr():
    forest = make_tree_forest([T1, T2], NAMES, categories=CATS)
    p, clf = proba(forest, rows([-1.0]), strategy="ss", depth_threshold=1)
    assert np.allclose(p, [[0.9, 0.1]]) and clf.diagnostics_.trees_kept.tolist() == [1]


def test_node_stops_at_the_unresolvable_node_and_uses_its_distribution():
    # hand-built internal nodes hold a uniform distribution: T1 stops at its root
    # (b unavailable), T2 reaches a leaf, T4 follows its learned direction (right)
    forest = make_tree_forest([T1, T2, T4], NAMES, categories=CATS)
    for X in (rows([-1.0]), rows([-1.0], b=[np.nan])):  # absent column, NaN value
        p, clf = proba(forest, X, strategy="node", depth_threshold=0)
        assert np.allclose(p, [[(0.5 + 0.9 + 0.0) / 3, (0.5 + 0.1 + 1.0) / 3]])
        assert clf.diagnostics_.trees_kept.tolist() == [3]
        assert clf.diagnostics_.n_fallback == 0
        # hard: the root votes for the argmax of its distribution (the first class on a tie)
        p, _ = proba(forest, X, strategy="node", voting="hard")
        assert np.allclose(p, [[2 / 3, 1 / 3]])
    p, _ = proba(forest, rows([-1.0], b=[1.0]), strategy="node")  # b available: no stop
    assert np.allclose(p, [[(0.0 + 0.9 + 0.0) / 3, (1.0 + 0.1 + 1.0) / 3]])


def test_categorical_routing_with_imputer_probabilities():
    forest = make_tree_forest([T3], NAMES, categories=CATS)
    imps = ImputerSet([categorical_imputer((0.2, 0.3, 0.5))])
    # p_left = P(x) + P(y) = 0.5
    p, _ = proba(forest, rows([0.0]), strategy="mp", imputers=imps)
    assert np.allclose(p, [[0.5, 0.5]])
    # mi: most probable level z (code 2) > 1.5 -> right
    p, _ = proba(forest, rows([0.0]), strategy="mi", imputers=imps)
    assert np.allclose(p, [[0.0, 1.0]])
    n = 20000
    imps = ImputerSet([categorical_imputer((0.6, 0.2, 0.2))])
    # distinct rows (the imputer ignores a): each draws its own
    p, _ = proba(forest, rows(np.linspace(-1, 1, n)), strategy="ipr", imputers=imps, random_state=0)
    assert abs(p[:, 0].mean() - 0.8) < 0.015
    # an available categorical column given as level strings
    p, _ = proba(forest, rows([0.0, 0.0], c=["y", "z"]), strategy="fpv")
    assert np.allclose(p, [[1.0, 0.0], [0.0, 1.0]])


def test_node_that_saw_missing_values_follows_its_learned_direction():
    forest = make_tree_forest([T4], NAMES, categories=CATS)
    for strategy in ("fpv", "pr", "mp", "ss", "mi", "ipr", "node"):
        p, clf = proba(forest, rows([0.0]), strategy=strategy)
        assert np.allclose(p, [[0.0, 1.0]]), strategy
        assert clf.diagnostics_.n_fallback == 0
    # a NaN value in an available column behaves like an absent column
    p, _ = proba(forest, rows([0.0], b=[np.nan]), strategy="fpv")
    assert np.allclose(p, [[0.0, 1.0]])


def test_rows_with_every_tree_discarded_get_their_mp_prediction():
    forest = make_tree_forest([T1, T2], NAMES, categories=CATS)
    X = rows([-1.0, 0.5], b=[0.0, np.nan])
    X["a"] = [np.nan, np.nan]
    p, clf = proba(forest, X, strategy="fpv")
    assert clf.diagnostics_.fallback_rows.tolist() == [False, True]
    mp, _ = proba(forest, X, strategy="mp")
    assert np.allclose(p[1], mp[1])
    assert clf.diagnostics_.n_fallback == 1


def test_park_and_local_select_trees():
    forest = make_tree_forest(
        [T1, T2, T3], NAMES, categories=CATS, owners=["s1", "s2"], tree_owner=np.array([1, 0, 1])
    )
    X = rows([-1.0])
    p, clf = proba(forest, X, strategy="local", site="s1")
    assert np.allclose(p, [[0.9, 0.1]]) and clf.diagnostics_.trees_available == 1
    # park at s2 without b or c: its own T1 and T3 plus T2 (uses only a)
    p, clf = proba(forest, X, strategy="park", site="s2")
    assert clf.diagnostics_.trees_available == 3
    # park at s1 with a only: own T2; T1 and T3 need b / c
    p, clf = proba(forest, X, strategy="park", site="s1")
    assert clf.diagnostics_.trees_available == 1


def test_hard_voting_averages_one_hot_votes():
    forest = make_tree_forest([T2, T3], NAMES, categories=CATS)
    X = rows([1.0], c=[0])
    soft, _ = proba(forest, X, strategy="fpv")
    hard, _ = proba(forest, X, strategy="fpv", voting="hard")
    assert np.allclose(soft, [[0.65, 0.35]])
    assert np.allclose(hard, [[0.5, 0.5]])


# ------------------------------------------------------- real forests
@pytest.fixture(scope="module")
def real_forest(table):
    X, y = table
    rf = RandomForestClassifier(n_estimators=40, random_state=0).fit(X[:400], y[:400])
    return rf, PooledForest.from_sklearn(rf, list(X.columns), owner="s1"), X[400:], y[400:]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_equals_sklearn_with_every_feature(real_forest, strategy):
    rf, forest, X, _ = real_forest
    clf = PooledForestClassifier(
        forest, strategy=strategy, site="s1", random_state=0, guess_weight=0.3
    )
    assert np.array_equal(clf.predict_proba(X), rf.predict_proba(X))
    assert np.array_equal(clf.predict(X), rf.predict(X))
    assert np.array_equal(clf.predict_proba(X.to_numpy()), rf.predict_proba(X))


def test_pooled_forest_of_two_sites_equals_sklearn_on_all_features(table):
    X, y = table
    rf1 = RandomForestClassifier(n_estimators=10, random_state=1).fit(X[:300], y[:300])
    rf2 = RandomForestClassifier(n_estimators=10, random_state=2).fit(X[300:], y[300:])
    pooled = PooledForest.concat(
        [
            PooledForest.from_sklearn(rf1, list(X.columns), "s1"),
            PooledForest.from_sklearn(rf2, list(X.columns), "s2"),
        ]
    )
    rf1.estimators_ = rf1.estimators_ + rf2.estimators_
    for strategy in ("mp", "ipr", "fpv"):
        clf = PooledForestClassifier(pooled, strategy=strategy)
        assert np.array_equal(clf.predict_proba(X), rf1.predict_proba(X))


def test_local_equals_sklearn_on_rows_with_missing_values(table):
    X, y = table
    X = X.copy()
    rng = np.random.RandomState(5)
    X.loc[rng.rand(len(X)) < 0.2, "x1"] = np.nan
    rf = RandomForestClassifier(n_estimators=20, random_state=0).fit(X[:400], y[:400])
    forest = PooledForest.from_sklearn(rf, list(X.columns), owner="s1", X=X[:400])
    clf = PooledForestClassifier(forest, strategy="local", site="s1")
    assert np.array_equal(clf.predict_proba(X[400:]), rf.predict_proba(X[400:]))
    # rows whose NaNs met only nodes that saw NaN in training: fpv keeps every tree
    # and then equals scikit-learn
    fpv = PooledForestClassifier(forest, strategy="fpv")
    p = fpv.predict_proba(X[400:])
    full = fpv.diagnostics_.trees_kept == forest.n_trees
    assert full.any()
    assert np.array_equal(p[full], rf.predict_proba(X[400:])[full])


def test_hard_voting_matches_per_tree_predictions(real_forest):
    rf, forest, X, _ = real_forest
    clf = PooledForestClassifier(forest, strategy="fpv", voting="hard")
    votes = np.mean([est.predict(X.to_numpy()) for est in rf.estimators_], axis=0)
    assert np.allclose(clf.predict_proba(X)[:, 1], votes)


def test_same_seed_same_predictions_and_different_seeds_differ(real_forest):
    _, forest, X, _ = real_forest
    half = X[["x0", "x1", "x2"]]
    std = {c: 1.0 for c in X.columns}
    imps = ImputerSet([numeric_imputer(f, score=0.5) for f in ("x3", "x4", "x5")])
    for params in (
        dict(strategy="pr", depth_threshold=0),
        dict(strategy="ipr", depth_threshold=0, imputers=imps, feature_std=std),
    ):
        one = PooledForestClassifier(forest, random_state=7, **params).predict_proba(half)
        two = PooledForestClassifier(forest, random_state=7, **params).predict_proba(half)
        other = PooledForestClassifier(forest, random_state=8, **params).predict_proba(half)
        assert np.array_equal(one, two), params["strategy"]
        assert not np.array_equal(one, other), params["strategy"]


@pytest.mark.parametrize("strategy", ["fpv", "mi", "ss", "node", "park", "local"])
def test_compiled_and_numpy_engines_agree(real_forest, monkeypatch, strategy, table):
    _, forest, X, _ = real_forest
    Xt, _ = table
    from fedforest import fit_surrogates

    forest = fit_surrogates(forest, Xt[:400], ["x0", "x1", "x2"])
    imps = ImputerSet([numeric_imputer(f, score=0.5) for f in ("x3", "x4", "x5")])
    half = X[["x0", "x1", "x2"]]
    params = dict(strategy=strategy, imputers=imps, site="s1", depth_threshold=50)
    fast = PooledForestClassifier(forest, **params)
    p_fast = fast.predict_proba(half)
    assert fast.diagnostics_.engine == "compiled"
    monkeypatch.setattr(classifier_module.fastpath, "available", lambda: False)
    slow = PooledForestClassifier(forest, **params)
    p_slow = slow.predict_proba(half)
    assert slow.diagnostics_.engine == "numpy"
    assert np.array_equal(p_fast, p_slow)
    assert np.array_equal(fast.diagnostics_.trees_kept, slow.diagnostics_.trees_kept)


def test_strategies_beat_chance_with_missing_columns(two_site_forest, table):
    forest, _, _ = two_site_forest
    X, y = table
    from fedforest import score

    site_a = X[["x0", "x1", "x2", "x3"]][450:]
    for strategy in ("fpv", "pr", "mp", "park", "local"):
        clf = PooledForestClassifier(forest, strategy=strategy, site="a", random_state=0)
        assert score("auc", y[450:], clf.predict_proba(site_a), clf.classes_) > 0.75, strategy


# ---------------------------------------------------------------- errors
def test_bad_inputs_give_clear_errors(real_forest):
    _, forest, X, _ = real_forest
    clf = PooledForestClassifier(forest, strategy="fpv")
    with pytest.raises(ValueError, match="0 rows"):
        clf.predict_proba(X.iloc[:0])
    with pytest.raises(ValueError, match="non-numeric"):
        clf.predict_proba(X.assign(x0="high"))
    with pytest.raises(ValueError, match="duplicate"):
        clf.predict_proba(pd.concat([X, X[["x0"]]], axis=1))
    with pytest.raises(ValueError, match="one column per feature of the model, 6 "):
        clf.predict_proba(X.to_numpy()[:, :3])
    with pytest.raises(ValueError, match="infinite"):
        clf.predict_proba(X.assign(x0=np.inf))
    with pytest.raises(ValueError, match="strategy='magic'"):
        PooledForestClassifier(forest, strategy="magic").predict_proba(X)
    with pytest.raises(ValueError, match="voting"):
        PooledForestClassifier(forest, voting="most").predict_proba(X)
    with pytest.raises(ValueError, match="depth_threshold"):
        PooledForestClassifier(forest, depth_threshold=-1).predict_proba(X)
    with pytest.raises(ValueError, match="needs site"):
        PooledForestClassifier(forest, strategy="local").predict_proba(X)
    with pytest.raises(ValueError, match="owners"):
        PooledForestClassifier(forest, strategy="park", site="zz").predict_proba(X)
    with pytest.raises(ValueError, match="fit"):
        PooledForestClassifier(forest, strategy="auto").predict_proba(X)
    with pytest.raises(TypeError, match="PooledForest"):
        PooledForestClassifier("forest").predict_proba(X)


def test_unknown_category_level_and_bad_codes_are_refused():
    forest = make_tree_forest([T3], NAMES, categories=CATS)
    clf = PooledForestClassifier(forest, strategy="fpv")
    with pytest.raises(ValueError, match="not among its known levels"):
        clf.predict_proba(rows([0.0], c=["w"]))
    with pytest.raises(ValueError, match="codes must lie"):
        clf.predict_proba(rows([0.0], c=[7]))


def test_ipr_needs_the_pooled_standard_deviation():
    forest = make_tree_forest([T1, T2], NAMES, categories=CATS)
    clf = PooledForestClassifier(forest, strategy="ipr", imputers=ImputerSet([numeric_imputer()]))
    with pytest.raises(ValueError, match=r"feature_std\['b'\]"):
        clf.predict_proba(rows([0.0]))


def test_auto_selects_on_validation_rows(two_site_forest, table):
    forest, _, _ = two_site_forest
    X, y = table
    cols = ["x0", "x1", "x2", "x3"]
    clf = PooledForestClassifier(
        forest, strategy="auto", site="a", random_state=0, auto_candidates=["fpv", "mp", "local"]
    )
    clf.fit(X[cols][400:500], y[400:500])
    assert clf.strategy_ in ("fpv", "mp", "local")
    assert set(clf.selection_scores_) == {"fpv", "mp", "local"}
    # the default metric is log-loss: the lowest wins, or a preferred candidate within one
    # standard error of it; the runner-up is the best-scoring other candidate
    ranked = sorted(clf.selection_scores_, key=clf.selection_scores_.get)
    assert clf.strategy_ in ranked
    assert clf.runner_up_ == [s for s in ranked if s != clf.strategy_][0]
    assert clf.predict_proba(X[cols][500:]).shape == (100, 2)
    assert clf.diagnostics_.strategy == clf.strategy_


def test_auto_scores_candidates_without_copying_the_forest(two_site_forest, table, monkeypatch):
    pooled, _, _ = two_site_forest
    forest = pooled.select_trees(np.ones(pooled.n_trees, bool))  # a fresh cache
    X, y = table
    cols = ["x0", "x1", "x2", "x3"]
    builds = []
    original = classifier_module.CompiledForest.build
    monkeypatch.setattr(
        classifier_module.CompiledForest,
        "build",
        classmethod(lambda cls, f: builds.append(f) or original(f)),
    )
    candidates = ["fpv", "pr", "mp", "local", "park"]
    clf = PooledForestClassifier(
        forest,
        strategy="auto",
        site="a",
        random_state=0,
        auto_candidates=candidates,
        auto_metric="auprc",
    ).fit(X[cols][400:500], y[400:500])
    assert builds == [forest]  # one compiled forest for every candidate, and no copy of it
    assert clf.forest is forest
    # each candidate scored as a classifier with that fixed strategy would score it
    for name in candidates:
        fixed = PooledForestClassifier(forest, strategy=name, site="a", random_state=0)
        proba = fixed.predict_proba(X[cols][400:500])
        from fedforest import score

        assert clf.selection_scores_[name] == score("auprc", y[400:500], proba, fixed.classes_)


@pytest.mark.parametrize("strategy", ["mp", "mi", "ss", "fpv", "node"])
def test_results_do_not_depend_on_row_chunking(real_forest, table, monkeypatch, strategy):
    _, forest, X, _ = real_forest
    Xt, _ = table
    from fedforest import fit_imputers, fit_surrogates
    from fedforest.model import traversal

    forest = fit_surrogates(forest, Xt[:400], ["x0", "x1", "x2"])
    imps = fit_imputers(Xt[:400], ["x3", "x4", "x5"], ["x0", "x1", "x2"], random_state=0)
    std = Xt.std().to_dict()
    half = X[["x0", "x1", "x2"]].copy()
    half.iloc[::7, 1] = np.nan  # some rows also miss a value in a column the site has
    monkeypatch.setattr(classifier_module.fastpath, "available", lambda: False)
    # depth_threshold=50: the pr fallback always discards, so nothing is random here
    params = dict(strategy=strategy, imputers=imps, feature_std=std, depth_threshold=50)
    whole = PooledForestClassifier(forest, **params).predict_proba(half)
    monkeypatch.setattr(traversal, "MAX_PAIRS", 90)  # two rows at a time
    chunked = PooledForestClassifier(forest, **params).predict_proba(half)
    assert np.allclose(whole, chunked, rtol=0, atol=1e-12)


# --------------------------------------------------------------- node
def global_rows(forest, X: pd.DataFrame) -> np.ndarray:
    """``X`` at the forest's feature positions, float32, NaN for absent columns."""
    out = np.full((len(X), forest.n_features), np.nan, dtype=np.float32)
    for name in X.columns:
        out[:, forest.feature_names.index(name)] = X[name].to_numpy(dtype=np.float32)
    return out


def node_reference(forest, X: pd.DataFrame, voting="soft", learned=True) -> np.ndarray:
    """``node`` written out plainly: walk every tree for every row in Python.

    An unavailable feature at a node that saw missing values follows the
    learned direction (``learned=False``: stops there too); at any other node
    the walk stops and the node's own distribution (hard: its one-hot argmax)
    is the tree's prediction. Trees are summed in order, then averaged.
    """
    Xg = global_rows(forest, X)
    left, right = forest.global_children
    table = forest.value
    if voting == "hard":
        table = np.eye(forest.n_classes)[forest.value.argmax(axis=1)]
    out = np.empty((len(X), forest.n_classes))
    for r in range(len(X)):
        total = np.zeros(forest.n_classes)
        for t in range(forest.n_trees):
            node = int(forest.tree_start[t])
            while forest.feature[node] >= 0:
                x = Xg[r, forest.feature[node]]
                if np.isnan(x):
                    if not (learned and forest.saw_missing[node]):
                        break  # stop: this node stands for the tree's leaf
                    node = left[node] if forest.missing_left[node] else right[node]
                else:
                    node = left[node] if x <= forest.threshold[node] else right[node]
            total += table[node]
        out[r] = total / forest.n_trees
    return out


def test_node_gives_the_root_distribution_when_the_root_feature_is_missing(real_forest):
    _, forest, X, _ = real_forest
    X = X[:12]
    for t in range(4):
        tree = forest.select_trees(np.arange(forest.n_trees) == t)
        assert not tree.saw_missing[0]
        root = tree.feature_names[tree.feature[0]]
        root_value = tree.value[0]
        vote = np.eye(tree.n_classes)[root_value.argmax()]
        for missing in (X.drop(columns=[root]), X.assign(**{root: np.nan})):
            p, _ = proba(tree, missing, strategy="node")
            assert np.array_equal(p, np.tile(root_value, (len(X), 1)))
            p, _ = proba(tree, missing, strategy="node", voting="hard")
            assert np.array_equal(p, np.tile(vote, (len(X), 1)))
    # in the whole forest, the tree whose root feature is missing adds its root's value
    t = 0
    root = forest.feature_names[forest.feature[forest.tree_start[t]]]
    rest = forest.select_trees(np.arange(forest.n_trees) != t)
    p_all, clf = proba(forest, X.drop(columns=[root]), strategy="node")
    p_rest, _ = proba(rest, X.drop(columns=[root]), strategy="node")
    n = forest.n_trees
    assert np.allclose(p_all, (p_rest * (n - 1) + forest.value[forest.tree_start[t]]) / n)
    assert clf.diagnostics_.trees_kept.tolist() == [n] * len(X)


@pytest.mark.parametrize("voting", ["soft", "hard"])
def test_node_equals_a_plain_reference_and_never_discards(real_forest, voting):
    _, forest, X, _ = real_forest
    X = X[:20]
    dirty = X.copy()
    dirty.iloc[::3, 0] = np.nan  # x0, the root of many trees
    dirty.iloc[1::4, 3] = np.nan
    cases = {
        "absent": X[["x0", "x2", "x4"]],
        "one column": X[["x2"]],
        "NaN in present columns": dirty,
        "both": dirty[["x0", "x1", "x2", "x3"]],
    }
    for case, rows_ in cases.items():
        p, clf = proba(forest, rows_, strategy="node", voting=voting, depth_threshold=0)
        assert np.array_equal(p, node_reference(forest, rows_, voting)), case
        assert clf.diagnostics_.n_fallback == 0, case
        assert clf.diagnostics_.trees_kept.tolist() == [forest.n_trees] * len(X), case
        assert clf.diagnostics_.trees_available == forest.n_trees
    # the absent-column cases take the compiled trees, the NaN cases the dynamic traversals
    assert proba(forest, cases["absent"], strategy="node")[1].diagnostics_.engine == "compiled"
    assert proba(forest, dirty, strategy="node")[1].diagnostics_.engine == "mixed"


@pytest.mark.parametrize("voting", ["soft", "hard"])
def test_node_compiled_path_equals_the_dynamic_traversal(real_forest, voting):
    # the same rows, once with columns absent (compiled trees) and once with those
    # columns present but all NaN (dynamic traversal)
    _, forest, X, _ = real_forest
    absent = X[["x0", "x1", "x2"]]
    nan = X.assign(x3=np.nan, x4=np.nan, x5=np.nan)
    fast = PooledForestClassifier(forest, strategy="node", voting=voting)
    p_fast = fast.predict_proba(absent)
    assert fast.diagnostics_.engine == "compiled"
    slow = PooledForestClassifier(forest, strategy="node", voting=voting, engine="numpy")
    p_slow = slow.predict_proba(nan)
    assert slow.diagnostics_.engine == "numpy"
    assert np.array_equal(p_fast, p_slow)
    assert np.array_equal(fast.diagnostics_.trees_kept, slow.diagnostics_.trees_kept)
    assert not np.array_equal(p_fast, PooledForestClassifier(forest).predict_proba(X))


def test_node_follows_learned_missing_directions(table):
    X, y = table
    X = X.copy()
    rng = np.random.RandomState(5)
    X.loc[rng.rand(len(X)) < 0.25, "x1"] = np.nan
    rf = RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0)
    rf.fit(X[:400], y[:400])
    forest = PooledForest.from_sklearn(rf, list(X.columns), owner="s1", X=X[:400])
    on_x1 = forest.feature == list(X.columns).index("x1")
    assert (on_x1 & forest.saw_missing).any()
    test = X[400:440].copy()
    test.iloc[::2, 1] = np.nan
    for rows_ in (test, test.drop(columns=["x1"])):  # NaN values, absent column
        p, clf = proba(forest, rows_, strategy="node")
        assert np.array_equal(p, node_reference(forest, rows_))
        # stopping at the nodes that learned a direction would change the predictions
        assert not np.allclose(p, node_reference(forest, rows_, learned=False))
        assert clf.diagnostics_.n_fallback == 0
    # where the missing values meet only nodes that learned a direction, node is scikit-learn
    _, fpv = proba(forest, test, strategy="fpv")
    every = fpv.diagnostics_.trees_kept == forest.n_trees
    assert every.any() and not every.all()
    p, _ = proba(forest, test, strategy="node")
    assert np.array_equal(p[every], rf.predict_proba(test)[every])


def test_a_classifier_of_a_model_is_the_classifier_of_its_parts(two_site_forest, table):
    from fedforest.model.pooled_model import PooledModel, PredictionSettings

    forest = two_site_forest[0]
    X, y = table
    imputers = fit_imputers(X[:300], ["x4", "x5"], ["x0", "x1"], owner="b", random_state=0)
    std = {c: float(X[c].std()) for c in X.columns}
    weights = {"a": 2.0, "b": 1.0}
    settings = PredictionSettings(depth_threshold=1, voting="hard", seed=5, owner_weights=weights)
    model = PooledModel(forest, imputers, std, settings=settings)
    clf = PooledForestClassifier.from_model(model, strategy="ipr", site="a")
    parts = PooledForestClassifier(
        forest,
        strategy="ipr",
        imputers=imputers,
        feature_std=std,
        depth_threshold=1,
        voting="hard",
        site="a",
        random_state=5,
        owner_weights=weights,
    )
    assert clf.get_params() == parts.get_params()
    rows = X[["x0", "x1", "x2", "x3"]][500:]
    np.testing.assert_array_equal(clf.predict_proba(rows), parts.predict_proba(rows))
    # the parameters given win over the model's settings; settings not recorded keep defaults
    given = PooledForestClassifier.from_model(model, random_state=1, voting="soft")
    assert (given.random_state, given.voting, given.depth_threshold) == (1, "soft", 1)
    plain = PooledForestClassifier.from_model(PooledModel(forest))
    default = PooledForestClassifier(forest)
    assert {k: v for k, v in plain.get_params().items() if k != "feature_std"} == {
        k: v for k, v in default.get_params().items() if k != "feature_std"
    }
    assert plain.feature_std == {} and plain.intersection is None
    with pytest.raises(TypeError, match="PooledModel"):
        PooledForestClassifier.from_model(forest)
