"""A site's training step under its privacy policy (federation/training.py), real scikit-learn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.errors import PayloadError
from fedforest.federation.training import SiteModels, fit_site_models, pool_site_models
from fedforest.model.pooled_model import PooledModel
from fedforest.privacy.audit import check_forest
from fedforest.privacy.policy import PrivacyPolicy

from .test_site import assert_payload_equal

LEVELS = ["a", "b", "c"]
CATEGORIES = {"ward": LEVELS}
OWN = ["age", "bmi", "lab", "ward"]  # lab and ward are private
SHARED = ["age", "bmi"]
FOREST = {"n_estimators": 8, "max_depth": None, "min_samples_leaf": 1, "max_features": "sqrt"}
SURROGATES = {"min_agreement": 0.25, "min_rows": 6}
RANGES = {"age": [0, 120], "bmi": [10, 60], "lab": [0, 20]}


def table(n: int = 240, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Encoded training rows (global names, category codes) and labels."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": rng.integers(20, 90, n).astype(float),
            "bmi": rng.normal(27, 4, n).round(1),
        }
    )
    X["lab"] = (0.1 * X["age"] + rng.normal(0, 1, n)).round(2)
    X["ward"] = np.clip((X["bmi"] - 22) // 4, 0, 2).astype(float)
    X.loc[rng.random(n) < 0.05, "lab"] = np.nan
    y = ((X["age"] > 55).to_numpy() ^ (rng.random(n) < 0.15)).astype(int)
    return X, y


def fit(policy: PrivacyPolicy | None = None, X=None, y=None, **kwargs) -> SiteModels:
    if X is None:
        X, y = table()
    args = dict(
        forest_params=FOREST,
        surrogate_params=SURROGATES,
        random_state=0,
        intersection_columns=SHARED,
        privacy=policy,
        classes=[0, 1],
    )
    args.update(kwargs)
    return fit_site_models("s1", X, y, OWN, SHARED, CATEGORIES, **args)


def payload(models: SiteModels) -> dict:
    return {
        "forest": models.forest.to_payload(),
        "imputers": models.imputers.to_payload(),
        "feature_std": models.feature_std,
        "intersection": None if models.intersection is None else models.intersection.to_payload(),
    }


def policy(**data) -> PrivacyPolicy:
    return PrivacyPolicy.from_dict(data, "site.yaml")


@pytest.fixture(scope="module")
def plain() -> SiteModels:
    return fit()


def test_the_default_policy_sends_what_was_sent_before(plain):
    assert_payload_equal(payload(plain), payload(fit(PrivacyPolicy())))
    assert np.any(plain.forest.surrogate_feature >= 0)
    assert sorted(imp.kind for imp in plain.imputers.values()) == ["categorical", "numeric"]
    assert set(plain.feature_std) == {"age", "bmi", "lab"}
    assert plain.intersection is not None


def test_min_leaf_rows_grows_the_forest_with_that_leaf_size():
    """Leaves of k rows come from scikit-learn itself: the same forest as min_samples_leaf=k."""
    strict = fit(policy(min_leaf_rows=12))
    assert strict.forest.n_node_samples.min() >= 12
    assert strict.intersection.n_node_samples.min() >= 12
    same = fit(PrivacyPolicy(), forest_params={**FOREST, "min_samples_leaf": 12})
    assert_payload_equal(payload(strict), payload(same))
    # a larger min_samples_leaf of the job is kept
    larger = fit(policy(min_leaf_rows=3), forest_params={**FOREST, "min_samples_leaf": 12})
    assert_payload_equal(payload(larger), payload(same))


def test_a_threshold_grid_applies_to_both_forests():
    strict = policy(min_leaf_rows=10, threshold_grid={"step": 1.0, "steps": {"lab": 0.25}})
    models = fit(strict)
    for forest in (models.forest, models.intersection):
        assert check_forest(forest, strict) == []
    lab = models.forest.feature_names.index("lab")
    thresholds = models.forest.threshold[models.forest.feature == lab]
    assert np.all(thresholds[np.isfinite(thresholds)] % 0.25 == 0)


def test_withheld_parts_are_not_sent(plain):
    models = fit(policy(share={"imputers": False}))
    assert len(models.imputers) == 0 and models.feature_std == plain.feature_std
    models = fit(policy(share={"surrogates": False}))
    assert np.all(models.forest.surrogate_feature == -1) and len(models.imputers) == 2
    models = fit(policy(share={"intersection": False}))
    assert models.intersection is None
    assert_payload_equal(models.forest.to_payload(), plain.forest.to_payload())


def test_withholding_the_std_also_withholds_numeric_imputers(plain):
    models = fit(policy(share={"feature_std": False}))
    assert models.feature_std == {}
    assert models.imputers.features == ["ward"]  # the categorical one needs no σ
    assert_payload_equal(
        models.imputers.to_payload(), type(plain.imputers)([plain.imputers["ward"]]).to_payload()
    )
    # pooled with a site that has no 'lab': the bundle is valid (no numeric imputer without σ)
    X, y = table(seed=1)
    other = fit_site_models("s2", X, y, SHARED, SHARED, CATEGORIES, FOREST, SURROGATES, 0)
    pooled = pool_site_models([models, other])
    assert "lab" not in pooled.feature_std
    bundle = PooledModel(pooled.forest, pooled.imputers, pooled.feature_std).to_payload()
    assert PooledModel.from_payload(bundle).imputers.features == ["ward"]
    # had it sent its numeric imputer, the bundle would be refused
    leaky = SiteModels(models.forest, plain.imputers, {}, None)
    pooled = pool_site_models([leaky, other])
    bundle = PooledModel(pooled.forest, pooled.imputers, pooled.feature_std).to_payload()
    with pytest.raises(PayloadError, match="no entry for 'lab', which has a numeric imputer"):
        PooledModel.from_payload(bundle)


def test_count_noise_comes_from_the_operating_system_not_the_seed():
    noisy = policy(count_noise_epsilon=1.0, threshold_grid={"step": 0.5})
    a, b = fit(noisy), fit(noisy)
    for key in ("children_left", "feature", "threshold"):
        np.testing.assert_array_equal(getattr(a.forest, key), getattr(b.forest, key))
    assert not np.array_equal(a.forest.value, b.forest.value)


def test_dp_mode_sends_random_trees_only():
    dp = policy(dp_epsilon=4.0, dp_trees=6, dp_max_depth=3, feature_ranges=RANGES)
    X, y = table()
    models = fit(dp, X, y)
    assert len(models.imputers) == 0 and models.feature_std == {}
    for forest in (models.forest, models.intersection):
        assert forest.n_trees == 6 and forest.node_depth.max() <= 3
        assert forest.owners == ["s1"] and forest.classes.tolist() == [0, 1]
        assert np.all(forest.surrogate_feature == -1)
    assert models.forest.feature_names == OWN and models.intersection.feature_names == SHARED
    alone = fit(policy(dp_epsilon=4.0, feature_ranges=RANGES, share={"intersection": False}))
    assert alone.intersection is None
    # the structure comes from the seed and the public ranges only
    X2, y2 = X.copy(), y.copy()
    X2.loc[5, ["age", "lab"]] = [119.0, 0.5]
    y2[5] = 1 - y2[5]
    again = fit(dp, X2, y2)
    other_seed = fit(dp, X, y, random_state=1)
    for name in ("forest", "intersection"):
        first, second = getattr(models, name), getattr(again, name)
        for key in ("tree_start", "children_left", "children_right", "feature", "threshold"):
            np.testing.assert_array_equal(getattr(first, key), getattr(second, key))
        assert not np.array_equal(first.threshold, getattr(other_seed, name).threshold)


def test_dp_trees_cover_every_class_of_the_job():
    dp = policy(dp_epsilon=4.0, feature_ranges=RANGES)
    models = fit(dp, classes=[0, 1, 2])
    assert models.forest.classes.tolist() == [0, 1, 2]


def test_dp_trees_are_pruned_on_their_noisy_counts():
    dp = policy(dp_epsilon=50.0, dp_max_depth=6, min_leaf_rows=15, feature_ranges=RANGES)
    models = fit(dp)
    assert models.forest.n_node_samples.min() >= 15
    assert models.intersection.n_node_samples.min() >= 15


# --------------------------------------------------------------------------- in-bag records
def test_the_site_keeps_the_in_bag_records_of_what_it_sends(plain):
    from sklearn.ensemble import RandomForestClassifier

    from fedforest.model.in_bag import sample_counts

    X, y = table()
    rf = RandomForestClassifier(**FOREST, random_state=0, n_jobs=1)
    rf.fit(X[OWN].to_numpy(dtype=np.float32), y)
    expected = sample_counts(rf, len(X)) > 0
    assert plain.in_bag.site == "s1" and plain.in_bag.n_rows == len(X)
    assert np.array_equal(plain.in_bag.matrix(plain.forest), expected)
    assert plain.intersection_in_bag.matrix(plain.intersection).shape == (8, len(X))
    # the pooled model holds them under other sites' trees too
    other = fit(X=table(seed=5)[0], y=table(seed=5)[1])
    other.forest.owners = ["s2"]
    pooled = pool_site_models([other, plain])
    matrix = plain.in_bag.matrix(pooled.forest)
    assert not matrix[:8].any() and np.array_equal(matrix[8:], expected)
    assert pooled.in_bag is None  # a pooled model has no record


def test_the_record_follows_the_trees_through_the_transforms():
    """A small tree sample, min_leaf_rows and count noise: each entry is its tree's sample."""
    from sklearn.ensemble import RandomForestClassifier

    from fedforest.federation.training import forest_params_for
    from fedforest.model.in_bag import sample_counts

    strict = policy(min_leaf_rows=20, tree_sample_fraction=0.2, count_noise_epsilon=2.0)
    X, y = table()
    models = fit(strict, X=X, y=y, forest_params={**FOREST, "n_estimators": 30})
    params = forest_params_for(strict, {**FOREST, "n_estimators": 30}, len(X))
    rf = RandomForestClassifier(**params, random_state=0, n_jobs=1)
    rf.fit(X[OWN].to_numpy(dtype=np.float32), y)
    samples = sample_counts(rf, len(X)) > 0
    record = models.in_bag
    assert record.n_trees == models.forest.n_trees
    # every entry is the sample of one of the trees, in their order
    origin = [int(np.flatnonzero((samples == row).all(axis=1))[0]) for row in record.in_bag]
    assert origin == sorted(set(origin))
    assert np.array_equal(record.matrix(models.forest), samples[origin])


def test_dp_trees_count_as_trained_on_every_row():
    models = fit(policy(dp_epsilon=1.0, feature_ranges=RANGES, min_leaf_rows=5))
    assert models.in_bag.matrix(models.forest).all()


def test_the_forest_sent_is_the_one_sent_before_records_were_kept():
    from sklearn.ensemble import RandomForestClassifier

    from fedforest.federation.training import forest_params_for
    from fedforest.model.forest import PooledForest
    from fedforest.privacy.transforms import bootstrap_weights, prepare_forest

    strict = policy(min_leaf_rows=15, threshold_grid={"step": 1.0}, tree_sample_fraction=0.5)
    X, y = table()
    params = forest_params_for(strict, FOREST, len(X))
    rf = RandomForestClassifier(**params, random_state=0, n_jobs=1)
    own = ["age", "bmi"]
    rf.fit(X[own].to_numpy(dtype=np.float32), y)
    forest = PooledForest.from_sklearn(rf, own, owner="s1", X=X[own])
    before = prepare_forest(forest, strict, X[own], y, in_bag=bootstrap_weights(rf, len(X)))
    models = fit_site_models(
        "s1", X, y, own, own, {}, FOREST, SURROGATES, random_state=0, privacy=strict
    )
    assert_payload_equal(models.forest.to_payload(), before.to_payload())


# --------------------------------------------------------------------------- survival trees
def survival_table(n: int = 240):
    from fedforest.survival_metrics import survival_target

    X, _ = table(n)
    rng = np.random.default_rng(1)
    time = rng.exponential(200 * np.exp(-(X["age"].to_numpy() - 55) / 20))
    event = rng.random(n) < 0.5
    return X, survival_target(time.round(1) + 0.5, event)


def test_a_survival_site_sends_survival_trees_on_the_grid_with_k_events_per_leaf():
    from fedforest.privacy.survival import node_events

    pytest.importorskip("sksurv")
    X, y = survival_table()
    grid = [30.0, 60.0, 120.0, 240.0, 480.0]
    k = 6
    models = fit(policy(min_leaf_rows=k), X, y, task="survival", times=grid, classes=[])
    for forest, columns in ((models.forest, OWN), (models.intersection, SHARED)):
        assert forest.is_survival and forest.times.tolist() == grid
        assert forest.value.shape[1] == 2 * len(grid)
        assert forest.n_node_samples[forest.feature < 0].min() >= k
        events = node_events(forest, X[columns], y["event"])  # every training row once
        assert events[forest.feature < 0].min() >= k
    # the in-bag record follows the trees the transforms kept
    assert models.records[0].n_trees == models.forest.n_trees
    with pytest.raises(ValueError, match="needs the job's time grid"):
        fit(None, X, y, task="survival", classes=[])
