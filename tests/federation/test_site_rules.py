"""Rules on one site's table, applied when the job is built and when the site starts."""

from __future__ import annotations

import unicodedata
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fedforest.columns import spelled
from fedforest.errors import ConfigError
from fedforest.federation.config import JobConfig, SiteConfig, check_job_against_sites
from fedforest.federation.site import SiteRunner
from fedforest.federation.site_rules import MIN_PART_EVENTS, MIN_REGRESSION_PART_ROWS
from fedforest.federation.tables import table_summary


def table(n: int = 60, classes: int = 2, **extra) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "age": rng.integers(20, 90, n).astype(float),
            "bmi": rng.normal(27, 4, n).round(1),
            "glucose": rng.normal(100, 15, n).round(0),
        }
    )
    for name, values in extra.items():
        frame[name] = values
    frame["outcome"] = np.arange(n) % classes
    return frame


def site(
    tmp_path: Path,
    frame: pd.DataFrame,
    name="site-1",
    task="classification",
    validation="holdout",
    **keys,
):
    """A site's config; ``validation`` is the job's ``evaluation.validation``."""
    path = tmp_path / f"{name}.csv"
    frame.to_csv(path, index=False)
    data = {"site": name, "data_path": str(path), "target": "outcome", **keys}
    return SiteConfig.from_dict(data, f"site_configs/{name}.yaml", task=task, validation=validation)


def job(task="classification", **evaluation) -> JobConfig:
    data = {"job": {"sites": ["site-1", "site-2"], "task": task}}
    if task == "regression":
        data["election"] = {"metric": "rmse"}
    data["evaluation"] = {"validation": "holdout", **evaluation}
    return JobConfig.from_dict(data, "site_configs/job.yaml")


def refused(job_cfg, config) -> str:
    """The refusal when the job is built, which must equal the one when the site starts."""
    with pytest.raises(ConfigError) as at_build:
        check_job_against_sites(job_cfg, {config.site: config})
    with pytest.raises(ConfigError) as at_start:
        SiteRunner(config, job_cfg.seed).load(job=job_cfg)
    assert str(at_start.value) == str(at_build.value)
    return str(at_build.value)


# ---------------------------------------------------------------------------- names
@pytest.mark.parametrize("other", ["BMI", "Bmi", "ｂｍｉ", "b\u200bmi"])
def test_two_columns_whose_names_read_alike_are_refused_with_the_fix(tmp_path, other):
    config = site(tmp_path, table(**{other: np.linspace(18, 40, 60)}))
    text = refused(job(), config)
    assert text.startswith("site_configs/site-1.yaml: data file ")
    assert "column 'bmi' and column" in text and "read alike" in text
    assert "drop_columns" in text and "renames" in text and "keeping 'bmi'" in text


def test_a_rename_onto_a_name_like_another_column_names_the_rename_key(tmp_path):
    config = site(tmp_path, table(weight=np.linspace(50, 90, 60)), renames={"weight": "BMI"})
    text = refused(job(), config)
    assert "key 'renames.weight'" in text and "column 'weight' (renamed to 'BMI')" in text
    assert "give 'weight' another global name in renames" in text


def test_nfc_and_nfd_columns_in_one_file_are_refused(tmp_path):
    nfc, nfd = (unicodedata.normalize(f, "glucosé") for f in ("NFC", "NFD"))
    frame = table(**{nfc: np.linspace(1, 2, 60), nfd: np.linspace(3, 4, 60)})
    assert "read alike" in refused(job(), site(tmp_path, frame))


@pytest.mark.parametrize(
    "name, shown",
    [
        ("bm\u200bi2", "U+200B"),
        ("\ufeffsex", "U+FEFF"),
        ("l\u00a0dl", "U+00A0"),
        ("a\tb", "U+0009"),
    ],
)
def test_a_column_name_with_invisible_characters_is_refused_with_its_plain_spelling(
    tmp_path, name, shown
):
    config = site(tmp_path, table(**{name: np.linspace(0, 1, 60)}))
    text = refused(job(), config)
    assert shown in text and f"renames: {{{spelled(name)}:" in text
    # the fix, pasted into the YAML as it is shown, is the rename that works
    fix = yaml.safe_load(text.split("rename it with renames: ")[1].split(" in site_configs")[0])
    assert list(fix) == [name]
    fixed = site(tmp_path, table(**{name: np.linspace(0, 1, 60)}), renames=fix)
    check_job_against_sites(job(), {fixed.site: fixed})


def test_a_rename_to_a_name_with_invisible_characters_is_refused(tmp_path):
    config = site(tmp_path, table(), renames={"glucose": "gluc\u200bose"})
    text = refused(job(), config)
    assert "column 'glucose' (renamed to" in text and "U+200B" in text
    assert "renames.glucose" in text


# ---------------------------------------------------------------------------- features
def test_dropping_every_feature_is_refused_naming_drop_columns(tmp_path):
    config = site(tmp_path, table(), drop_columns=["age", "bmi", "glucose"])
    text = refused(job(), config)
    assert "key 'drop_columns'" in text and "no feature column besides the target" in text
    assert "age, bmi, glucose" in text


# ---------------------------------------------------------------------------- label_map
def test_a_label_map_merging_two_labels_is_refused_at_yaml_and_at_data(tmp_path):
    with pytest.raises(ConfigError, match=r"maps 0, 1 onto one label 0"):
        site(tmp_path, table(classes=3), label_map={0: 0, 1: 0})
    config = site(tmp_path, table(classes=3), label_map={2: 1})  # 1 is a label of its own
    text = refused(job(), config)
    assert "key 'label_map'" in text and "onto the one label '1'" in text


def test_a_label_map_renaming_every_label_is_fine(tmp_path):
    config = site(tmp_path, table(classes=3), label_map={0: 2, 1: 0, 2: 1})
    check_job_against_sites(job(), {"site-1": config})
    assert sorted(set(table_summary(config).target.tolist())) == [0, 1, 2]


# ---------------------------------------------------------------------------- part sizes
@pytest.mark.parametrize("key", ["validation_fraction", "test_fraction"])
@pytest.mark.parametrize("value", [0.001, 1e-9, 5e-324])
def test_a_fraction_leaving_fewer_rows_than_classes_names_the_key_rows_and_smallest(
    tmp_path, key, value
):
    config = site(tmp_path, table(60, classes=3), **{key: value})
    text = refused(job(), config)
    assert f"key {key!r} is {value:g}" in text and "of the 60 rows" in text
    assert "fewer than the 3 classes" in text
    smallest = float(text.split("allowed: at least ")[1].split(" ")[0])
    fixed = site(tmp_path, table(60, classes=3), **{key: smallest})
    check_job_against_sites(job(), {"site-1": fixed})  # the value named works
    SiteRunner(fixed).load(job=job())


def test_a_regression_part_needs_two_rows(tmp_path):
    frame = table(60)
    frame["outcome"] = np.linspace(1, 30, 60)
    config = site(tmp_path, frame, task="regression", test_fraction=0.01)
    text = refused(job("regression"), config)
    assert f"fewer than {MIN_REGRESSION_PART_ROWS}" in text and "key 'test_fraction'" in text


@pytest.mark.parametrize("where", ["site", "job"])
@pytest.mark.parametrize("method, rows", [("isotonic", 40), ("sigmoid", 12)])
def test_a_calibration_without_enough_validation_rows_per_class_is_refused(
    tmp_path, where, method, rows
):
    keys = {"calibration": method} if where == "site" else {}
    config = site(tmp_path, table(rows), **keys)
    job_cfg = job(calibration=method) if where == "job" else job()
    text = refused(job_cfg, config)
    key = "calibration" if where == "site" else "evaluation.calibration"
    assert f"key {key!r} is {method!r}" in text and f"of the {rows} rows" in text
    assert "calibration: auto, prior or none" in text
    if "validation_fraction at least" in text:
        smallest = float(text.split("validation_fraction at least ")[1].split(" ")[0])
        fixed = site(tmp_path, table(rows), validation_fraction=smallest, **keys)
        check_job_against_sites(job_cfg, {"site-1": fixed})


def test_auto_calibration_on_a_small_site_is_not_refused(tmp_path):
    check_job_against_sites(job(calibration="auto"), {"site-1": site(tmp_path, table(40))})


# ---------------------------------------------------------------------------- regression
def test_a_regression_target_near_1e30_is_read_without_a_raw_warning(tmp_path):
    frame = table(60)
    frame["outcome"] = np.linspace(1e30, 9e30, 60)
    config = site(tmp_path, frame, task="regression")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_job_against_sites(job("regression"), {"site-1": config})
        runner = SiteRunner(config).load(job=job("regression"))
    assert runner.frame["outcome"].max() == pytest.approx(9e30)


def test_a_site_starting_without_the_job_file_checks_its_own_keys(tmp_path):
    """Server mode: the site has only its YAML; its own keys are checked when it starts."""
    for frame, keys, words in (
        (table(**{"BMI": np.linspace(18, 40, 60)}), {}, "read alike"),
        (table(60, classes=3), {"validation_fraction": 0.001}, "key 'validation_fraction'"),
        (table(40), {"calibration": "isotonic"}, "key 'calibration' is 'isotonic'"),
        (table(), {"drop_columns": ["age", "bmi", "glucose"]}, "key 'drop_columns'"),
    ):
        with pytest.raises(ConfigError, match=words):
            SiteRunner(site(tmp_path, frame, **keys)).load()
    SiteRunner(site(tmp_path, table(40))).load()  # the job's calibration is not known here


# ---------------------------------------------------------------------------- validation: oob
def test_an_oob_site_holds_out_no_validation_rows_so_its_fraction_is_not_checked(tmp_path):
    frame = table(60, classes=3)
    text = refused(job(), site(tmp_path, frame, validation_fraction=0.001))
    assert "key 'validation_fraction'" in text
    check_job_against_sites(
        job(validation="oob"),
        {"site-1": site(tmp_path, frame, validation_fraction=0.001, validation="oob")},
    )


def test_isotonic_calibration_at_an_oob_site_counts_its_training_rows(tmp_path):
    # 40 rows: 10 validation rows per class are too few with holdout; 15 training rows per
    # class, scored out of bag, are enough with oob
    refused(job(calibration="isotonic"), site(tmp_path, table(40)))
    check_job_against_sites(
        job(calibration="isotonic", validation="oob"),
        {"site-1": site(tmp_path, table(40), validation="oob")},
    )
    small = site(tmp_path, table(24), validation="oob")  # 18 training rows, 9 per class
    text = refused(job(calibration="isotonic", validation="oob"), small)
    assert "key 'evaluation.calibration' is 'isotonic'" in text
    assert "validation: oob" in text and "only 9 training row(s)" in text


def test_an_oob_site_with_too_few_training_rows_names_test_fraction(tmp_path):
    config = site(
        tmp_path,
        table(20, classes=3),
        test_fraction=0.89,
        validation_fraction=0.005,
        validation="oob",
    )
    text = refused(job(validation="oob"), config)
    assert "key 'test_fraction' is 0.89 (validation: oob, no validation rows)" in text
    assert "2 training row(s)" in text


# --------------------------------------------------------------------------- survival events
def _survival_site(tmp_path: Path, events: int, rows: int = 60) -> SiteConfig:
    frame = pd.DataFrame(
        {
            "x": np.arange(rows) % 7,
            "months": 2.0 * np.arange(rows) + 1.5,
            "died": (np.arange(rows) < events).astype(int),
        }
    )
    frame.to_csv(tmp_path / "d.csv", index=False)
    data = {"site": "site-1", "data_path": str(tmp_path / "d.csv"), "time": "months"}
    return SiteConfig.from_dict({**data, "event": "died"}, "s.yaml", task="survival")


def test_a_survival_site_needs_a_few_events_in_every_part_of_its_split(tmp_path):
    job = JobConfig.from_dict({"job": {"sites": ["site-1", "b"], "task": "survival"}}, "j.yaml")
    check_job_against_sites(job, {"site-1": _survival_site(tmp_path, events=30)})
    with pytest.raises(ConfigError) as err:
        check_job_against_sites(job, {"site-1": _survival_site(tmp_path, events=5)})
    msg = str(err.value)
    assert msg.startswith("s.yaml: key 'event': the event column 'died' of the data file"), msg
    assert "has 5 event(s) of 60 rows" in msg and "in the test rows" in msg, msg
    assert f"allowed: at least {MIN_PART_EVENTS} events in every part" in msg, msg


def test_the_time_column_of_a_survival_site_is_never_a_feature(tmp_path):
    config = _survival_site(tmp_path, events=30)
    runner = SiteRunner(config).load()
    payload = runner.describe(time_quantiles=True)
    assert payload["columns"] == ["x"] and payload["classes"] == []
    # 30 events: the deciles of their times, rounded to 2 significant digits
    assert 2 <= len(payload["event_times"]) <= 9
    assert runner.describe()["event_times"] == []  # a job with a public grid asks for none


def test_the_coarser_of_the_sites_and_the_policys_time_resolution_rounds_its_quantiles(tmp_path):
    def quantiles(**keys):
        config = _survival_site(tmp_path, events=30)
        data = {"site": "site-1", "data_path": config.data_path, "time": "months"}
        data.update(event="died", **keys)
        config = SiteConfig.from_dict(data, "s.yaml", task="survival")
        return SiteRunner(config).load().describe(time_quantiles=True)["event_times"]

    for keys in ({"time_resolution": 5}, {"privacy": {"time_resolution": 5}}):
        assert all(t % 5 == 0 for t in quantiles(**keys)), keys
    both = quantiles(time_resolution=5, privacy={"time_resolution": 20})
    assert both and all(t % 20 == 0 for t in both)
    assert quantiles(time_resolution=20, privacy={"time_resolution": 5}) == both
    with pytest.raises(ConfigError) as err:  # neither a multiple of the other: refused at start
        quantiles(time_resolution=6, privacy={"time_resolution": 4})
    msg = str(err.value)
    assert "key 'time_resolution' is 6 (s.yaml) and key 'privacy.time_resolution' is 4" in msg
    assert "allowed: equal resolutions, or one an integer multiple of the other" in msg
