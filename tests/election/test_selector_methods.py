"""The local selectors' computations (election/selector_methods.py), on real scikit-learn models.

:mod:`fedforest.election.selectors` chooses a method and checks its inputs; the
arithmetic of each method, tested here, turns a prepared table into scores and
a mask.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
from scipy.stats import chi2_contingency
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import chi2, f_classif
from sklearn.linear_model import LogisticRegression

from fedforest.election import selector_methods as sm
from fedforest.election.selectors import default_params

LOGGER = "fedforest.election.selector_methods"


def data(X, y, is_cat=None, regression=False, names=None, survival=False) -> sm._Data:
    X = np.asarray(X, dtype=np.float64)
    if survival:
        target, classes = y, np.array([])
    else:
        target = np.asarray(y, dtype=np.float64 if regression else np.int64)
        classes = np.array([]) if regression else np.unique(y)
    return sm._Data(
        names=names or [f"f{j}" for j in range(X.shape[1])],
        X=X,
        is_cat=np.zeros(X.shape[1], bool) if is_cat is None else np.asarray(is_cat),
        y=target,
        classes=classes,
        regression=regression,
        survival=survival,
    )


@pytest.fixture(scope="module")
def table():
    """300 rows: two informative numeric columns, a noise column, an informative categorical
    (3 levels) and a constant column; a binary target."""
    rng = np.random.default_rng(11)
    n = 300
    s0, s1, noise = rng.normal(size=(3, n))
    cat = rng.integers(0, 3, size=n).astype(float)
    logit = 2 * s0 - 1.5 * s1 + 1.5 * (cat == 2)
    y = (logit + rng.logistic(size=n) > 0).astype(int)
    X = np.column_stack([s0, s1, noise, cat, np.full(n, 4.0)])
    return data(X, y, is_cat=[False, False, False, True, False])


# ------------------------------------------------------------------ helpers
def test_missing_values_are_filled_by_mean_or_mode(caplog):
    X = np.array(
        [[1.0, 2.0, np.nan], [np.nan, 2.0, np.nan], [3.0, 5.0, np.nan], [5.0, np.nan, np.nan]]
    )
    d = data(X, [0, 1, 0, 1], is_cat=[False, True, False])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        filled = sm._filled(d)
    assert filled[:, 0].tolist() == [1.0, 3.0, 3.0, 5.0]  # the mean of 1, 3, 5
    assert filled[:, 1].tolist() == [2.0, 2.0, 5.0, 2.0]  # the most frequent level
    assert filled[:, 2].tolist() == [0.0] * 4
    assert "column 'f2' is entirely missing; filled with 0" in caplog.text
    assert np.isnan(d.X).sum() == 6  # the table itself is left as it was


def test_the_design_scales_numbers_and_one_hot_encodes_levels(table):
    filled = sm._filled(table)
    design, owner = sm._design(table, filled, numeric="standard")
    assert owner.tolist() == [0, 1, 2, 3, 3, 3, 4]
    assert np.allclose(design[:, :3].mean(axis=0), 0) and np.allclose(design[:, :3].std(axis=0), 1)
    assert np.array_equal(design[:, 3:6].sum(axis=1), np.ones(len(filled)))
    assert np.all(design[:, 6] == 0)  # a constant column becomes zeros
    minmax, _ = sm._design(table, filled, numeric="minmax")
    assert minmax[:, :3].min() == 0.0 and minmax[:, :3].max() == 1.0


def test_p_values_become_scores_up_to_300():
    p = np.array([0.0, 1e-320, 0.01, 1.0, np.nan])
    assert sm._p_to_score(p).tolist() == [300.0, 300.0, 2.0, 0.0, 0.0]
    assert sm._max_by_owner(np.array([0.1, np.nan, 0.5]), np.array([0, 1, 0]), 3).tolist() == [
        0.5,
        0.0,
        0.0,
    ]
    assert sm._min_by_owner(np.array([0.2, 0.01, np.nan]), np.array([0, 0, 1]), 2).tolist() == [
        0.01,
        1.0,
    ]


def test_relative_thresholds_select_scores_above_the_cut_and_never_a_zero(caplog):
    scores = np.array([0.0, 0.1, 0.2, 0.9, np.nan])
    assert sm._relative_mask(scores, "mean", "m").tolist() == [False, False, False, True, False]
    assert sm._relative_mask(scores, "median", "m").tolist() == [False, True, True, True, False]
    assert sm._relative_mask(scores, 0.0, "m").tolist() == [False, True, True, True, False]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert not sm._relative_mask(np.zeros(3), "mean", "mutual_info").any()
    assert "selector 'mutual_info': no score is > 0 and >= 0; nothing selected" in caplog.text


def test_convergence_warnings_are_logged_once_and_others_pass_through(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with pytest.warns(UserWarning, match="another"):
            with sm._silence_convergence("selector 'lasso' (saga)"):
                warnings.warn("no convergence", ConvergenceWarning, stacklevel=1)
                warnings.warn("no convergence", ConvergenceWarning, stacklevel=1)
                warnings.warn("another", UserWarning, stacklevel=1)
    assert "selector 'lasso' (saga) did not converge (2 ConvergenceWarning silenced)" in caplog.text


@pytest.mark.parametrize("l1_ratio", [1.0, 0.5])
def test_the_penalty_arguments_build_a_logistic_regression_without_warnings(l1_ratio):
    kwargs = sm._penalty_kwargs(l1_ratio)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = LogisticRegression(solver="saga", max_iter=200, **kwargs)
        model.fit(np.array([[0.0], [1.0], [2.0], [3.0]]), [0, 0, 1, 1])
    assert model.get_params()["l1_ratio"] in (l1_ratio, None)


# ------------------------------------------------------------------ the methods
def test_f_classif_tests_numbers_by_anova_and_levels_by_chi_square(table):
    scores, mask = sm._f_classif(table, {"alpha": 0.05})
    _, p_num = f_classif(table.X[:, :3], table.y)
    assert np.allclose(scores[:3], -np.log10(p_num))
    counts = np.zeros((3, 2))
    np.add.at(counts, (table.X[:, 3].astype(int), table.y), 1)
    assert scores[3] == pytest.approx(-np.log10(chi2_contingency(counts)[1]))
    assert scores[4] == 0.0  # a constant column is not tested: p = 1
    assert mask.tolist() == [True, True, False, True, False]


def test_f_regression_tests_levels_by_a_one_way_anova_of_the_target(table):
    rng = np.random.default_rng(0)
    y = 3 * table.X[:, 0] + 2 * (table.X[:, 3] == 1) + rng.normal(size=table.n_rows)
    reg = data(table.X, y, is_cat=table.is_cat, regression=True)
    scores, mask = sm._f_regression(reg, {"alpha": 0.01})
    _, p_cat = f_classif(y[:, None], table.X[:, 3].astype(int))
    assert scores[3] == pytest.approx(-np.log10(p_cat[0]))
    assert mask[0] and mask[3] and not mask[4]


def test_chi2_takes_the_smallest_p_value_of_a_columns_dummies(table):
    scores, mask = sm._chi2(table, {"alpha": 0.05})
    design, owner = sm._design(table, sm._filled(table), numeric="minmax")
    _, p = chi2(design[:, 3:6], table.y)
    assert scores[3] == pytest.approx(-np.log10(p.min()))
    assert scores[4] == 0.0 and not mask[4]


def test_lasso_scores_the_largest_coefficient_of_each_column(table):
    params = default_params("lasso")
    scores, mask = sm._linear(table, "lasso", params, random_state=0)
    assert scores[0] > scores[2] and scores[1] > scores[2]
    assert np.array_equal(mask, scores > params["threshold"])
    assert scores[4] == 0.0  # a constant column has no coefficient


def test_a_penalty_that_keeps_nothing_keeps_the_best_column(table, caplog):
    params = {**default_params("lasso"), "C": 1e-6}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        scores, mask = sm._linear(table, "lasso", params, random_state=0)
    assert np.all(scores == 0) and mask.tolist() == [True, False, False, False, False]
    assert "first to enter the regularisation path" in caplog.text and "'f0'" in caplog.text


def test_the_regression_penalty_does_not_depend_on_the_targets_unit(table):
    rng = np.random.default_rng(1)
    y = 2 * table.X[:, 0] - table.X[:, 1] + rng.normal(size=table.n_rows)
    params = default_params("elastic_net")
    hours, _ = sm._linear(data(table.X, y, regression=True), "elastic_net", params, 0)
    minutes, _ = sm._linear(data(table.X, 60 * y + 5, regression=True), "elastic_net", params, 0)
    assert np.allclose(hours, minutes)


def test_impurity_importance_is_the_forests_own(table):
    params = {**default_params("random_forest"), "n_estimators": 20}
    scores = sm._random_forest(table, params, random_state=4)
    rf = RandomForestClassifier(n_estimators=20, random_state=4).fit(table.X, table.y)
    assert np.array_equal(scores, rf.feature_importances_)


def test_permutation_importance_is_held_out_and_never_negative(table, caplog):
    params = {
        **default_params("random_forest"),
        "n_estimators": 10,
        "importance": "permutation",
        "n_repeats": 2,
    }
    scores = sm._random_forest(table, params, random_state=0)
    assert np.all(scores >= 0) and scores[0] > scores[2] and scores[4] == 0.0
    # a class with a single row cannot be stratified: a plain split, said in the log
    y = table.y.copy()
    y[0] = 2
    odd = data(table.X, y, is_cat=table.is_cat)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert np.all(sm._random_forest(odd, params, random_state=0) >= 0)
    assert "held-out split stratified impossible" in caplog.text


def test_mutual_information_leaves_a_constant_column_at_zero(table):
    params = default_params("mutual_info")
    scores = sm._mutual_info(table, params, random_state=0)
    assert scores[0] > scores[2] and scores.shape == (5,)
    y = table.X[:, 0] + 0.1 * np.random.default_rng(2).normal(size=table.n_rows)
    reg = sm._mutual_info(data(table.X, y, is_cat=table.is_cat, regression=True), params, 0)
    assert reg[4] == 0.0 and reg[0] == reg.max()


# --------------------------------------------------------------------------- survival


def _survival(n=300, seed=0, ties=False):
    from sksurv.util import Surv

    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    group = rng.integers(0, 3, size=n)
    time = rng.exponential(np.exp(-0.5 * x - 0.4 * group))
    if ties:
        time = np.ceil(time * 4) / 4
    event = rng.random(n) < 0.7
    return x, group, Surv.from_arrays(event=event, time=time)


def _breslow_log_partial_likelihood(w, Z, y):
    """The log partial likelihood with Breslow's ties, written out row by row."""
    eta = Z @ w
    total = 0.0
    for i in np.flatnonzero(y["event"]):
        at_risk = y["time"] >= y["time"][i]
        total += eta[i] - np.log(np.exp(eta[at_risk]).sum())
    return total


@pytest.mark.parametrize("ties", [False, True])
def test_cox_score_is_the_gradient_and_information_of_the_partial_likelihood(ties):
    x, group, y = _survival(ties=ties)
    Z = np.column_stack([x, group == 1, group == 2]).astype(float)
    U, information = sm._cox_score(y["time"], y["event"], Z, joint=True)
    h = 1e-4
    centre = _breslow_log_partial_likelihood(np.zeros(3), Z, y)
    for j in range(3):
        up = _breslow_log_partial_likelihood(np.eye(3)[j] * h, Z, y)
        down = _breslow_log_partial_likelihood(-np.eye(3)[j] * h, Z, y)
        assert U[j] == pytest.approx((up - down) / (2 * h), rel=1e-6)
        # the information is minus the second derivative at 0
        assert information[j, j] == pytest.approx(-(up - 2 * centre + down) / h**2, rel=1e-3)
    U1, info1 = sm._cox_score(y["time"], y["event"], Z)  # each column on its own
    np.testing.assert_allclose(U1, U)
    np.testing.assert_allclose(info1, np.diag(information))


def test_cox_univariate_without_ties_is_the_log_rank_test():
    from sksurv.compare import compare_survival

    x, group, y = _survival()
    binary = (group == 2).astype(float)
    prepared = data(
        np.column_stack([x, binary, group]), y, is_cat=[False, False, True], survival=True
    )
    scores, mask = sm._cox_univariate(prepared, default_params("cox_univariate"))
    for j, labels in ((1, binary), (2, group)):
        _, p = compare_survival(y, labels)
        assert 10.0 ** -scores[j] == pytest.approx(p, rel=1e-9)
    assert mask.tolist() == (10.0**-scores < 0.05).tolist()


def test_coxnet_is_scikit_survivals_model_on_the_standardized_design():
    from sksurv.linear_model import CoxnetSurvivalAnalysis

    x, group, y = _survival()
    prepared = data(np.column_stack([x, group]), y, is_cat=[False, True], survival=True)
    params = {**default_params("coxnet"), "C": 0.5, "l1_ratio": 0.5}
    scores, _ = sm._coxnet(prepared, params)
    design = np.column_stack([(x - x.mean()) / x.std(), group[:, None] == np.arange(3)])
    model = CoxnetSurvivalAnalysis(alphas=[1 / (0.5 * len(x))], l1_ratio=0.5).fit(design, y)
    coef = np.abs(model.coef_[:, 0])
    np.testing.assert_allclose(scores, [coef[0], coef[1:].max()], rtol=1e-9)
