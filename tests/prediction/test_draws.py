"""Counter-based draws: a row's prediction depends on that row and the model only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from fedforest import (
    ImputerSet,
    PooledForest,
    PooledForestClassifier,
    PooledForestRegressor,
    fit_imputers,
    fit_surrogates,
)
from fedforest.model import traversal
from fedforest.prediction import draws as draws_module
from fedforest.prediction import pipeline as pooled_module
from fedforest.prediction.draws import (
    GOLDEN,
    IPR_STREAM,
    PR_STREAM,
    Draws,
    level_keys,
    mix64,
    row_keys,
    seed_key,
    uniforms,
)
from fedforest.vocabulary import STRATEGIES

SHARED = ["age", "bmi", "glucose"]
#: What site-2 predicts with: "insulin", site-1's private column, is absent.
SITE_2 = SHARED + ["skin"]
ENGINES = ("numpy", "numba")


def hospital(rng, n):
    g = rng.normal(size=n)
    X = pd.DataFrame(
        {
            "age": rng.normal(size=n),
            "bmi": g + rng.normal(size=n),
            "glucose": g,
            "insulin": g + 0.3 * rng.normal(size=n),
            "skin": g + 0.3 * rng.normal(size=n),
        }
    )
    return X, (g + 0.5 * rng.normal(size=n) > 0).astype(int)


@pytest.fixture(scope="module")
def pooled():
    """Two hospitals with one private column each, pooled as in docs/library.md."""
    rng = np.random.default_rng(0)
    forests, imputer_sets, stds = [], [], []
    for site, private in [("site-1", "insulin"), ("site-2", "skin")]:
        X, y = hospital(rng, 300)
        X = X[SHARED + [private]]
        rf = RandomForestClassifier(n_estimators=15, max_depth=8, random_state=0).fit(X, y)
        forest = PooledForest.from_sklearn(rf, list(X.columns), owner=site, X=X)
        forests.append(fit_surrogates(forest, X, SHARED[:1]))  # many nodes without one
        imputer_sets.append(fit_imputers(X, [private], SHARED, owner=site, random_state=0))
        stds.append(X.std().to_dict())
    forest = PooledForest.concat(forests)
    imputers = ImputerSet.select(imputer_sets)
    std = pd.DataFrame(stds).mean().to_dict()
    X_test, _ = hospital(rng, 120)
    X_test = X_test[SITE_2].copy()
    X_test.loc[::7, "bmi"] = np.nan  # NaN in a column the site has: the dynamic traversals
    X_val, y_val = hospital(rng, 80)
    return forest, imputers, std, X_test, (X_val[SITE_2], y_val)


def estimator(pooled, strategy, engine, random_state=0, **params):
    forest, imputers, std, _, (X_val, y_val) = pooled
    clf = PooledForestClassifier(
        forest,
        strategy=strategy,
        imputers=imputers,
        feature_std=std,
        site="site-2",
        depth_threshold=1,
        random_state=random_state,
        engine=engine,
        guess_weight=0.3,
        **params,
    )
    if strategy == "auto":
        clf.fit(X_val, y_val)
    return clf


def engines():
    """The engines that can run here (numba is optional)."""
    try:
        import fedforest.prediction.numba_kernels  # noqa: F401
    except ImportError:
        return ("numpy",)
    return ENGINES


# ----------------------------------------------------------------- the hash
def test_mix64_is_splitmix64():
    # SplitMix64 seeded with 0: its first outputs are mix64 of GOLDEN, 2 GOLDEN, ...
    state = np.arange(1, 4, dtype=np.uint64) * GOLDEN
    got = [f"{int(v):016x}" for v in mix64(state)]
    assert got == ["e220a8397b1dcdaf", "6e789e6aa1b965f4", "06c45d188009454f"]


def test_row_keys_hash_the_values_nan_and_signed_zero_canonical():
    nan_a = np.float32(np.nan)
    nan_b = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)[0]  # another NaN payload
    X = np.array(
        [[1.0, nan_a], [1.0, nan_b], [1.0, -nan_a], [0.0, 2.0], [-0.0, 2.0], [2.0, 0.0]],
        dtype=np.float32,
    )
    keys = row_keys(X)
    assert keys[0] == keys[1] == keys[2]  # every NaN alike
    assert keys[3] == keys[4]  # -0.0 is 0.0
    assert keys[3] != keys[5]  # the same values in other columns are another row
    assert len(set(keys.tolist())) == 3
    # float64 rows are hashed at the trees' float32 precision
    assert np.array_equal(row_keys(X.astype(np.float64)), keys)


def test_row_keys_do_not_depend_on_the_block_size(monkeypatch):
    X = np.random.default_rng(1).normal(size=(1000, 7)).astype(np.float32)
    X[::3, 2] = np.nan
    whole = row_keys(X)
    monkeypatch.setattr(draws_module, "ROW_BLOCK", 7)
    assert np.array_equal(row_keys(X), whole)
    assert np.array_equal(row_keys(X[::-1]), whole[::-1])


def test_seed_key_accepts_seeds_none_and_generators_and_names_bad_values():
    assert seed_key(None) == seed_key(0)
    assert seed_key(1) != seed_key(0)
    assert seed_key(2**64 - 1) != seed_key(2**32 - 1)
    assert seed_key(np.int64(5)) == seed_key(5)
    assert seed_key(np.random.default_rng(3)) == seed_key(np.random.default_rng(3))
    for bad in (-1, 2**64, 1.5, "0", True):
        with pytest.raises(ValueError, match="random_state=.* is not an integer in"):
            seed_key(bad)


def test_uniforms_are_exact_float32_in_the_unit_interval_and_well_spread():
    # a fixed seed and fixed rows: deterministic, not a flaky test
    rng = np.random.default_rng(12)
    X = rng.normal(size=(20_000, 4)).astype(np.float32)
    keys = row_keys(X)
    level = level_keys(seed_key(7), np.arange(10), np.arange(10) % 4, PR_STREAM)
    u = uniforms(level[None, :], keys[:, None]).reshape(-1)  # 200 000 draws
    assert ((u >= 0) & (u < 1)).all()
    assert np.array_equal(u.astype(np.float32).astype(np.float64), u)
    assert abs(u.mean() - 0.5) < 0.003  # standard error 0.00065
    counts = np.bincount((u * 100).astype(int), minlength=100)
    chi2 = ((counts - u.size / 100) ** 2 / (u.size / 100)).sum()
    assert chi2 < stats.chi2.ppf(0.9999, 99)
    assert stats.kstest(u, "uniform").statistic < 0.01
    # the columns (levels) and the two streams are not correlated
    by_level = u.reshape(-1, 10)
    assert np.abs(np.corrcoef(by_level.T)[np.triu_indices(10, 1)]).max() < 0.04
    other = uniforms(level_keys(seed_key(7), 0, 0, IPR_STREAM), keys)
    assert abs(np.corrcoef(other, by_level[:, 0])[0, 1]) < 0.04


def test_draws_of_a_pair_are_those_of_its_tree_and_depth():
    X = np.array([[0.5, 1.0], [0.5, 1.0], [0.25, 1.0]], dtype=np.float32)
    tree_of_node = np.array([0, 0, 0, 1, 1])
    depth = np.array([0, 1, 1, 0, 1])
    d = Draws(9, X, tree_of_node, depth)
    u = d.uniform(np.array([1, 2, 1, 3]), np.array([0, 0, 2, 0]), PR_STREAM)
    assert u[0] == u[1]  # two nodes of one depth: a path meets one of them
    assert u[0] != u[2] and u[0] != u[3]  # another row; another tree
    assert np.array_equal(
        d.tree_uniforms(0, np.array([1]))[:, 0],
        d.uniform(np.array([1, 1, 1]), np.arange(3), PR_STREAM),
    )
    assert d.uniform(np.array([1]), np.array([0]), IPR_STREAM)[0] != u[0]
    sub = d.subset(np.array([False, False, True]))
    assert sub.uniform(np.array([1]), np.array([0]), PR_STREAM)[0] == u[2]


@pytest.mark.parametrize("which", ["mix64", "uniform"])
def test_the_kernels_compute_the_same_bits(which):
    kernels = pytest.importorskip("fedforest.prediction.numba_kernels")
    values = np.random.default_rng(5).integers(0, 2**63, size=500, dtype=np.uint64) * 3
    other = values[::-1].copy()
    if which == "mix64":
        got = np.array([kernels._mix64(v) for v in values], dtype=np.uint64)
        assert np.array_equal(got, mix64(values))
    else:
        got = np.array([kernels._uniform(a, b) for a, b in zip(values, other, strict=True)])
        assert np.array_equal(got, uniforms(values, other))


# ------------------------------------------------- a row's prediction, alone
@pytest.mark.parametrize("strategy", (*STRATEGIES, "auto"))
def test_a_rows_risk_does_not_depend_on_its_batch(pooled, strategy):
    X = pooled[3]
    order = np.random.default_rng(0).permutation(len(X))
    results = {}
    for engine in engines():
        clf = estimator(pooled, strategy, engine)
        whole = clf.predict_proba(X)
        one = np.vstack([clf.predict_proba(X.iloc[[i]]) for i in range(len(X))])
        shuffled = clf.predict_proba(X.iloc[order])
        doubled = clf.predict_proba(X.iloc[np.r_[0 : len(X), 0 : len(X)]])
        assert np.array_equal(one, whole)
        assert np.array_equal(shuffled, whole[order])
        assert np.array_equal(doubled, np.vstack([whole, whole]))
        results[engine] = whole
    if len(results) == 2:
        assert np.array_equal(results["numba"], results["numpy"])


@pytest.mark.parametrize("strategy", ["pr", "ipr", "ss", "mi"])
def test_identical_rows_get_identical_risks(pooled, strategy):
    X = pooled[3]
    copies = X.iloc[[3] * 40 + [5] * 40]
    for engine in engines():
        p = estimator(pooled, strategy, engine).predict_proba(copies)
        assert (p[:40] == p[0]).all() and (p[40:] == p[40]).all()


@pytest.mark.parametrize("strategy", ["pr", "mi", "ss"])
def test_the_compiled_trees_draw_what_the_traversals_draw(pooled, monkeypatch, strategy):
    # every column present but one: the compiled trees' columns of draws, or the walk
    X = pooled[3][SITE_2].dropna()
    compiled = estimator(pooled, strategy, "numpy")
    p_compiled = compiled.predict_proba(X)
    assert compiled.diagnostics_.engine == "compiled"
    monkeypatch.setattr(pooled_module.fastpath, "available", lambda: False)
    walked = estimator(pooled, strategy, "numpy")
    assert np.array_equal(walked.predict_proba(X), p_compiled)
    assert walked.diagnostics_.engine == "numpy"


@pytest.mark.parametrize("strategy", ["pr", "ipr", "ss"])
def test_chunks_and_threads_change_no_draw(pooled, monkeypatch, strategy):
    X = pooled[3]
    reference = {e: estimator(pooled, strategy, e).predict_proba(X) for e in engines()}
    monkeypatch.setattr(traversal, "MAX_PAIRS", 64)
    if "numba" in engines():
        kernels = pytest.importorskip("fedforest.prediction.numba_kernels")
        monkeypatch.setattr(kernels, "ROW_BLOCK", 5)
        monkeypatch.setattr(kernels, "MIN_PAIRS_PER_THREAD", 1)
        monkeypatch.setattr(kernels, "_threads", lambda n_pairs: 3)
    for engine, expected in reference.items():
        assert np.array_equal(estimator(pooled, strategy, engine).predict_proba(X), expected)


@pytest.mark.parametrize("strategy", ["pr", "ipr", "ss", "mi"])
def test_the_seed_changes_the_draws_and_only_the_seed(pooled, strategy):
    X = pooled[3]
    for engine in engines():
        seven = estimator(pooled, strategy, engine, random_state=7).predict_proba(X)
        again = estimator(pooled, strategy, engine, random_state=7).predict_proba(X)
        eight = estimator(pooled, strategy, engine, random_state=8).predict_proba(X)
        assert np.array_equal(seven, again)
        assert not np.array_equal(seven, eight)


@pytest.mark.parametrize("strategy", ["fpv", "mp", "node", "park", "local", "wmp"])
def test_strategies_that_draw_nothing_ignore_the_seed(pooled, strategy):
    X = pooled[3]
    p0 = estimator(pooled, strategy, "numpy", random_state=0).predict_proba(X)
    p1 = estimator(pooled, strategy, "numpy", random_state=12345).predict_proba(X)
    assert np.array_equal(p0, p1)


@pytest.mark.parametrize("strategy", ["pr", "ipr"])
def test_a_regressors_row_does_not_depend_on_its_batch(strategy):
    rng = np.random.default_rng(2)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["age", "bmi", "glucose"])
    days = 3 + 2 * X["glucose"] + X["bmi"] + rng.normal(size=300)
    rf = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0)
    rf.fit(X[:200], days[:200])
    forest = PooledForest.from_sklearn(rf, list(X.columns), owner="site-1")
    imputers = fit_imputers(X[:200], ["glucose"], ["age", "bmi"], owner="site-1", random_state=0)
    test = X[200:][["age", "bmi"]]
    for engine in engines():
        reg = PooledForestRegressor(
            forest,
            strategy=strategy,
            imputers=imputers,
            feature_std=X.std().to_dict(),
            depth_threshold=0,
            random_state=3,
            engine=engine,
        )
        whole = reg.predict(test)
        assert np.array_equal(
            np.concatenate([reg.predict(test.iloc[[i]]) for i in range(50)]), whole[:50]
        )
        assert np.array_equal(reg.predict(test.iloc[::-1]), whole[::-1])
