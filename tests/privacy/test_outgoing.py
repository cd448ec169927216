"""What a policy lets leave, decided on the message alone: real scikit-learn forests, no FLARE."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from fedforest.errors import ConfigError
from fedforest.federation.training import fit_site_models
from fedforest.model.forest import NODE_FIELDS, PooledForest
from fedforest.model.imputers import ImputerSet
from fedforest.privacy.audit import check_forest
from fedforest.privacy.outgoing import (
    DP_MASK_SCORE,
    Refusal,
    check_mask_score,
    check_rows,
    check_vote,
    cut_between_codes,
    enforced_policy,
    filter_policy,
    off_grid,
    reported_policy,
    tighten_forest,
    tighten_models,
)
from fedforest.privacy.policy import PrivacyPolicy, ThresholdGrid

from .privacy_data import LEVELS, fitted_site, hand_forest

STEP = ThresholdGrid(("step", 0.5))


@pytest.fixture(scope="module")
def site():
    """A site's forest with surrogate splits and imputers, as SiteRunner.train fits it."""
    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame(
        {
            "a": rng.normal(50, 10, n),
            "b": rng.normal(0, 1, n),
            "c": rng.normal(0, 1, n),
            "grade": rng.integers(0, 3, n).astype(float),
        }
    )
    y = ((X["a"] - 50) / 10 + X["c"] + 0.5 * X["grade"] + rng.normal(0, 0.5, n) > 0.5).astype(int)
    return fit_site_models(
        "site-2",
        X,
        y,
        own=["a", "b", "c", "grade"],
        shared=["a", "b", "grade"],
        categories={"grade": ["x", "y", "z"]},
        forest_params={"n_estimators": 5},
        random_state=0,
        intersection_columns=["a", "b", "grade"],
    )


def with_threshold(forest: PooledForest, node: int, value: float) -> PooledForest:
    keys = ("feature_names", "classes", "owners", "categories", "tree_start", "tree_owner", "value")
    fields = {k: getattr(forest, k) for k in (*keys, *NODE_FIELDS) if k != "threshold"}
    threshold = forest.threshold.copy()
    threshold[node] = value
    return PooledForest(threshold=threshold, **fields)


# ------------------------------------------------------------------------- the policy
def test_the_filter_policy_reads_its_arguments_and_a_file(tmp_path):
    policy = filter_policy(min_leaf_rows=20, share={"surrogates": False}, source="F")
    assert policy.min_leaf_rows == 20 and policy.share["surrogates"] is False
    with pytest.raises(ConfigError, match="F: argument 'threshold_grid.stp'"):
        filter_policy(threshold_grid={"stp": 1}, source="F")
    path = tmp_path / "fedforest.yaml"
    path.write_text(yaml.safe_dump({"privacy": {"min_leaf_rows": 8, "min_level_rows": 30}}))
    both = filter_policy(min_leaf_rows=3, policy_file=path, source="F")
    assert both.min_leaf_rows == 8 and both.min_level_rows == 30  # the stricter per key
    with pytest.raises(ConfigError, match="F: argument 'policy_file' is '.*missing.yaml'"):
        filter_policy(policy_file=tmp_path / "missing.yaml", source="F")
    (tmp_path / "other.yaml").write_text("data_path: x.csv\n")
    with pytest.raises(ConfigError, match="other.yaml: key 'privacy' is missing"):
        filter_policy(policy_file=tmp_path / "other.yaml")


def test_the_enforced_policy_leaves_out_what_needs_the_rows():
    dp = PrivacyPolicy.from_dict(
        {"dp_epsilon": 1.0, "feature_ranges": {"a": [0, 1]}, "min_leaf_rows": 7}
    )
    enforced = enforced_policy(dp)
    assert enforced.min_leaf_rows == 7 and not enforced.dp and enforced.threshold_grid is None
    grid = PrivacyPolicy(min_leaf_rows=3, threshold_grid=STEP, min_level_rows=30)
    assert enforced_policy(grid).threshold_grid == STEP
    assert enforced_policy(grid).min_level_rows == PrivacyPolicy().min_level_rows


# ------------------------------------------------------------------------- aggregates
def test_an_aggregate_under_k_rows_is_refused_naming_the_counts():
    policy = PrivacyPolicy(min_leaf_rows=20)
    check_rows(policy, 20, "the vote")
    with pytest.raises(Refusal, match="the vote describes 19 rows, fewer than min_leaf_rows=20"):
        check_rows(policy, 19, "the vote")


def test_dp_mode_lets_only_the_none_vote_and_the_constant_score_leave():
    dp = PrivacyPolicy.from_dict({"dp_epsilon": 1.0, "feature_ranges": {"a": [0, 1]}})
    check_vote(dp, 50, np.array([True, True]), np.array([0.5, 0.5]))
    with pytest.raises(Refusal, match="'none' selector"):
        check_vote(dp, 50, np.array([True, False]), np.array([0.5, 0.5]))
    with pytest.raises(Refusal, match="'none' selector"):
        check_vote(dp, 50, np.array([True, True]), np.array([0.9, 0.1]))
    check_mask_score(dp, DP_MASK_SCORE, 40)
    with pytest.raises(Refusal, match="in DP mode a site scores every mask 0.0"):
        check_mask_score(dp, 0.7, 40)
    # outside DP mode a selected vote and a real score leave
    check_vote(PrivacyPolicy(), 50, np.array([True, False]), np.array([0.9, 0.1]))
    check_mask_score(PrivacyPolicy(), 0.7, 40)


def test_the_reported_policy_is_tightened_with_what_the_filter_enforced():
    filt = PrivacyPolicy(min_leaf_rows=20, share={**PrivacyPolicy().share, "imputers": False})
    reported = PrivacyPolicy(min_leaf_rows=5, min_level_rows=30).to_dict()
    out = reported_policy(filt, reported)
    assert out["min_leaf_rows"] == 20 and out["min_level_rows"] == 30
    assert out["share"]["imputers"] is False
    assert reported_policy(filt, None)["min_leaf_rows"] == 20  # a version 1 reply
    # grids that do not nest: the filter's grid is the one reported
    site = PrivacyPolicy(threshold_grid=ThresholdGrid(("step", 0.3))).to_dict()
    assert reported_policy(PrivacyPolicy(threshold_grid=STEP), site)["threshold_grid"] == {
        "step": 0.5
    }


# ---------------------------------------------------------------------------- forests
def test_a_threshold_off_the_grid_is_found_per_node():
    forest = hand_forest(4)  # thresholds 0.0 and 1.0 on x
    assert not off_grid(forest, STEP, forest.feature, forest.threshold).any()
    moved = with_threshold(forest, 2, 1.2)
    assert off_grid(moved, STEP, moved.feature, moved.threshold).tolist() == [
        False,
        False,
        True,
        False,
        False,
    ]


def test_categorical_thresholds_move_to_the_cut_between_codes_and_route_alike():
    _, _, _, forest = fitted_site()
    cat = forest.feature == forest.feature_names.index("cat")
    at_cut = cat & (np.floor(forest.threshold) + 0.5 == forest.threshold)
    node = int(np.flatnonzero(at_cut)[0])
    shifted = with_threshold(forest, node, forest.threshold[node] - 0.25)  # between codes
    off = int(np.sum(cat & (np.floor(shifted.threshold) + 0.5 != shifted.threshold)))
    out, moved = cut_between_codes(shifted)
    assert moved == off and out.threshold[node] == forest.threshold[node]
    assert not off_grid(out, STEP, out.feature, out.threshold)[cat].any()
    for code in range(len(LEVELS)):  # every code is routed as before, at every node
        assert np.array_equal(code <= shifted.threshold[cat], code <= out.threshold[cat])
    assert np.array_equal(out.threshold[~cat], forest.threshold[~cat])  # numeric ones stay
    assert cut_between_codes(out) == (out, 0)


def test_a_forest_is_pruned_stripped_and_checked(site):
    policy = PrivacyPolicy(min_leaf_rows=20, share={**PrivacyPolicy().share, "surrogates": False})
    assert site.forest.n_node_samples.min() < 20 and np.any(site.forest.surrogate_feature >= 0)
    notes: list[str] = []
    out = tighten_forest(policy, site.forest, "forest", notes)
    assert out.n_node_samples.min() >= 20 and not np.any(out.surrogate_feature >= 0)
    assert check_forest(out, policy) == []
    assert any("surrogate splits removed (share.surrogates false)" in n for n in notes)
    assert any("nodes under min_leaf_rows=20 pruned" in n for n in notes)
    noisy = tighten_forest(PrivacyPolicy(min_leaf_rows=10, count_noise_epsilon=0.5), out, "f", [])
    assert noisy.n_node_samples.min() >= 10


def test_an_off_grid_split_is_refused_naming_features_and_counts_never_a_value(site):
    values = {repr(float(t)) for t in site.forest.threshold[site.forest.feature >= 0]}
    with pytest.raises(Refusal) as err:
        tighten_forest(PrivacyPolicy(threshold_grid=STEP), site.forest, "forest", [])
    message = str(err.value)
    assert (
        message.startswith("forest: ") and "split thresholds are off the threshold grid" in message
    )
    assert "on 'a'" in message and not any(v in message for v in values)
    partial = PrivacyPolicy(threshold_grid=ThresholdGrid(None, {"a": ("step", 1.0)}))
    with pytest.raises(Refusal, match=r"the grid has no rule for \['b', 'c'\]"):
        tighten_forest(partial, site.forest, "forest", [])


def test_a_forest_without_a_tree_of_k_rows_is_refused(site):
    with pytest.raises(Refusal, match="every tree describes fewer than min_leaf_rows=10000"):
        tighten_forest(PrivacyPolicy(min_leaf_rows=10_000), site.forest, "forest", [])


def test_the_share_switches_withhold_parts_of_a_training_reply(site):
    share = PrivacyPolicy().share
    policy = PrivacyPolicy(share={**share, "imputers": False, "intersection": False})
    notes: list[str] = []
    forest, imputers, std, inter = tighten_models(
        policy, site.forest, site.imputers, site.feature_std, site.intersection, notes
    )
    assert len(imputers) == 0 and inter is None and std == site.feature_std
    assert "intersection forest withheld (share.intersection false)" in notes
    # withheld std takes the numeric imputers with it; the categorical ones stay
    no_std = PrivacyPolicy(share={**share, "feature_std": False})
    _, imputers, std, inter = tighten_models(
        no_std, site.forest, site.imputers, site.feature_std, site.intersection, []
    )
    assert std == {} and inter is not None
    assert all(imputers[f].kind == "categorical" for f in imputers)
    assert isinstance(imputers, ImputerSet)


def test_an_intersection_forest_that_cannot_comply_is_withheld_not_refused(site):
    small = hand_forest(4)  # one tree of 10 rows
    notes: list[str] = []
    forest, _, _, inter = tighten_models(
        PrivacyPolicy(min_leaf_rows=20), site.forest, site.imputers, site.feature_std, small, notes
    )
    assert inter is None and forest.n_node_samples.min() >= 20
    assert (
        "intersection forest withheld: intersection forest: every tree describes fewer than "
        "min_leaf_rows=20 rows, so no tree can be sent"
    ) in notes
