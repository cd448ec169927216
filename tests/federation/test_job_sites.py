"""The job's settings against the sites' data, in each validation mode (job_sites.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from fedforest.errors import ConfigError
from fedforest.federation.config import JobConfig, SiteConfig
from fedforest.federation.job_sites import check_job_against_sites


def site(tmp_path, outcome, validation=None) -> SiteConfig:
    path = tmp_path / "site-1.csv"
    n = len(outcome)
    pd.DataFrame(
        {
            "age": [30 + (7 * i) % 41 for i in range(n)],
            "bmi": [20 + i % 7 for i in range(n)],
            "y": outcome,
        }
    ).to_csv(path, index=False)
    data = {"site": "site-1", "data_path": str(path), "target": "y", "validation": validation}
    return SiteConfig.from_dict(data, "site-1.yaml", validation="oob")


def job(**evaluation) -> JobConfig:
    return JobConfig.from_dict(
        {"job": {"sites": ["site-1", "site-2"], "seed": 1}, "evaluation": evaluation}, "job.yaml"
    )


def test_a_class_needs_a_validation_row_only_when_the_site_holds_out(tmp_path):
    # seed 1: the holdout split leaves the 2 rows of class 1 one validation and one test row,
    # none to train on; without validation rows one of them trains
    outcome = [0] * 98 + [1] * 2
    with pytest.raises(ConfigError) as info:
        check_job_against_sites(job(), {"site-1": site(tmp_path, outcome, "holdout")})
    text = str(info.value)
    assert text.startswith("site-1.yaml: the data file") and "0 training, 1 validation" in text
    check_job_against_sites(job(), {"site-1": site(tmp_path, outcome)})  # the job's oob


def test_the_training_rows_of_an_oob_site_are_every_row_but_its_test_rows(tmp_path):
    config = site(tmp_path, [0, 1] * 20)  # 40 rows: 30 training rows with oob, 22 with holdout
    leaves = job(validation="oob")
    leaves.forest = leaves.forest.__class__(**{**leaves.forest.to_dict(), "min_samples_leaf": 15})
    check_job_against_sites(leaves, {"site-1": config})
    held = site(tmp_path, [0, 1] * 20, "holdout")
    with pytest.raises(ConfigError, match="gives 22 training rows"):
        check_job_against_sites(leaves, {"site-1": held})
