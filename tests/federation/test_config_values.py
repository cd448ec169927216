"""Checks of single configuration values (federation/config_values.py): a site's privacy
block, the label_map and the selector's parameters."""

from __future__ import annotations

import logging

import pytest

from fedforest.errors import ConfigError
from fedforest.federation import config_values as cv
from fedforest.privacy.policy import JOB_MIN_LEAF_ROWS, JOB_TREE_SAMPLE_FRACTION
from fedforest.validation import ConfigChecker

SOURCE = "site_configs/job.yaml"


def refused(match, fn, *args):
    with pytest.raises(ConfigError, match=match) as info:
        fn(ConfigChecker(SOURCE), *args)
    assert str(info.value).startswith(f"{SOURCE}: key '")
    return str(info.value)


# ------------------------------------------------------------------ a site's privacy block
def test_a_site_without_a_privacy_block_gets_the_jobs_secure_defaults():
    policy = cv._site_privacy(None, "site_configs/site-1.yaml")
    assert policy.min_leaf_rows == JOB_MIN_LEAF_ROWS
    assert policy.tree_sample_fraction == JOB_TREE_SAMPLE_FRACTION
    stricter = cv._site_privacy({"min_leaf_rows": 50}, "s.yaml")
    assert (
        stricter.min_leaf_rows == 50 and stricter.tree_sample_fraction == JOB_TREE_SAMPLE_FRACTION
    )


def test_a_looser_value_set_in_the_file_is_kept_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="fedforest.federation.config_values"):
        policy = cv._site_privacy({"min_leaf_rows": 1, "tree_sample_fraction": 1.0}, "s.yaml")
    assert policy.min_leaf_rows == 1 and policy.tree_sample_fraction == 1.0
    said = caplog.text
    assert f"s.yaml: privacy.min_leaf_rows is 1, below the default of {JOB_MIN_LEAF_ROWS}" in said
    assert "privacy.tree_sample_fraction is 1.0, above the default" in said
    assert "membership inference" in said
    assert cv._looser("min_leaf_rows", 1, 5) and not cv._looser("min_leaf_rows", 9, 5)
    assert cv._looser("tree_sample_fraction", 0.9, 0.5)


def test_dp_mode_gets_no_pruning_default():
    policy = cv._site_privacy({"dp_epsilon": 1.0}, "s.yaml")
    assert policy.dp and policy.min_leaf_rows != JOB_MIN_LEAF_ROWS


# ------------------------------------------------------------------ label_map
def test_label_map_keys_and_values_become_plain_labels():
    out = cv._check_label_map(ConfigChecker(SOURCE), {"Yes": "yes", 2.0: 1, "0": "no"})
    assert out == {"Yes": "yes", 2: 1, "0": "no"}
    assert [cv._scalar_label(v) for v in (True, None, 1.5, " ", float("inf"), [1])] == [None] * 6


def test_a_bad_label_map_names_the_entry_and_what_is_allowed():
    refused(r"key 'label_map' is \['a'\]; allowed: a mapping", cv._check_label_map, ["a"])
    refused(r"key 'label_map' is True; .*quote yes, no", cv._check_label_map, {True: 1})
    refused(r"key 'label_map.a' is None", cv._check_label_map, {"a": None})
    refused("a mapping with one entry per local label", cv._check_label_map, {1: 0, "1": 2})
    message = refused("would merge two outcomes", cv._check_label_map, {"M": 1, "m": 1})
    assert "it maps 'M', 'm' onto one label 1" in message


# ------------------------------------------------------------------ selector_params
def test_the_selectors_own_checks_are_reported_as_keys_of_the_file():
    cv._check_selector_params(ConfigChecker(SOURCE), "lasso", {"C": 0.5})
    message = refused(
        r"key 'selector_params.C' is 0;", cv._check_selector_params, "lasso", {"C": 0}
    )
    assert "allowed: " in message
    refused(
        r"key 'selector' is 'chi2'; allowed: one of .* for job.task: regression",
        cv._check_selector_params,
        "chi2",
        {},
        "regression",
    )
