"""The schema phase's rules, applied where the job is built."""

from __future__ import annotations

import os
import unicodedata

import numpy as np
import pandas as pd
import pytest

from fedforest.errors import ConfigError
from fedforest.federation.build_checks import check_sites_at_build, refuse_shared_data_files
from fedforest.federation.config import JobConfig, SiteConfig

SITES = ["site-1", "site-2", "site-3"]


def frame(n=60, seed=0, **extra) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    out = pd.DataFrame(
        {
            "age": rng.integers(20, 90, n).astype(float),
            "bmi": rng.normal(27, 4, n).round(1),
            "smoker": rng.choice(["never", "former", "current"], n),
        }
    )
    for name, values in extra.items():
        out[name] = values
    out["outcome"] = np.arange(n) % 2
    return out


def sites(tmp_path, frames: dict, **keys) -> dict:
    out = {}
    for name, table in frames.items():
        path = tmp_path / f"{name}.csv"
        if not path.exists():
            table.to_csv(path, index=False)
        data = {"site": name, "data_path": str(path), "target": "outcome", **keys.get(name, {})}
        out[name] = SiteConfig.from_dict(data, f"site_configs/{name}.yaml")
    return out


def job(names=SITES) -> JobConfig:
    return JobConfig.from_dict({"job": {"sites": list(names)}}, "site_configs/job.yaml")


def test_sites_that_fit_give_the_schema_the_job_would_build(tmp_path):
    configs = sites(tmp_path, {s: frame(seed=i) for i, s in enumerate(SITES)})
    schema = check_sites_at_build(job(), configs)
    assert schema.features == ["age", "bmi", "smoker"] and schema.classes == [0, 1]


def test_levels_that_read_alike_across_sites_are_refused_naming_the_files(tmp_path):
    upper = frame(seed=1)
    upper["smoker"] = upper["smoker"].str.upper()
    configs = sites(tmp_path, {"site-1": frame(), "site-2": upper, "site-3": frame(seed=2)})
    with pytest.raises(ConfigError) as err:
        check_sites_at_build(job(), configs)
    text = str(err.value)
    assert "site_configs/site-2.yaml" in text and "levels of categorical column 'smoker'" in text
    assert "'NEVER' at 'site-2'" in text and "{'CURRENT': 'current'" in text


@pytest.mark.parametrize(
    "spelling", ["BMI", "bm\u200bi", unicodedata.normalize("NFD", "bmé"), "bmi\u2060"]
)
def test_column_names_that_read_alike_across_sites_are_refused(tmp_path, spelling):
    base = "bmé" if "\u0301" in spelling else "bmi"
    one, two = frame(), frame(seed=1)
    one = one.rename(columns={"bmi": unicodedata.normalize("NFC", base)})
    two = two.rename(columns={"bmi": spelling})
    renames = {}
    if "\u200b" in spelling or "\u2060" in spelling:  # a name with an invisible character:
        renames = {"site-2": {"renames": {spelling: "bmi"}}}  # the site rule's own fix works
        configs = sites(tmp_path, {"site-1": one, "site-2": two}, **renames)
        assert check_sites_at_build(job(["site-1", "site-2"]), configs) is not None
        return
    configs = sites(tmp_path, {"site-1": one, "site-2": two})
    with pytest.raises(ConfigError, match="column names differ only by case") as err:
        check_sites_at_build(job(["site-1", "site-2"]), configs)
    assert "site_configs/site-1.yaml" in str(err.value)


def test_class_labels_of_two_types_are_refused(tmp_path):
    text_labels = frame(seed=1)
    text_labels["outcome"] = np.where(text_labels["outcome"] == 1, "yes", "no")
    configs = sites(tmp_path, {"site-1": frame(), "site-2": text_labels})
    with pytest.raises(ConfigError, match="class labels have different types"):
        check_sites_at_build(job(["site-1", "site-2"]), configs)


def test_a_column_numeric_at_one_site_and_categorical_at_another_is_refused(tmp_path):
    coded = frame(seed=1)
    coded["smoker"] = coded["smoker"].map({"never": 0, "former": 1, "current": 2})
    configs = sites(tmp_path, {"site-1": frame(), "site-2": coded})
    with pytest.raises(ConfigError, match="list an integer-coded column under categorical at both"):
        check_sites_at_build(job(["site-1", "site-2"]), configs)


def test_sites_sharing_no_column_are_refused(tmp_path):
    one = frame()[["age", "outcome"]]
    two = frame(seed=1)[["bmi", "outcome"]]
    configs = sites(tmp_path, {"site-1": one, "site-2": two})
    with pytest.raises(ConfigError, match="share no column"):
        check_sites_at_build(job(["site-1", "site-2"]), configs)


@pytest.mark.parametrize("how", ["same path", "hard link", "symbolic link", "copy"])
def test_two_sites_on_one_table_are_refused_naming_both_files(tmp_path, how):
    configs = sites(tmp_path, {"site-1": frame(), "site-2": frame(seed=1)})
    first = tmp_path / "site-1.csv"
    second = tmp_path / "other" / "site-2.csv"
    second.parent.mkdir()
    if how == "same path":
        second = first
    elif how == "hard link":
        os.link(first, second)
    elif how == "symbolic link":
        second.symlink_to(first)
    else:
        second.write_bytes(first.read_bytes())
    configs["site-2"] = SiteConfig.from_dict(
        {"site": "site-2", "data_path": str(second), "target": "outcome"},
        "site_configs/site-2.yaml",
    )
    for check in (refuse_shared_data_files, lambda s: check_sites_at_build(job(SITES[:2]), s)):
        with pytest.raises(ConfigError) as err:
            check(configs)
        text = str(err.value)
        assert "site_configs/site-2.yaml: key 'data_path'" in text
        assert "site_configs/site-1.yaml: key 'data_path'" in text
        assert str(second) in text and "give each site its own data file" in text
