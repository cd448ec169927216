"""Numeric privacy keys: every value that would overflow or underflow is refused at reading."""

from __future__ import annotations

import pytest

from fedforest.errors import ConfigError
from fedforest.privacy.policy import MAX_EPSILON, MIN_EPSILON, PrivacyPolicy

SOURCE = "site_configs/site-1.yaml"
HOSTILE = [1e-320, 5e-324, 1e-300, 1e-7, -0.0, 0.0, -1.0, float("inf"), float("nan"), 1e300]


@pytest.mark.parametrize("key", ["count_noise_epsilon", "dp_epsilon"])
@pytest.mark.parametrize("value", HOSTILE)
def test_a_noise_budget_outside_its_range_is_refused_with_key_value_and_range(key, value):
    with pytest.raises(ConfigError) as err:
        PrivacyPolicy.from_dict({key: value}, SOURCE)
    text = str(err.value)
    assert text.startswith(f"{SOURCE}: key 'privacy.{key}' is ")
    assert f"allowed: a finite number in [{MIN_EPSILON}, {MAX_EPSILON}]" in text


@pytest.mark.parametrize("key", ["count_noise_epsilon", "dp_epsilon"])
@pytest.mark.parametrize("value", [MIN_EPSILON, 0.1, 1, 8.0, MAX_EPSILON])
def test_a_noise_budget_inside_the_range_reads(key, value):
    assert getattr(PrivacyPolicy.from_dict({key: value}, SOURCE), key) == float(value)


@pytest.mark.parametrize("text", ["1e-320", "1e-5", "1E3"])
def test_a_number_yaml_reads_as_text_is_refused_with_how_to_write_it(text):
    with pytest.raises(ConfigError) as err:
        PrivacyPolicy.from_dict({"count_noise_epsilon": text}, SOURCE)
    assert f"is {text!r}" in str(err.value) and "1.0e-5" in str(err.value)


@pytest.mark.parametrize("step", [1e-320, 1e-12, 0.0, -0.0, float("inf"), 1e39])
def test_a_threshold_step_that_overflows_threshold_over_step_is_refused(step):
    for block in ({"step": step}, {"steps": {"age": step}}):
        with pytest.raises(ConfigError, match=r"threshold_grid\.(step|steps\.age)' is"):
            PrivacyPolicy.from_dict({"threshold_grid": block}, SOURCE)


@pytest.mark.parametrize("bounds", [[0, 1e39], [-1e39, 0], [0, float("inf")], [-1e308, 1e308]])
def test_public_ranges_beyond_float32_are_refused(bounds):
    with pytest.raises(ConfigError, match=r"feature_ranges\.age' is"):
        PrivacyPolicy.from_dict({"dp_epsilon": 1, "feature_ranges": {"age": bounds}}, SOURCE)
    with pytest.raises(ConfigError, match=r"target_range' is .*magnitude at most 3\.402823e\+38"):
        PrivacyPolicy.from_dict({"dp_epsilon": 1, "target_range": bounds}, SOURCE)


def test_tree_sample_fraction_below_the_default_is_no_loosening(caplog, tmp_path):
    from fedforest.federation.config import SiteConfig

    base = {"site": "site-1", "data_path": "x.csv", "target": "y"}
    with caplog.at_level("WARNING"):
        SiteConfig.from_dict({**base, "privacy": {"tree_sample_fraction": 0.0001}}, SOURCE)
    assert not [r for r in caplog.records if "tree_sample_fraction" in r.getMessage()]
    with caplog.at_level("WARNING"):
        SiteConfig.from_dict({**base, "privacy": {"tree_sample_fraction": 0.9}}, SOURCE)
    warned = [r.getMessage() for r in caplog.records if "tree_sample_fraction" in r.getMessage()]
    assert warned and "0.9, above the default of 0.3" in warned[0]
    caplog.clear()
    with caplog.at_level("WARNING"):
        SiteConfig.from_dict({**base, "privacy": {"min_leaf_rows": 50}}, SOURCE)
    assert not [r for r in caplog.records if "min_leaf_rows" in r.getMessage()]
    with caplog.at_level("WARNING"):
        SiteConfig.from_dict({**base, "privacy": {"min_leaf_rows": 2}}, SOURCE)
    warned = [r.getMessage() for r in caplog.records if "min_leaf_rows" in r.getMessage()]
    assert warned and "2, below the default of 5" in warned[0]
