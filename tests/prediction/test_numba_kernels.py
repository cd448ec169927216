"""The numba engine against the numpy engine: the same bits, the same draws."""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest, PooledForestClassifier, fit_imputers, fit_surrogates
from fedforest.model import traversal
from fedforest.model.inputs import to_global_matrix
from fedforest.prediction import engines as engines_module
from fedforest.prediction import pipeline as classifier_module
from fedforest.prediction import routing
from fedforest.prediction.cache import forest_cache
from fedforest.prediction.draws import Draws
from fedforest.prediction.imputation import impute
from fedforest.prediction.strategies import Strategy
from fedforest.rules import get as get_rule
from fedforest.vocabulary import STRATEGIES

numba_kernels = pytest.importorskip("fedforest.prediction.numba_kernels")

CATEGORIES = {"c": ["lo", "mid", "high", "top"], "d": ["u", "v", "w"]}
SITE_COLUMNS = ["x0", "x1", "c"]  # the predicting site: the other half of the features is absent
#: Strategies whose compiled trees can split on a column of draws.
GUESSING = ("pr", "mi", "ss")


@pytest.fixture(scope="module")
def pooled():
    """Two sites' forests (numeric and categorical features, three classes), pooled.

    Site a trained with NaN in x1 (nodes that learned a direction for missing
    values); surrogates, imputers and pooled standard deviations as a job fits
    them.
    """
    rng = np.random.RandomState(3)
    n = 500
    X = pd.DataFrame(rng.normal(size=(n, 5)), columns=[f"x{i}" for i in range(5)])
    X["c"] = rng.randint(0, 4, size=n)
    X["d"] = rng.randint(0, 3, size=n)
    score = X["x0"] + X["x2"] - X["x3"] + 0.8 * (X["c"] >= 2) - 0.7 * (X["d"] == 1)
    y = np.digitize(score + rng.normal(scale=0.5, size=n), [-0.5, 0.7])
    labels = np.array(["no", "maybe", "yes"])[y]
    X.loc[rng.rand(n) < 0.15, "x1"] = np.nan
    cols_a = ["x0", "x1", "x2", "c"]
    cols_b = ["x0", "x3", "x4", "d"]
    rf_a = RandomForestClassifier(n_estimators=8, max_depth=7, random_state=1)
    rf_b = RandomForestClassifier(n_estimators=8, max_depth=7, random_state=2)
    rf_a.fit(X[cols_a][:200], labels[:200])
    rf_b.fit(X[cols_b][200:400], labels[200:400])
    cats_a = {"c": CATEGORIES["c"]}
    fa = PooledForest.from_sklearn(rf_a, cols_a, "a", X=X[cols_a][:200], categories=cats_a)
    fb = PooledForest.from_sklearn(rf_b, cols_b, "b", categories={"d": CATEGORIES["d"]})
    fa = fit_surrogates(fa, X[cols_a][:200], ["x0", "x1"])
    fb = fit_surrogates(fb, X[cols_b][200:400], ["x0"])
    forest = PooledForest.concat([fa, fb])
    imputers = fit_imputers(
        X[:400], ["x2", "x3", "x4", "c", "d"], ["x0", "x1"], categories=CATEGORIES, random_state=0
    )
    std = X[:400].std().to_dict()
    test = X[400:].reset_index(drop=True)
    test.loc[::6, "x1"] = np.nan  # NaN in columns the site has
    test.loc[::9, "c"] = np.nan
    return forest, imputers, std, test


def both_engines(forest, X, **params):
    """Predictions and diagnostics of the two engines with the same parameters."""
    out = {}
    for engine in ("numba", "numpy"):
        clf = PooledForestClassifier(forest, engine=engine, **params)
        out[engine] = (clf.predict_proba(X), clf.diagnostics_)
    return out["numba"], out["numpy"]


def assert_same(fast, slow):
    (p_fast, d_fast), (p_slow, d_slow) = fast, slow
    assert np.array_equal(p_fast, p_slow)
    assert np.array_equal(d_fast.trees_kept, d_slow.trees_kept)
    assert np.array_equal(d_fast.fallback_rows, d_slow.fallback_rows)
    if d_fast.strategy in GUESSING:
        # with numba the kernels draw these per pair; numpy's compiled trees per (tree, depth)
        assert d_fast.engine == "numpy" or d_fast.engine == d_slow.engine
    else:
        assert d_fast.engine == d_slow.engine
    assert d_fast.dynamic_engine in ("numba", None)
    assert d_slow.dynamic_engine in ("numpy", None)


# ------------------------------------------------------------------ sigmoid
def test_compiled_sigmoid_gives_the_same_bits():
    rng = np.random.default_rng(1)
    z = np.concatenate(
        [
            rng.normal(scale=s, size=5_000) for s in (1e-8, 0.3, 3, 30, 300)
        ]  # every branch of the exp
        + [np.array([0.0, -0.0, 36.7, 40.0, -40.0, 708.0, -708.0, -709.7, -709.8, -746.0])]
        + [np.array([np.inf, -np.inf, np.nan])]
    )
    compiled = np.array([numba_kernels._sigmoid(v) for v in z])
    assert np.array_equal(compiled, routing.sigmoid(z), equal_nan=True)


@pytest.mark.parametrize("strategy", ["mp", "ipr", "wmp"])
def test_probabilities_without_factors_agree_and_are_the_sigmoid(pooled, strategy):
    """A sigma of 0, a tiny sigma (1/sigma = inf) and exponents beyond FACTOR_LIMIT."""
    forest, imputers, std, test = pooled
    odd = dict(std, x2=0.0, x3=1e-310, x4=1e-4)
    params = dict(
        strategy=strategy,
        imputers=imputers,
        feature_std=odd,
        site="a",
        random_state=4,
        guess_weight=0.3,
    )
    fast, slow = both_engines(forest, test[SITE_COLUMNS], **params)
    assert_same(fast, slow)
    # the numpy engine's probabilities against scipy's sigmoid, node by node
    clf = PooledForestClassifier(forest, engine="numpy", **params)
    clf.predict_proba(test[SITE_COLUMNS])
    cache = forest_cache(forest)
    cf = cache.compiled(forest)
    odd_columns = [forest.feature_names.index(name) for name in ("x2", "x3", "x4")]
    nodes = np.flatnonzero(np.isin(cf.feature, odd_columns))
    X, present = to_global_matrix(test[SITE_COLUMNS], forest.feature_names, forest.categories)
    rule = get_rule(strategy)
    dirty = np.zeros(len(X), bool)
    imputed, level_cdf = impute(forest, clf.imputers, clf._sigma(), X, ~present, dirty, rule)
    rules = Strategy(rule.routing, forest, cf, X, imputed, level_cdf, clf._sigma(), 0, None, cache)
    rows = np.arange(len(X)).repeat(nodes.size)
    each = np.tile(nodes, len(X))
    got = rules.right_probability(each, rows)
    f = cf.feature[each]
    sigma = clf._sigma()[f]
    d = imputed[rows, f].astype(np.float64) - cf.threshold[each]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = np.where((sigma == 0) | (d == 0), 0.0, d / np.where(sigma == 0, 1.0, sigma))
    assert np.allclose(got, expit(z), rtol=0, atol=1e-14)
    assert np.isin(got[f == odd_columns[0]], [0.5]).all()  # sigma 0: the term is 0


def test_a_rows_marginal_prediction_does_not_depend_on_its_batch(pooled):
    forest, imputers, std, test = pooled
    clf = PooledForestClassifier(
        forest, strategy="mp", imputers=imputers, feature_std=std, site="a", engine="numba"
    )
    X = test[SITE_COLUMNS]
    whole = clf.predict_proba(X)
    for i in (0, 7, 50):
        assert np.array_equal(clf.predict_proba(X.iloc[[i]]), whole[[i]])


# ------------------------------------------------------------ the engines
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("with_imputers", [True, False])
def test_engines_agree_bit_for_bit(pooled, strategy, with_imputers):
    forest, imputers, std, test = pooled
    params = dict(
        strategy=strategy,
        imputers=imputers if with_imputers else None,
        feature_std=std,
        site="a",
        depth_threshold=1,
        random_state=11,
        guess_weight=0.3,
    )
    fast, slow = both_engines(forest, test[SITE_COLUMNS], **params)
    assert_same(fast, slow)
    if strategy not in ("park", "local"):
        assert fast[1].dynamic_engine == "numba"  # rows with NaN went through the kernels


@pytest.mark.parametrize(
    "strategy", ["fpv", "pr", "mi", "ipr", "mp", "ss", "node", "park", "local"]
)
def test_engines_agree_on_every_row_without_the_compiled_trees(pooled, monkeypatch, strategy):
    # every row through the dynamic traversals, all features or half of them
    forest, imputers, std, test = pooled
    monkeypatch.setattr(classifier_module.fastpath, "available", lambda: False)
    params = dict(strategy=strategy, imputers=imputers, feature_std=std, site="b", random_state=5)
    for X in (test, test[SITE_COLUMNS], test[["x0", "d"]]):
        fast, slow = both_engines(forest, X, depth_threshold=0, **params)
        assert_same(fast, slow)
        assert fast[1].engine == "numpy"  # the dynamic traversals, by the numba engine


@pytest.mark.parametrize("voting", ["soft", "hard"])
def test_node_agrees_bit_for_bit_and_never_discards(pooled, monkeypatch, voting):
    forest, imputers, std, test = pooled
    monkeypatch.setattr(classifier_module.fastpath, "available", lambda: False)
    params = dict(strategy="node", imputers=imputers, feature_std=std, voting=voting)
    for X in (test, test[SITE_COLUMNS], test[["x1", "d"]]):  # x0, a frequent root, absent
        fast, slow = both_engines(forest, X, **params)
        assert_same(fast, slow)
        assert fast[1].dynamic_engine == "numba"
        assert fast[1].n_fallback == 0
        assert fast[1].trees_kept.tolist() == [forest.n_trees] * len(X)


def test_node_kernel_stops_where_the_numpy_resolver_does(pooled):
    # the kernels' route_leaves against routing.route_leaves, called directly:
    # the same nodes (internal ones where a pair stopped), and no random draw
    from fedforest.model.inputs import to_global_matrix
    from fedforest.prediction.strategies import Strategy

    forest, _, _, test = pooled
    X, _ = to_global_matrix(test[SITE_COLUMNS], forest.feature_names, forest.categories)
    cf = traversal.CompiledForest.build(forest)
    n_rows, n_feat = X.shape
    draws = Draws(4, X, forest.tree_of_node, cf.depth)
    rules = Strategy(
        get_rule("node").routing,
        forest,
        cf,
        X,
        np.full((n_rows, n_feat), np.nan, dtype=np.float32),
        {},
        np.full(n_feat, np.nan),
        2,
        draws,
        forest_cache(forest),
    )
    trees = np.arange(forest.n_trees)
    compiled = numba_kernels.route_leaves(cf, X, trees, rules)
    numpy_ = routing.route_leaves(cf, X, trees, rules.resolver)
    assert np.array_equal(compiled, numpy_)
    assert (compiled >= 0).all()  # never discarded
    stopped = cf.feature[compiled] >= 0
    assert stopped.any() and not stopped.all()
    # where a pair stopped, the node's feature is unavailable and it learned no direction
    rows_ = np.broadcast_to(np.arange(n_rows), compiled.shape)[stopped]
    assert np.isnan(X[rows_, cf.feature[compiled[stopped]]]).all()
    assert not cf.saw_missing[compiled[stopped]].any()
    assert draws._row_keys is None and not draws._node_keys  # nothing drawn


def test_the_fallback_rows_of_fpv_agree(pooled):
    forest, imputers, std, test = pooled
    X = test[["x1", "d"]]  # x0, the root of most trees, is absent
    fast, slow = both_engines(forest, X, strategy="fpv", imputers=imputers, feature_std=std)
    assert fast[1].n_fallback > 0
    assert_same(fast, slow)


@pytest.mark.parametrize("strategy", ["pr", "ipr", "mi", "ss"])
def test_seeded_strategies_make_the_same_draws(pooled, monkeypatch, strategy):
    forest, imputers, std, test = pooled
    monkeypatch.setattr(classifier_module.fastpath, "available", lambda: False)
    params = dict(strategy=strategy, imputers=imputers, feature_std=std, depth_threshold=0)
    X = test[SITE_COLUMNS]
    (seven, _), (seven_np, _) = both_engines(forest, X, random_state=7, **params)
    (eight, _), (eight_np, _) = both_engines(forest, X, random_state=8, **params)
    assert np.array_equal(seven, seven_np) and np.array_equal(eight, eight_np)
    if strategy in ("pr", "ipr"):
        assert not np.array_equal(seven, eight)  # the draws do matter
    # a Generator as random_state: both engines leave it in the same state
    gens = [np.random.default_rng(3) for _ in range(2)]
    for engine, gen in zip(("numba", "numpy"), gens, strict=True):
        PooledForestClassifier(forest, engine=engine, random_state=gen, **params).predict_proba(X)
    assert gens[0].random() == gens[1].random()


def test_row_chunks_and_threads_change_nothing(pooled, monkeypatch):
    forest, imputers, std, test = pooled
    X = test[SITE_COLUMNS]
    reference = {}  # every row in one chunk, one thread
    for strategy in ("mp", "ipr", "pr", "ss", "node"):
        params = dict(strategy=strategy, imputers=imputers, feature_std=std, random_state=2)
        reference[strategy] = both_engines(forest, X, **params)
    monkeypatch.setattr(traversal, "MAX_PAIRS", 40)  # a few rows per chunk
    monkeypatch.setattr(numba_kernels, "MIN_PAIRS_PER_THREAD", 1)  # threads for tiny work
    monkeypatch.setattr(numba_kernels, "ROW_BLOCK", 3)
    monkeypatch.setattr(numba_kernels, "_threads", lambda n_pairs: 3)
    for strategy, (whole_fast, _) in reference.items():
        params = dict(strategy=strategy, imputers=imputers, feature_std=std, random_state=2)
        fast, slow = both_engines(forest, X, **params)
        assert_same(fast, slow)
        assert np.array_equal(fast[0], whole_fast[0])  # draws too: pure functions of the row


def test_numba_num_threads_and_max_threads_bound_the_threads(monkeypatch):
    monkeypatch.setattr(numba_kernels.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(numba_kernels.numba_config, "NUMBA_NUM_THREADS", 8)
    many = 100 * numba_kernels.MIN_PAIRS_PER_THREAD
    assert numba_kernels._threads(many) == 8
    monkeypatch.setattr(numba_kernels.numba_config, "NUMBA_NUM_THREADS", 1)
    assert numba_kernels._threads(many) == 1
    monkeypatch.setattr(numba_kernels.numba_config, "NUMBA_NUM_THREADS", 8)
    monkeypatch.setattr(numba_kernels, "MAX_THREADS", 2)
    assert numba_kernels._threads(many) == 2
    assert numba_kernels._threads(10) == 1  # too little work for a second thread


# ----------------------------------------------------- choosing the engine
def test_auto_uses_numba_for_large_traversals_only(pooled, monkeypatch):
    forest, imputers, std, test = pooled
    X = test[SITE_COLUMNS]  # 100 rows with half the features, 16 trees
    params = dict(strategy="mp", imputers=imputers, feature_std=std)
    small = PooledForestClassifier(forest, **params)
    p_small = small.predict_proba(X)
    assert small.diagnostics_.dynamic_engine == "numpy"
    monkeypatch.setattr(engines_module, "AUTO_NUMBA_PAIRS", len(X) * forest.n_trees)
    large = PooledForestClassifier(forest, **params)
    assert np.array_equal(large.predict_proba(X), p_small)
    assert large.diagnostics_.dynamic_engine == "numba"


def test_engine_is_a_parameter(pooled):
    forest, *_ = pooled
    clf = PooledForestClassifier(forest, engine="numpy")
    assert clf.get_params()["engine"] == "numpy"
    assert clone(clf).engine == "numpy"
    with pytest.raises(ValueError, match="engine='fast'"):
        PooledForestClassifier(forest, engine="fast").fit()


def test_without_numba_auto_uses_numpy_and_numba_is_refused(pooled, monkeypatch, caplog):
    forest, imputers, std, test = pooled
    X = test[SITE_COLUMNS]
    params = dict(strategy="mp", imputers=imputers, feature_std=std)
    expected = PooledForestClassifier(forest, engine="numba", **params).predict_proba(X)
    # numba cannot be imported: a site that installed only the runtime requirements
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.delitem(sys.modules, "fedforest.prediction.numba_kernels")
    monkeypatch.setattr(engines_module, "_KERNELS_MISSING_LOGGED", False)
    monkeypatch.setattr(engines_module, "AUTO_NUMBA_PAIRS", 0)  # auto would use numba
    with caplog.at_level(logging.INFO, logger=engines_module.__name__):
        assert engines_module.load_kernels()[0] is None
        auto = PooledForestClassifier(forest, **params)
        assert np.array_equal(auto.predict_proba(X), expected)
    assert auto.diagnostics_.dynamic_engine == "numpy"
    assert "the numpy engine runs instead" in caplog.text
    numpy_engine = PooledForestClassifier(forest, engine="numpy", **params)
    assert np.array_equal(numpy_engine.predict_proba(X), expected)
    with pytest.raises(ImportError, match=r"engine='numba' needs numba.*fedforest\[fast\]"):
        PooledForestClassifier(forest, engine="numba", **params).predict_proba(X)


def test_numba_that_fails_to_load_falls_back_with_a_warning(pooled, monkeypatch, caplog):
    # e.g. numba without a writable place for its cache, or built for another numpy
    forest, imputers, std, test = pooled

    def broken(name, package=None):
        raise RuntimeError("cannot cache function '_sigmoid': no locator available")

    monkeypatch.setattr(engines_module, "importlib", SimpleNamespace(import_module=broken))
    monkeypatch.setattr(engines_module, "_KERNELS_MISSING_LOGGED", False)
    monkeypatch.setattr(engines_module, "AUTO_NUMBA_PAIRS", 0)
    X = test[SITE_COLUMNS]
    with caplog.at_level(logging.WARNING, logger=engines_module.__name__):
        clf = PooledForestClassifier(forest, strategy="mp", imputers=imputers, feature_std=std)
        clf.predict_proba(X)
    assert clf.diagnostics_.dynamic_engine == "numpy"
    assert "RuntimeError: cannot cache" in caplog.text
    with pytest.raises(ImportError, match="no locator"):
        PooledForestClassifier(forest, engine="numba").fit()


def test_each_trees_marginal_is_the_one_tree_kernels_bit_for_bit(pooled, monkeypatch):
    from fedforest.prediction.out_of_bag import InBag

    forest, imputers, std, test = pooled
    per_tree = numba_kernels.marginal_per_tree
    seen = []

    def checked(cf, X, trees, tables, absent=None):
        out = per_tree(cf, X, trees, tables, absent)
        for i, tree in enumerate(trees):
            one = numba_kernels.marginal_proba(cf, X, np.array([tree]), tables, absent)
            assert np.array_equal(out[i], one)
        seen.append(out.shape)
        return out

    monkeypatch.setattr(numba_kernels, "marginal_per_tree", checked)
    X = test[SITE_COLUMNS]
    bag = np.random.RandomState(0).rand(forest.n_trees, len(X)) < 0.3
    clf = PooledForestClassifier(
        forest, strategy="mp", imputers=imputers, feature_std=std, site="a", engine="numba"
    )
    clf.predict_proba(X, in_bag=InBag(bag))
    assert seen and seen[0][0] == forest.n_trees and seen[0][1] <= len(X)
