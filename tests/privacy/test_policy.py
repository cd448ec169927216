"""The privacy: block (privacy/policy.py): validation, and the stricter of two policies."""

from __future__ import annotations

import pytest

from fedforest.errors import ConfigError
from fedforest.privacy.policy import PrivacyPolicy, ThresholdGrid, effective_policy


# ------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("data", "key", "value", "allowed"),
    [
        ({"min_leaf_rows": 0}, "privacy.min_leaf_rows", "0", "an integer in [1, "),
        ({"min_leaf_rows": True}, "privacy.min_leaf_rows", "True", "an integer"),
        ({"min_level_rows": -1}, "privacy.min_level_rows", "-1", "an integer >= 0"),
        (
            {"count_noise_epsilon": 0},
            "privacy.count_noise_epsilon",
            "0",
            "a finite number in [1e-06, 1000000.0]",
        ),
        (
            {"dp_epsilon": "high"},
            "privacy.dp_epsilon",
            "'high'",
            "a finite number in [1e-06, 1000000.0]",
        ),
        ({"k": 5}, "privacy.k", "5", "one of the known keys privacy.min_leaf_rows"),
        ({"share": {"votes": False}}, "privacy.share.votes", "False", "privacy.share.imputers"),
        ({"share": {"imputers": "no"}}, "privacy.share.imputers", "'no'", "true or false"),
        ({"share": [True]}, "privacy.share", "[True]", "a mapping of imputers"),
        (
            {"dp_epsilon": 1, "share": {"surrogates": True}},
            "privacy.share.surrogates",
            "True",
            "false when privacy.dp_epsilon is set",
        ),
        ({"threshold_grid": {}}, "privacy.threshold_grid", "{}", "a mapping with step"),
        ({"threshold_grid": 0.5}, "privacy.threshold_grid", "0.5", "a mapping with step"),
        ({"threshold_grid": {"step": -1}}, "privacy.threshold_grid.step", "-1", "in [1e-09, "),
        (
            {"threshold_grid": {"step": 1, "significant_digits": 2}},
            "privacy.threshold_grid.significant_digits",
            "2",
            "null when privacy.threshold_grid.step is set",
        ),
        (
            {"threshold_grid": {"significant_digits": 0}},
            "privacy.threshold_grid.significant_digits",
            "0",
            "an integer in [1, 15]",
        ),
        (
            {"threshold_grid": {"edges": {"age": [3, 1]}}},
            "privacy.threshold_grid.edges.age",
            "[3, 1]",
            "strictly increasing",
        ),
        (
            {"threshold_grid": {"steps": {"age": 1}, "edges": {"age": [1]}}},
            "privacy.threshold_grid.edges.age",
            "[1]",
            "only one of",
        ),
        (
            {"threshold_grid": {"bins": 3}},
            "privacy.threshold_grid.bins",
            "3",
            "one of the known keys step",
        ),
        ({"feature_ranges": {"age": [5, 5]}}, "privacy.feature_ranges.age", "[5, 5]", "low < high"),
        ({"dp_max_depth": 40}, "privacy.dp_max_depth", "40", "an integer in [1, 16]"),
        (
            {"dp_epsilon": 1, "target_range": [5, 5]},
            "privacy.target_range",
            "[5, 5]",
            "with low < high (public bounds",
        ),
        ({"dp_epsilon": 1, "target_range": [0]}, "privacy.target_range", "[0]", "[low, high]"),
        ({"dp_epsilon": 1, "target_range": 7}, "privacy.target_range", "7", "[low, high]"),
        (
            {"dp_epsilon": 1, "target_range": [0, float("inf")]},
            "privacy.target_range",
            "[0, inf]",
            "two finite numbers",
        ),
        (
            {"dp_epsilon": 1, "target_range": [False, 1]},
            "privacy.target_range",
            "[False, 1]",
            "two finite numbers",
        ),
        (
            {"dp_epsilon": 1, "target_range": ["0", "9"]},
            "privacy.target_range",
            "['0', '9']",
            "two finite numbers",
        ),
        (
            {"count_noise_epsilon": 1, "target_range": [0, 100]},
            "privacy.target_range",
            "[0, 100]",
            "null unless privacy.dp_epsilon is set (only DP mode's regression trees",
        ),
    ],
)
def test_policy_errors_name_file_key_value_and_what_is_allowed(data, key, value, allowed):
    with pytest.raises(ConfigError) as err:
        PrivacyPolicy.from_dict(data, "site_configs/site-1.yaml")
    message = str(err.value)
    assert message.startswith("site_configs/site-1.yaml: ")
    assert f"key '{key}' is {value}" in message
    assert "allowed: " in message and allowed in message


def test_a_policy_round_trips_through_to_dict():
    data = {
        "min_leaf_rows": 5,
        "threshold_grid": {"significant_digits": 2, "steps": {"age": 1.0}, "edges": {"b": [1.0]}},
        "count_noise_epsilon": 0.5,
        "min_level_rows": 3,
        "share": {"imputers": False, "feature_std": True, "surrogates": True, "intersection": True},
        "dp_epsilon": None,
        "dp_trees": 20,
        "dp_max_depth": None,
        "feature_ranges": {"age": [0.0, 120.0]},
        "target_range": None,
        "tree_sample_fraction": 0.5,
        "time_resolution": 30.0,
    }
    policy = PrivacyPolicy.from_dict(data, "job.yaml")
    assert policy.to_dict() == data
    assert PrivacyPolicy.from_dict(policy.to_dict()) == policy
    assert not policy.is_default
    dp = {**data, "dp_epsilon": 2.0, "target_range": [-1.5, 300.0]}
    dp["share"] = {**data["share"], "feature_std": False, "surrogates": False}
    policy = PrivacyPolicy.from_dict(dp, "job.yaml")
    assert policy.target_range == (-1.5, 300.0)
    assert policy.to_dict() == dp
    assert PrivacyPolicy.from_dict(policy.to_dict()) == policy
    # a policy written before target_range existed reads as without one
    old = {k: v for k, v in data.items() if k != "target_range"}
    assert PrivacyPolicy.from_dict(old).target_range is None


def test_check_features_refuses_what_cannot_be_applied():
    grid_policy = PrivacyPolicy.from_dict({"threshold_grid": {"steps": {"age": 1}}}, "site-1.yaml")
    with pytest.raises(ConfigError, match=r"site-1.yaml: .*\['bmi'\] have none"):
        grid_policy.check_features(["age", "bmi"], ["smoker"])
    grid_policy.check_features(["age"], ["smoker"])
    cat_policy = PrivacyPolicy.from_dict({"threshold_grid": {"step": 1, "edges": {"smoker": [0]}}})
    with pytest.raises(ConfigError, match="numeric features only"):
        cat_policy.check_features(["age"], ["smoker"])
    dp = PrivacyPolicy.from_dict({"dp_epsilon": 1, "feature_ranges": {"age": [0, 100]}}, "job.yaml")
    with pytest.raises(ConfigError, match=r"job.yaml: key 'privacy.feature_ranges'.*\['bmi'\]"):
        dp.check_features(["age", "bmi"])


def test_check_task_requires_a_target_range_for_dp_regression_only():
    ranges = {"feature_ranges": {"age": [0, 100]}}
    dp = PrivacyPolicy.from_dict({"dp_epsilon": 1, **ranges}, "site_configs/site-1.yaml")
    dp.check_task("classification")
    with pytest.raises(ConfigError) as err:
        dp.check_task("regression")
    message = str(err.value)
    assert message.startswith("site_configs/site-1.yaml: key 'privacy.target_range' is None")
    assert "a public [low, high] of the target in DP mode" in message
    assert "job.task: regression" in message and "would void the guarantee" in message
    bounded = PrivacyPolicy.from_dict(
        {"dp_epsilon": 1, "target_range": [0, 300], **ranges}, "job.yaml"
    )
    bounded.check_task("regression")
    refused = r"'privacy.target_range' is \[0.0, 300.0\]; allowed: null for job.task: class"
    with pytest.raises(ConfigError, match=refused):
        bounded.check_task("classification")
    # outside DP mode a regression job needs no range: nothing uses one
    PrivacyPolicy.from_dict({"min_leaf_rows": 5, "count_noise_epsilon": 1}).check_task("regression")
    PrivacyPolicy().check_task("regression")
    with pytest.raises(ValueError, match="task='ranking'"):
        PrivacyPolicy().check_task("ranking")


# ---------------------------------------------------------- stricter of two
def policy(source="site.yaml", **data):
    return PrivacyPolicy.from_dict(data, source)


def test_the_stricter_value_wins_for_every_key():
    site_p = policy(
        min_leaf_rows=10,
        min_level_rows=2,
        count_noise_epsilon=1.0,
        share={"imputers": False},
        dp_trees=5,
        feature_ranges={"age": [0, 100], "bmi": [10, 60]},
    )
    job_p = policy(
        "job.yaml",
        min_leaf_rows=3,
        min_level_rows=5,
        dp_epsilon=4.0,
        share={"intersection": False},
        dp_trees=8,
        feature_ranges={"age": [0, 120]},
    )
    out = effective_policy(site_p, job_p)
    assert out.min_leaf_rows == 10 and out.min_level_rows == 5
    assert out.count_noise_epsilon == 1.0 and out.dp_epsilon == 4.0  # None is infinity
    assert out.share == dict.fromkeys(
        ("imputers", "feature_std", "surrogates", "intersection"), False
    )
    assert out.dp_trees == 8  # keys that do not change the guarantee: the job's
    assert out.feature_ranges == {"age": (0.0, 120.0), "bmi": (10.0, 60.0)}
    assert out.target_range is None
    assert out.source == "site.yaml + job.yaml"
    both = effective_policy(policy(count_noise_epsilon=2.0), policy("j", count_noise_epsilon=0.5))
    assert both.count_noise_epsilon == 0.5
    # target_range: the job's when it sets one, else the site's
    site_dp = policy(dp_epsilon=2.0, target_range=[0, 100])
    job_dp = policy("job.yaml", dp_epsilon=1.0, target_range=[0, 50])
    assert effective_policy(site_dp, job_dp).target_range == (0.0, 50.0)
    assert effective_policy(site_dp, PrivacyPolicy()).target_range == (0.0, 100.0)
    assert effective_policy(PrivacyPolicy(), job_dp).target_range == (0.0, 50.0)
    # a job can never loosen a hospital's policy
    assert effective_policy(site_p, PrivacyPolicy()).to_dict() == site_p.to_dict()
    assert effective_policy(PrivacyPolicy(), PrivacyPolicy()).is_default


def test_grids_merge_to_the_coarser_one_or_are_refused():
    def grid_of(source, **grid):
        return policy(source, threshold_grid=grid)

    merged = effective_policy(grid_of("site.yaml", step=0.5), PrivacyPolicy()).threshold_grid
    assert merged == ThresholdGrid(("step", 0.5), {})
    merged = effective_policy(grid_of("site.yaml", step=0.5), grid_of("job.yaml", step=1.5))
    assert merged.threshold_grid.default == ("step", 1.5)
    merged = effective_policy(
        grid_of("site.yaml", significant_digits=3), grid_of("job.yaml", significant_digits=2)
    )
    assert merged.threshold_grid.default == ("digits", 2)
    # public edges that lie on the hospital's step are coarser than it, feature by feature
    merged = effective_policy(
        grid_of("site.yaml", step=0.5), grid_of("job.yaml", step=1, edges={"age": [20, 40.5]})
    ).threshold_grid
    assert merged.default == ("step", 1.0) and merged.features == {"age": ("edges", (20.0, 40.5))}
    with pytest.raises(ConfigError) as err:
        effective_policy(grid_of("site.yaml", step=0.5), grid_of("job.yaml", step=0.3))
    message = str(err.value)
    assert "site.yaml" in message and "job.yaml" in message
    assert "step 0.5 (site.yaml) against step 0.3 (job.yaml)" in message
    with pytest.raises(ConfigError, match="feature 'age'"):
        effective_policy(
            grid_of("site.yaml", step=1, edges={"age": [18, 65]}),
            grid_of("job.yaml", step=1, edges={"age": [20, 60]}),
        )


def test_of_two_time_resolutions_the_coarser_applies_and_unnested_ones_are_refused():
    hospital = PrivacyPolicy.from_dict({"time_resolution": 30}, "local/fedforest.yaml")
    assert effective_policy(hospital, PrivacyPolicy()).time_resolution == 30
    job = PrivacyPolicy.from_dict({"time_resolution": 90}, "job.yaml")
    assert effective_policy(hospital, job).time_resolution == 90
    assert effective_policy(job, hospital).time_resolution == 90  # a job never loosens it
    with pytest.raises(ConfigError) as err:
        effective_policy(hospital, PrivacyPolicy.from_dict({"time_resolution": 45}, "job.yaml"))
    assert str(err.value).startswith(
        "local/fedforest.yaml and job.yaml: key 'privacy.time_resolution' is 30 "
        "(local/fedforest.yaml) and key 'privacy.time_resolution' is 45 (job.yaml)"
    )
    for bad in (0, -7, "30d", True, float("nan")):
        with pytest.raises(ConfigError, match="key 'privacy.time_resolution' is"):
            PrivacyPolicy.from_dict({"time_resolution": bad}, "site.yaml")
    # it changes nothing in a job of another task: a hospital's file may set it for all
    for task in ("classification", "regression"):
        hospital.check_task(task)
