"""Job and site YAML configs: the shipped files load, defaults fill in, every error is precise."""

from __future__ import annotations

import copy
import dataclasses
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from fedforest.election.selectors import SELECTORS
from fedforest.errors import ConfigError
from fedforest.federation.config import (
    JOB_DEFAULTS,
    OVERRIDE_KEYS,
    SITE_DEFAULTS,
    JobConfig,
    SiteConfig,
    check_job_against_sites,
    split_sizes,
)
from fedforest.federation.config_sections import (
    ElectionSettings,
    ForestParams,
    SurrogateParams,
    Timeouts,
)
from fedforest.federation.tables import check_data, read_table
from fedforest.privacy.policy import (
    JOB_MIN_LEAF_ROWS,
    PrivacyPolicy,
    job_default_policy,
)
from fedforest.vocabulary import JOB_STRATEGIES, METRICS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "data_prep"))

from make_demo_data import make_demo_data  # noqa: E402

SITES = ("site-1", "site-2", "site-3")


def shipped_job() -> dict:
    return yaml.safe_load((ROOT / "site_configs" / "job.yaml").read_text())


def set_key(data: dict, dotted: str, value) -> dict:
    """Set ``a.b.c`` in a nested dict (``...`` as value deletes the key)."""
    *parents, last = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    if value is ...:
        node.pop(last, None)
    else:
        node[last] = value
    return data


def write_yaml(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def assert_precise(err: ConfigError, source, key: str, shown, allowed: str) -> None:
    """The message names the file, the key, the bad value and what is allowed."""
    msg = str(err)
    assert msg.startswith(f"{source}: "), msg
    assert f"key '{key}' is {shown!r};" in msg, msg
    assert f"allowed: {allowed}" in msg, msg


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    """A CSV written by hand, exactly as given (no pandas involved)."""
    lines = [",".join(header), *(",".join(str(v) for v in row) for row in rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- job: shipped file
def test_shipped_job_yaml_loads():
    path = ROOT / "site_configs" / "job.yaml"
    cfg = JobConfig.load(path)
    assert cfg.source == str(path)
    assert cfg.name == "fedforest-demo"
    assert cfg.sites == list(SITES)
    assert cfg.min_sites == 2
    assert cfg.seed == 0
    assert cfg.timeouts.to_dict() == {
        "schema": 120.0,
        "election": 300.0,
        "train": 900.0,
        "evaluate": 600.0,
    }
    assert cfg.wait_after_min is None
    assert cfg.strategies == [*JOB_STRATEGIES]
    assert cfg.voting == "soft" and cfg.depth_threshold == 2
    assert cfg.metrics == ["auprc", "auc", "mcc", "accuracy", "brier", "log_loss", "ece"]
    assert cfg.auto_metric == "log_loss" and cfg.calibration == "auto"
    assert cfg.pooling_weights == "equal"
    assert cfg.forest.to_dict() == {
        "n_estimators": 100,
        "max_depth": None,
        "min_samples_leaf": 1,
        "max_features": "sqrt",
    }
    assert cfg.surrogates == SurrogateParams(min_agreement=0.25, min_rows=6)
    assert cfg.election.auto_tune is True and cfg.election.tolerance == 0.005
    assert cfg.election.tuning_rounds == 5 and cfg.election.always_keep == ()
    assert cfg.election.tune_every_feature is True
    assert cfg.election.normalization == "all"


def test_shipped_site_yamls_load_with_their_relative_data_path(tmp_path):
    """Copy the shipped site files as they are; their ../demo_data path resolves from the copy."""
    configs = tmp_path / "site_configs"
    configs.mkdir()
    make_demo_data(tmp_path / "demo_data", rows=40, seed=0)
    for site in SITES:
        shutil.copy(ROOT / "site_configs" / f"{site}.yaml", configs / f"{site}.yaml")
    loaded = {site: SiteConfig.load(configs / f"{site}.yaml") for site in SITES}
    for site, cfg in loaded.items():
        assert cfg.site == site and cfg.target == "outcome"
        assert cfg.data_path == str((tmp_path / "demo_data" / f"{site}.csv").resolve())
        assert Path(cfg.data_path).is_absolute()
        assert cfg.validation_fraction == 0.2 and cfg.test_fraction == 0.25
    assert [loaded[s].selector for s in SITES] == ["lasso", "random_forest", "mutual_info"]
    assert loaded["site-2"].renames == {"glucose_mg_dl": "glucose"}
    columns = {site: check_data(cfg) for site, cfg in loaded.items()}
    assert "glucose" in columns["site-2"] and "glucose_mg_dl" not in columns["site-2"]
    shared = set.intersection(*(set(c) for c in columns.values())) - {"outcome"}
    assert shared == {"age", "bmi", "systolic_bp", "smoker"}


def test_shipped_site_yamls_validate_without_data():
    for site in SITES:
        data = yaml.safe_load((ROOT / "site_configs" / f"{site}.yaml").read_text())
        cfg = SiteConfig.from_dict(data, f"{site}.yaml")
        assert cfg.site == site
        assert cfg.data_path == f"../demo_data/{site}.csv"  # no base_dir: left as written


# --------------------------------------------------------------------------- job: defaults
def test_job_defaults_are_filled():
    cfg = JobConfig.from_dict({"job": {"sites": ["a", "b", "c"]}}, "mini.yaml")
    assert cfg.source == "mini.yaml"
    assert cfg.name == "fedforest"
    assert cfg.min_sites == 3  # default: every site
    assert cfg.seed == 0
    assert cfg.timeouts.to_dict() == {
        k: float(v) for k, v in JOB_DEFAULTS["job"]["timeouts"].items()
    }
    assert cfg.wait_after_min is None and JOB_DEFAULTS["job"]["wait_after_min"] is None
    assert cfg.strategies == JOB_DEFAULTS["evaluation"]["strategies"]
    assert cfg.voting == "soft" and cfg.depth_threshold == 2
    assert cfg.metrics == list(METRICS)
    assert cfg.forest.to_dict() == JOB_DEFAULTS["forest"]
    assert cfg.surrogates.to_dict() == JOB_DEFAULTS["surrogates"]
    assert cfg.election.to_dict() == JOB_DEFAULTS["election"]
    assert (cfg.forest, cfg.surrogates) == (ForestParams(), SurrogateParams())
    assert cfg.election == ElectionSettings()


def test_partial_nested_sections_keep_the_other_defaults():
    cfg = JobConfig.from_dict(
        {
            "job": {"sites": ["a", "b"], "min_sites": 1, "timeouts": {"train": 0}},
            "forest": {"n_estimators": 7, "max_features": 0.5},
            "election": {"freedom_degree": 1},
        }
    )
    assert cfg.min_sites == 1
    assert cfg.timeouts == Timeouts(schema=120.0, election=300.0, train=0.0, evaluate=600.0)
    assert cfg.forest.n_estimators == 7 and cfg.forest.max_features == 0.5
    assert cfg.forest.min_samples_leaf == 1 and cfg.forest.max_depth is None
    assert cfg.election.freedom_degree == 1 and cfg.election.aggregation == "weighted"


def test_election_normalization_defaults_to_all_and_accepts_selected():
    from fedforest.election.ballot import NORMALIZATIONS

    assert JOB_DEFAULTS["election"]["normalization"] == "all"
    assert NORMALIZATIONS == ("all", "selected")
    cfg = JobConfig.from_dict({"job": {"sites": ["a", "b"]}})
    assert cfg.election.normalization == "all"
    for value in NORMALIZATIONS:
        cfg = JobConfig.from_dict(
            {"job": {"sites": ["a", "b"]}, "election": {"normalization": value}}
        )
        assert cfg.election.normalization == value


def test_defaults_are_not_shared_between_configs():
    before = copy.deepcopy(JOB_DEFAULTS)
    cfg = JobConfig.from_dict({"job": {"sites": ["a", "b"]}})
    cfg.strategies.append("hard")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.forest.n_estimators = 1  # a section is frozen: nothing of it can be changed
    assert isinstance(cfg.election.always_keep, tuple)
    assert before == JOB_DEFAULTS
    again = JobConfig.from_dict({"job": {"sites": ["a", "b"]}})
    assert again.election.always_keep == () and "hard" not in again.strategies
    assert again.forest.n_estimators == JOB_DEFAULTS["forest"]["n_estimators"]


@pytest.mark.parametrize("max_features", ["sqrt", "log2", None, 1, 3, 0.3, 1.0])
def test_valid_max_features(max_features):
    cfg = JobConfig.from_dict(
        {"job": {"sites": ["a", "b"]}, "forest": {"max_features": max_features}}
    )
    assert cfg.forest.max_features == max_features


# --------------------------------------------------------------------------- job: errors
NAN = float("nan")
INF = float("inf")

# (dotted key to set, bad value, key named in the message, value shown, allowed text)
MAX_FEATURES = "sqrt, log2, null, an integer >= 1 or a fraction in (0, 1]"

JOB_ERRORS = [
    ("surprise", 1, "surprise", 1, "one of the known keys job, evaluation, pooling, forest"),
    ("pooling.weights", "sites", "pooling.weights", "sites", "equal, rows"),
    ("evaluation.calibration", "platt", "evaluation.calibration", "platt", "none, prior"),
    ("forest.n_trees", 5, "forest.n_trees", 5, "one of the known keys forest.n_estimators"),
    ("job.timeouts.vote", 5, "job.timeouts.vote", 5, "one of the known keys job.timeouts.schema"),
    ("election.typo", True, "election.typo", True, "one of the known keys election.enabled"),
    ("forest", [1, 2], "forest", [1, 2], "a mapping of keys to values"),
    ("job.sites", ["site-1"], "job.sites", ["site-1"], "a list of at least two site names"),
    ("job.sites", ..., "job.sites", None, "a list of at least two site names"),
    ("job.sites", "site-1", "job.sites", "site-1", "a list of strings"),
    ("job.sites", ["a", "a"], "job.sites", ["a", "a"], "a list without duplicates"),
    ("job.min_sites", 0, "job.min_sites", 0, "an integer in [1, 3]"),
    ("job.min_sites", 4, "job.min_sites", 4, "an integer in [1, 3]"),
    ("job.min_sites", 2.0, "job.min_sites", 2.0, "an integer in [1, 3]"),
    ("job.seed", -1, "job.seed", -1, "an integer in [0, 4294967295]"),
    ("job.seed", 2**32, "job.seed", 2**32, "an integer in [0, 4294967295]"),
    ("job.name", "", "job.name", "", "a job name of letters, digits"),
    ("job.name", "../outside", "job.name", "../outside", "a job name of letters, digits"),
    ("job.name", "a/b", "job.name", "a/b", "a job name of letters, digits"),
    ("job.sites", ["server", "b"], "job.sites", "server", "a site name of letters, digits"),
    ("job.sites", ["a b", "c"], "job.sites", "a b", "a site name of letters, digits"),
    ("job.sites", [".hidden", "c"], "job.sites", ".hidden", "a site name of letters, digits"),
    ("job.timeouts.train", -1, "job.timeouts.train", -1, "a finite number in [0, 2592000]"),
    ("job.timeouts.schema", -0.5, "job.timeouts.schema", -0.5, "a finite number in [0, 2592000]"),
    ("job.timeouts.train", "long", "job.timeouts.train", "long", "a finite number in [0, 2592000]"),
    ("job.timeouts.evaluate", NAN, "job.timeouts.evaluate", NAN, "a finite number in [0, 2592000]"),
    ("job.wait_after_min", -3, "job.wait_after_min", -3, "a finite number in [0, 2592000]"),
    ("job.wait_after_min", INF, "job.wait_after_min", INF, "a finite number in [0, 2592000]"),
    ("job.timeouts.train", 1e308, "job.timeouts.train", 1e308, "a finite number in [0, 2592000]"),
    (
        "job.wait_after_min",
        2592001,
        "job.wait_after_min",
        2592001,
        "a finite number in [0, 2592000]",
    ),
    (
        "evaluation.strategies",
        ["fpv", "magic"],
        "evaluation.strategies",
        "magic",
        ", ".join(JOB_STRATEGIES),
    ),
    ("evaluation.strategies", [], "evaluation.strategies", [], "at least one of fpv, pr"),
    ("evaluation.strategies", "mp", "evaluation.strategies", "mp", "a list of strings"),
    ("evaluation.voting", "most", "evaluation.voting", "most", "soft, hard"),
    ("evaluation.depth_threshold", -1, "evaluation.depth_threshold", -1, "an integer in [0, "),
    *[
        ("evaluation.trees_per_site", v, "evaluation.trees_per_site", v, "null (every pooled")
        for v in (0, -3, 12.5, "all", True, [100])
    ],
    ("evaluation.metrics", ["f1"], "evaluation.metrics", "f1", "auprc, auc, mcc, accuracy"),
    ("evaluation.auto_metric", "f1", "evaluation.auto_metric", "f1", "log_loss, brier, auprc"),
    ("evaluation.auto_metric", "ece", "evaluation.auto_metric", "ece", "log_loss, brier, auprc"),
    ("election.metric", "brier", "election.metric", "brier", "auprc, auc, mcc, accuracy"),
    ("forest.n_estimators", "many", "forest.n_estimators", "many", "an integer in [1, 10000]"),
    ("forest.n_estimators", True, "forest.n_estimators", True, "an integer in [1, 10000]"),
    ("forest.n_estimators", 0, "forest.n_estimators", 0, "an integer in [1, 10000]"),
    ("forest.n_estimators", 12.5, "forest.n_estimators", 12.5, "an integer in [1, 10000]"),
    ("forest.max_depth", 0, "forest.max_depth", 0, "an integer in [1, 2147483647]"),
    (
        "forest.min_samples_leaf",
        False,
        "forest.min_samples_leaf",
        False,
        "an integer in [1, 2147483647]",
    ),
    (
        "forest.min_samples_leaf",
        2**63 - 1,
        "forest.min_samples_leaf",
        2**63 - 1,
        "an integer in [1, 2147483647]",
    ),
    ("forest.max_depth", 2**40, "forest.max_depth", 2**40, "an integer in [1, 2147483647]"),
    ("forest.max_features", "half", "forest.max_features", "half", MAX_FEATURES),
    ("forest.max_features", 1.5, "forest.max_features", 1.5, MAX_FEATURES),
    ("forest.max_features", 0, "forest.max_features", 0, MAX_FEATURES),
    ("forest.max_features", -0.2, "forest.max_features", -0.2, MAX_FEATURES),
    ("forest.max_features", True, "forest.max_features", True, MAX_FEATURES),
    ("surrogates.min_agreement", 2, "surrogates.min_agreement", 2, "a finite number in [-1, 1]"),
    ("surrogates.min_rows", 0, "surrogates.min_rows", 0, "an integer >= 1"),
    ("election.enabled", "sometimes", "election.enabled", "sometimes", "true or false"),
    ("election.auto_tune", 1, "election.auto_tune", 1, "true or false"),
    ("election.tune_every_feature", "no", "election.tune_every_feature", "no", "true or false"),
    ("election.freedom_degree", 1.5, "election.freedom_degree", 1.5, "a finite number in [0, 1]"),
    ("election.freedom_degree", -0.1, "election.freedom_degree", -0.1, "a finite number in [0, 1]"),
    ("election.freedom_degree", NAN, "election.freedom_degree", NAN, "a finite number in [0, 1]"),
    ("election.freedom_degree", True, "election.freedom_degree", True, "a finite number in [0, 1]"),
    ("election.tuning_rounds", 0, "election.tuning_rounds", 0, "an integer in [1, 100]"),
    ("election.tuning_rounds", 101, "election.tuning_rounds", 101, "an integer in [1, 100]"),
    ("election.tolerance", -0.01, "election.tolerance", -0.01, "a finite number >= 0"),
    ("election.aggregation", "mean", "election.aggregation", "mean", "weighted, uniform"),
    ("election.normalization", "minmax", "election.normalization", "minmax", "all, selected"),
    ("election.normalization", "All", "election.normalization", "All", "all, selected"),
    ("election.normalization", None, "election.normalization", None, "all, selected"),
    ("election.normalization", True, "election.normalization", True, "all, selected"),
    ("election.normalization", ["all"], "election.normalization", ["all"], "all, selected"),
    ("election.always_keep", "age", "election.always_keep", "age", "a list of strings"),
    ("election.metric", "loss", "election.metric", "loss", "auprc, auc, mcc, accuracy"),
]


@pytest.mark.parametrize(
    ("dotted", "value", "key", "shown", "allowed"),
    JOB_ERRORS,
    ids=[f"{d}={v!r}" for d, v, *_ in JOB_ERRORS],
)
def test_job_error_names_file_key_value_and_allowed(tmp_path, dotted, value, key, shown, allowed):
    path = write_yaml(tmp_path / "job.yaml", set_key(shipped_job(), dotted, value))
    with pytest.raises(ConfigError) as info:
        JobConfig.load(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    if isinstance(shown, float) and shown != shown:  # NaN: its repr is 'nan'
        assert f"key '{key}' is nan;" in msg, msg
    else:
        assert f"key '{key}' is {shown!r};" in msg, msg
    assert f"allowed: {allowed}" in msg, msg


def test_job_file_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("- site-1\n- site-2\n")
    with pytest.raises(ConfigError) as info:
        JobConfig.load(path)
    assert_precise(info.value, path, "(top level)", ["site-1", "site-2"], "a mapping")


def test_empty_job_file_asks_for_sites(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("")
    with pytest.raises(ConfigError) as info:
        JobConfig.load(path)
    assert_precise(info.value, path, "job.sites", None, "a list of at least two site names")


def test_invalid_yaml_text_names_the_file(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("job:\n  sites: [site-1, site-2\n  seed: 0\n")
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        JobConfig.load(path)
    assert str(info.value).startswith(f"{path}: ")


def test_invalid_yaml_in_a_site_file(tmp_path):
    path = tmp_path / "site-1.yaml"
    path.write_text("site: site-1\ntarget: [outcome\n")
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        SiteConfig.load(path)
    assert str(info.value).startswith(f"{path}: ")


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found") as info:
        JobConfig.load(tmp_path / "nope.yaml")
    assert str(tmp_path / "nope.yaml") in str(info.value)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


# --------------------------------------------------------------------------- site: validation
def site_dict(**changes) -> dict:
    data = {"site": "site-1", "data_path": "data.csv", "target": "outcome"}
    for key, value in changes.items():
        if value is ...:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def test_site_defaults_are_filled():
    cfg = SiteConfig.from_dict(site_dict(), "s.yaml")
    assert cfg.categorical == [] and cfg.renames == {} and cfg.selector_params == {}
    assert cfg.selector == SITE_DEFAULTS["selector"] == "random_forest"
    assert cfg.validation_fraction == 0.2 and cfg.test_fraction == 0.25
    assert cfg.source == "s.yaml"


SITE_ERRORS = [
    ({"target": ...}, "target", None, "a non-empty string (this key is required)"),
    ({"site": ...}, "site", None, "a non-empty string (this key is required)"),
    ({"data_path": ...}, "data_path", None, "a non-empty string (this key is required)"),
    ({"target": ""}, "target", "", "a non-empty string"),
    ({"target": 3}, "target", 3, "a non-empty string"),
    ({"selector": "magic"}, "selector", "magic", ", ".join(SELECTORS)),
    ({"calibration": "platt"}, "calibration", "platt", "none, prior, sigmoid, isotonic, auto"),
    ({"validation_fraction": 0}, "validation_fraction", 0, "a finite number in (0, 1)"),
    ({"validation_fraction": 1}, "validation_fraction", 1, "a finite number in (0, 1)"),
    ({"validation_fraction": "0.2"}, "validation_fraction", "0.2", "a finite number in (0, 1)"),
    ({"validation_fraction": True}, "validation_fraction", True, "a finite number in (0, 1)"),
    ({"test_fraction": -0.1}, "test_fraction", -0.1, "a finite number in (0, 1)"),
    ({"test_fraction": NAN}, "test_fraction", NAN, "a finite number in (0, 1)"),
    (
        {"validation_fraction": 0.5, "test_fraction": 0.45},
        "validation_fraction",
        0.5,
        "a value leaving at least 10% of rows for training (test_fraction is 0.45)",
    ),
    (
        {"validation_fraction": 0.3, "test_fraction": 0.65},
        "validation_fraction",
        0.3,
        "a value leaving at least 10% of rows for training (test_fraction is 0.65)",
    ),
    ({"renames": ["a", "b"]}, "renames", ["a", "b"], "a mapping of local column name"),
    ({"renames": None}, "renames", None, "a mapping of local column name"),
    ({"renames": {"a": ""}}, "renames", {"a": ""}, "a mapping of local column name"),
    ({"renames": {"a": 1}}, "renames", {"a": 1}, "a mapping of local column name"),
    (
        {"renames": {"a": "x", "b": "x"}},
        "renames",
        {"a": "x", "b": "x"},
        "a mapping whose global names are distinct",
    ),
    ({"categorical": "smoker"}, "categorical", "smoker", "a list of strings"),
    ({"categorical": ["a", "a"]}, "categorical", ["a", "a"], "a list without duplicates"),
    ({"selector_params": [1]}, "selector_params", [1], "a mapping of parameter to value"),
    ({"path": "x.csv"}, "path", "x.csv", "one of the known keys site, data_path, target"),
]


@pytest.mark.parametrize(
    ("changes", "key", "shown", "allowed"),
    SITE_ERRORS,
    ids=[f"{c!r}" for c, *_ in SITE_ERRORS],
)
def test_site_error_names_file_key_value_and_allowed(tmp_path, changes, key, shown, allowed):
    path = write_yaml(tmp_path / "site-1.yaml", site_dict(**changes))
    with pytest.raises(ConfigError) as info:
        SiteConfig.load(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    if isinstance(shown, float) and shown != shown:
        assert f"key '{key}' is nan;" in msg, msg
    else:
        assert f"key '{key}' is {shown!r};" in msg, msg
    assert f"allowed: {allowed}" in msg, msg


def test_fractions_leaving_exactly_enough_training_rows_are_fine():
    cfg = SiteConfig.from_dict(site_dict(validation_fraction=0.3, test_fraction=0.55))
    assert cfg.validation_fraction == 0.3 and cfg.test_fraction == 0.55


def test_relative_data_path_resolved_against_the_yaml_folder(tmp_path):
    folder = tmp_path / "configs" / "hospital"
    path = write_yaml(folder / "site-1.yaml", site_dict(data_path="../data/site-1.csv"))
    cfg = SiteConfig.load(path)
    assert cfg.data_path == str((tmp_path / "configs" / "data" / "site-1.csv").resolve())


def test_absolute_data_path_kept_and_home_expanded(tmp_path, monkeypatch):
    absolute = tmp_path / "elsewhere" / "x.csv"
    path = write_yaml(tmp_path / "a" / "site-1.yaml", site_dict(data_path=str(absolute)))
    assert SiteConfig.load(path).data_path == str(absolute)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = write_yaml(tmp_path / "b" / "site-1.yaml", site_dict(data_path="~/x.csv"))
    assert SiteConfig.load(path).data_path == str(tmp_path / "home" / "x.csv")


# --------------------------------------------------------------------------- site: override
@pytest.fixture
def site_yaml(tmp_path) -> Path:
    data = site_dict(
        data_path="../data/public.csv", selector="lasso", renames={"a": "b"}, categorical=["b"]
    )
    return write_yaml(tmp_path / "app" / "config" / "site-1.yaml", data)


def test_override_sets_data_path_relative_to_its_own_folder(tmp_path, site_yaml):
    override = tmp_path / "local" / "fedforest.yaml"
    override.parent.mkdir()
    override.write_text("data_path: secure/site-1.csv\n")
    base = SiteConfig.load(site_yaml)
    cfg = SiteConfig.load(site_yaml, override=override)
    assert cfg.data_path == str((tmp_path / "local" / "secure" / "site-1.csv").resolve())
    assert base.data_path == str((tmp_path / "app" / "data" / "public.csv").resolve())
    # everything else comes from the job's site file; errors name both files
    for name in ("site", "target", "categorical", "renames", "selector"):
        assert getattr(cfg, name) == getattr(base, name)
    assert cfg.source == f"{base.source} (data_path from {override})"


def test_override_with_an_absolute_path(tmp_path, site_yaml):
    override = write_yaml(tmp_path / "local" / "fedforest.yaml", {"data_path": "/secure/x.csv"})
    assert SiteConfig.load(site_yaml, override=override).data_path == "/secure/x.csv"


def test_missing_or_empty_override_changes_nothing(tmp_path, site_yaml):
    base = SiteConfig.load(site_yaml)
    assert SiteConfig.load(site_yaml, override=tmp_path / "absent.yaml") == base
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert SiteConfig.load(site_yaml, override=empty) == base


ONLY_OVERRIDE_KEYS = "only data_path, privacy, report_metrics may be set in the site's own file"


@pytest.mark.parametrize(
    ("content", "key", "shown", "allowed"),
    [
        ({"data_path": "x.csv", "target": "y"}, "target", "y", ONLY_OVERRIDE_KEYS),
        ({"selector": "none"}, "selector", "none", ONLY_OVERRIDE_KEYS),
        (
            ["x.csv"],
            "(top level)",
            ["x.csv"],
            "a mapping with some of the keys data_path, privacy, report_metrics",
        ),
        ({"data_path": ""}, "data_path", "", "a non-empty string"),
        ({"data_path": None}, "data_path", None, "a non-empty string"),
        ({"data_path": 5}, "data_path", 5, "a non-empty string"),
        ({"report_metrics": "no"}, "report_metrics", "no", "true or false"),
        ({"report_metrics": None}, "report_metrics", None, "true or false"),
    ],
)
def test_override_refuses_keys_other_than_the_override_keys(
    tmp_path, site_yaml, content, key, shown, allowed
):
    assert OVERRIDE_KEYS == ("data_path", "privacy", "report_metrics")
    override = write_yaml(tmp_path / "local" / "fedforest.yaml", content)
    with pytest.raises(ConfigError) as info:
        SiteConfig.load(site_yaml, override=override)
    assert_precise(info.value, override, key, shown, allowed)


def test_invalid_yaml_in_the_override(tmp_path, site_yaml):
    override = tmp_path / "fedforest.yaml"
    override.write_text("data_path: [oops\n")
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        SiteConfig.load(site_yaml, override=override)
    assert str(info.value).startswith(f"{override}: ")


# --------------------------------------------------------------------------- site: new keys
def test_new_site_keys_default_to_nothing():
    cfg = SiteConfig.from_dict(site_dict(), "s.yaml")
    assert cfg.drop_columns == [] and cfg.label_map == {}
    assert SITE_DEFAULTS["drop_columns"] == [] and SITE_DEFAULTS["label_map"] == {}


LABELS = "a mapping of local class label to global label, each a string or an integer"

NEW_SITE_ERRORS = [
    ({"drop_columns": "id"}, "drop_columns", "id", "a list of strings"),
    ({"drop_columns": ["id", "id"]}, "drop_columns", ["id", "id"], "a list without duplicates"),
    ({"drop_columns": ["outcome"]}, "drop_columns", "outcome", "columns other than the target"),
    (
        {"drop_columns": ["a"], "renames": {"a": "b"}},
        "drop_columns",
        "a",
        "columns not also listed under renames ('a' is renamed to 'b'",
    ),
    ({"label_map": ["yes", 1]}, "label_map", ["yes", 1], LABELS),
    ({"label_map": {"yes": None}}, "label_map.yes", None, LABELS),
    ({"label_map": {"yes": 1.5}}, "label_map.yes", 1.5, LABELS),
    ({"label_map": {"yes": " "}}, "label_map.yes", " ", LABELS),
    ({"label_map": {1: 0, "1": 2}}, "label_map", {1: 0, "1": 2}, "a mapping with one entry per"),
    # the selector's own validation, named as selector_params.<key>
    (
        {"selector": "lasso", "selector_params": {"alpha": 0.1}},
        "selector_params.alpha",
        0.1,
        "a parameter of selector 'lasso': C, max_iter, tol, threshold",
    ),
    (
        {"selector": "lasso", "selector_params": {"C": 0}},
        "selector_params.C",
        0,
        "a number in [1e-10, 1e+10]",
    ),
    (
        {"selector": "random_forest", "selector_params": {"importance": "gain"}},
        "selector_params.importance",
        "gain",
        "one of ['impurity', 'permutation']",
    ),
    (
        {"selector": "mutual_info", "selector_params": {"threshold": "max"}},
        "selector_params.threshold",
        "max",
        "one of ['mean', 'median'] or a number >= 0",
    ),
    (
        {"selector": "none", "selector_params": {"threshold": 1}},
        "selector_params.threshold",
        1,
        "no parameter (selector 'none' takes none)",
    ),
    (
        {"selector_params": {"n_estimators": True}},
        "selector_params.n_estimators",
        True,
        "an integer in [1, 10000]",
    ),
]


@pytest.mark.parametrize(
    ("changes", "key", "shown", "allowed"),
    NEW_SITE_ERRORS,
    ids=[f"{c!r}" for c, *_ in NEW_SITE_ERRORS],
)
def test_new_site_keys_are_validated(tmp_path, changes, key, shown, allowed):
    path = write_yaml(tmp_path / "site-1.yaml", site_dict(**changes))
    with pytest.raises(ConfigError) as info:
        SiteConfig.load(path)
    assert_precise(info.value, path, key, shown, allowed)


def test_valid_selector_params_and_label_map_are_kept():
    cfg = SiteConfig.from_dict(
        site_dict(
            selector="elastic_net",
            selector_params={"C": 0.5, "l1_ratio": 1},
            label_map={"Yes": "yes", 2.0: 1},
        )
    )
    assert cfg.selector_params == {"C": 0.5, "l1_ratio": 1}
    assert cfg.label_map == {"Yes": "yes", 2: 1}


def test_label_map_with_unquoted_yes_no_explains_yaml_booleans(tmp_path):
    path = tmp_path / "site-1.yaml"
    path.write_text("site: site-1\ndata_path: d.csv\ntarget: outcome\nlabel_map: {yes: 1, no: 0}\n")
    with pytest.raises(ConfigError) as info:
        SiteConfig.load(path)
    assert_precise(info.value, path, "label_map", True, LABELS)
    assert "quote yes, no, true, false and null" in str(info.value)


# --------------------------------------------------------------------------- job x sites
def two_sites(tmp_path, rows=(40, 40), **changes) -> dict:
    """Two sites with data files: 'site-1' has glucose (as glucose_mg_dl), 'site-2' insulin."""
    sites = {}
    for name, n, private in (("site-1", rows[0], "glucose_mg_dl"), ("site-2", rows[1], "insulin")):
        data = write_csv(
            tmp_path / f"{name}.csv",
            ["patient_id", "age", private, "outcome"],
            [[f"id-{i}", 30 + (7 * i) % 41, 90 + (13 * i) % 70, i % 2] for i in range(n)],
        )
        extra = {"renames": {"glucose_mg_dl": "glucose"}} if name == "site-1" else {}
        sites[name] = SiteConfig.from_dict(
            site_dict(
                site=name, data_path=str(data), drop_columns=["patient_id"], **extra, **changes
            ),
            f"{name}.yaml",
        )
    return sites


def job_config(**sections) -> JobConfig:
    data = {"job": {"sites": ["site-1", "site-2"]}}
    for dotted, value in sections.items():
        set_key(data, dotted.replace("__", "."), value)
    return JobConfig.from_dict(data, "job.yaml")


def test_always_keep_must_name_a_column_of_some_site(tmp_path):
    sites = two_sites(tmp_path)
    check_job_against_sites(job_config(election__always_keep=["glucose", "insulin"]), sites)
    for bad in (
        "glucose_mg_dl",
        "patient_id",
        "Glucose",
        "outcome",
    ):  # local, dropped, case, target
        with pytest.raises(ConfigError) as info:
            check_job_against_sites(job_config(election__always_keep=["age", bad]), sites)
        assert_precise(
            info.value,
            "job.yaml",
            "election.always_keep",
            bad,
            "feature columns of at least one site's data file (global names, after renames and "
            "drop_columns): age, glucose, insulin",
        )


def test_always_keep_is_left_alone_while_a_site_data_file_is_unknown(tmp_path):
    sites = two_sites(tmp_path)
    Path(sites["site-2"].data_path).unlink()  # e.g. on the server, or a site-owned path
    check_job_against_sites(job_config(election__always_keep=["insulin"]), sites)


def test_split_sizes_are_the_splits_the_site_makes():
    assert split_sizes(300, 0.2, 0.25) == (165, 60, 75)
    assert sum(split_sizes(37, 0.3, 0.1)) == 37


def test_min_samples_leaf_that_grows_one_leaf_trees_is_refused(tmp_path):
    sites = two_sites(tmp_path, rows=(40, 200), validation="holdout")
    n_train = split_sizes(40, 0.2, 0.25)[0]
    assert n_train == 22
    check_job_against_sites(job_config(forest__min_samples_leaf=11), sites)
    with pytest.raises(ConfigError) as info:
        check_job_against_sites(job_config(forest__min_samples_leaf=12), sites)
    assert_precise(
        info.value,
        "job.yaml",
        "forest.min_samples_leaf",
        12,
        "at most 11 for site 'site-1': site-1.yaml gives 22 training rows (40 rows minus "
        "validation_fraction 0.2 and test_fraction 0.25)",
    )
    assert "one-leaf trees" in str(info.value)
    with pytest.raises(ConfigError, match="site-1.yaml gives 22 training rows"):
        check_job_against_sites(job_config(forest__min_samples_leaf=500), sites)


def test_an_oob_site_trains_on_every_row_but_its_test_rows(tmp_path):
    sites = two_sites(tmp_path, rows=(40, 200))  # the job's default: oob
    assert split_sizes(40, None, 0.25) == (30, 0, 10)
    check_job_against_sites(job_config(forest__min_samples_leaf=15), sites)
    with pytest.raises(ConfigError) as info:
        check_job_against_sites(job_config(forest__min_samples_leaf=16), sites)
    assert_precise(
        info.value,
        "job.yaml",
        "forest.min_samples_leaf",
        16,
        "at most 15 for site 'site-1': site-1.yaml gives 30 training rows (40 rows minus "
        "test_fraction 0.25 (validation: oob, no validation rows))",
    )


def test_an_integer_max_features_beyond_a_site_columns_is_refused(tmp_path):
    sites = two_sites(tmp_path)
    check_job_against_sites(job_config(forest__max_features=2), sites)
    with pytest.raises(ConfigError) as info:
        check_job_against_sites(job_config(forest__max_features=3), sites)
    assert_precise(
        info.value,
        "job.yaml",
        "forest.max_features",
        3,
        "at most 2, the feature columns of site 'site-1' (site-1.yaml)",
    )


def test_tables_already_read_are_used_as_they_are(tmp_path):
    sites = two_sites(tmp_path, validation="holdout")
    tables = {name: read_table(site).head(12) for name, site in sites.items()}
    job = job_config(forest__min_samples_leaf=4)
    check_job_against_sites(job, sites)  # the files have 40 rows
    with pytest.raises(ConfigError, match="gives 6 training rows"):
        job.check_against_sites(sites, tables)


# --------------------------------------------------------------------------- target codings
def coded_sites(tmp_path, codings: dict[str, tuple], label_maps=None, rows: int = 60) -> dict:
    """Sites whose data files code the target ``codings[site]`` (labels dealt in turn)."""
    sites = {}
    for name, labels in codings.items():
        data = write_csv(
            tmp_path / f"{name}.csv",
            ["age", "bmi", "outcome"],
            [[30 + (7 * i) % 41, 20 + (3 * i) % 15, labels[i % len(labels)]] for i in range(rows)],
        )
        extra = {"label_map": (label_maps or {})[name]} if name in (label_maps or {}) else {}
        sites[name] = SiteConfig.from_dict(
            site_dict(site=name, data_path=str(data), **extra), f"site_configs/{name}.yaml"
        )
    return sites


def coded_job(sites: dict, **sections) -> JobConfig:
    data = {"job": {"sites": list(sites)}}
    for dotted, value in sections.items():
        set_key(data, dotted.replace("__", "."), value)
    return JobConfig.from_dict(data, "site_configs/job.yaml")


def test_two_codings_of_the_target_are_refused_naming_both_sites_and_the_fix(tmp_path):
    sites = coded_sites(tmp_path, {"site-1": (0, 1), "site-2": ("M", "B"), "site-3": (1, 0)})
    with pytest.raises(ConfigError) as info:
        check_job_against_sites(coded_job(sites), sites)
    msg = str(info.value)
    # the odd site's file and key, both sites with their codings, what is allowed, the fix
    assert msg.startswith("site_configs/site-2.yaml: key 'target' ('outcome') of site 'site-2'")
    assert "is coded ['B', 'M'], but site 'site-1' (site_configs/site-1.yaml" in msg
    assert "codes its target [0, 1]" in msg and "no class label in common" in msg
    assert "allowed: one coding of the target at every site (a site may lack a class)" in msg
    assert "site-2: label_map: {B: 0, M: 1} in site_configs/site-2.yaml" in msg
    # the fix, applied, is the same job with one coding
    fixed = coded_sites(
        tmp_path,
        {"site-1": (0, 1), "site-2": ("M", "B"), "site-3": (1, 0)},
        label_maps={"site-2": {"B": 0, "M": 1}},
    )
    check_job_against_sites(coded_job(fixed), fixed)


@pytest.mark.parametrize(
    "codings, odd, other, fix",
    [
        # 1/2 against 0/1: they overlap, neither holds the other
        ({"site-1": (0, 1), "site-2": (1, 2)}, "site-2", "site-1", "{1: 0, 2: 1}"),
        # spellings: yes/no against Yes/No (quoted: YAML would read them as booleans)
        ({"site-1": ("no", "yes"), "site-2": ("Yes", "No")}, "site-2", "site-1",
         "{'No': 'no', 'Yes': 'yes'}"),
        # the coding most sites use is kept; the one odd site gets the fix, wherever it is
        ({"site-1": ("B", "M"), "site-2": (0, 1), "site-3": (1, 0)}, "site-1", "site-2",
         "{B: 0, M: 1}"),
        # three classes at one site, two others coded by letters
        ({"site-1": (0, 1, 2), "site-2": ("a", "b")}, "site-2", "site-1", "{a: 0, b: 1}"),
    ],
)  # fmt: skip
def test_codings_that_differ_are_refused_at_build_time(tmp_path, codings, odd, other, fix):
    sites = coded_sites(tmp_path, codings)
    with pytest.raises(ConfigError) as info:
        check_job_against_sites(coded_job(sites), sites)
    msg = str(info.value)
    assert msg.startswith(f"site_configs/{odd}.yaml: key 'target'"), msg
    assert f"but site {other!r} (site_configs/{other}.yaml" in msg, msg
    assert f"{odd}: label_map: {fix} in site_configs/{odd}.yaml" in msg, msg


def test_a_site_lacking_a_class_is_one_coding(tmp_path):
    sites = coded_sites(tmp_path, {"site-1": (0, 1, 2), "site-2": (0, 1), "site-3": (2, 1, 0)})
    check_job_against_sites(coded_job(sites), sites)
    # two sites lacking different classes are refused, as the job's schema refuses them,
    # without a mapping to suggest (each is part of site-1's coding)
    sites = coded_sites(tmp_path, {"site-1": (0, 1, 2), "site-2": (0, 1), "site-3": (2, 1)})
    with pytest.raises(ConfigError) as info:
        check_job_against_sites(coded_job(sites), sites)
    msg = str(info.value)
    assert "'site-2' lacks [2], 'site-3' lacks [0]" in msg, msg
    assert "label_map: {local label: global label} in site_configs/site-3.yaml" in msg, msg


def test_the_fix_is_composed_with_the_sites_own_label_map(tmp_path):
    # site-2 maps 'pos' to 'M' already: its fix maps 'pos' (the label in its file) onward
    sites = coded_sites(
        tmp_path,
        {"site-1": (0, 1), "site-2": ("pos", "B")},
        label_maps={"site-2": {"pos": "M"}},
    )
    with pytest.raises(ConfigError, match=r"site-2: label_map: \{pos: 1, B: 0\}"):
        check_job_against_sites(coded_job(sites), sites)


def test_codings_are_left_alone_for_a_regression_job_and_a_data_file_not_here(tmp_path):
    sites = coded_sites(tmp_path, {"site-1": (0, 1), "site-2": ("M", "B")})
    Path(sites["site-2"].data_path).unlink()  # e.g. a site-owned path the builder cannot read
    check_job_against_sites(coded_job(sites), sites)
    sites = coded_sites(tmp_path, {"site-1": (1.5, 2.5, 3.5), "site-2": (10.25, 20.5, 30.75)})
    for name in sites:
        sites[name] = SiteConfig.from_dict(
            site_dict(site=name, data_path=sites[name].data_path),
            f"site_configs/{name}.yaml",
            task="regression",
        )
    check_job_against_sites(coded_job(sites, job__task="regression"), sites)


# --------------------------------------------------------------------------- job.tracking
def test_tracking_defaults_to_none_and_accepts_every_kind():
    from fedforest.vocabulary import TRACKING

    assert TRACKING == ("none", "tensorboard", "mlflow")
    assert JOB_DEFAULTS["job"]["tracking"] == "none"
    assert JobConfig.from_dict({"job": {"sites": ["a", "b"]}}).tracking == "none"
    assert JobConfig.load(ROOT / "site_configs" / "job.yaml").tracking == "none"
    for kind in TRACKING:
        cfg = JobConfig.from_dict({"job": {"sites": ["a", "b"], "tracking": kind}})
        assert cfg.tracking == kind


@pytest.mark.parametrize("value", ["TensorBoard", "wandb", "", None, True, 1, ["mlflow"]])
def test_tracking_error_names_file_key_value_and_allowed(tmp_path, value):
    path = write_yaml(tmp_path / "job.yaml", set_key(shipped_job(), "job.tracking", value))
    with pytest.raises(ConfigError) as info:
        JobConfig.load(path)
    assert_precise(info.value, path, "job.tracking", value, "none, tensorboard, mlflow")


# --------------------------------------------------------------------------- job.mode (swarm)
def test_mode_defaults_to_server_and_accepts_swarm():
    from fedforest.vocabulary import MODES

    assert MODES == ("server", "swarm")
    assert JOB_DEFAULTS["job"]["mode"] == "server"
    assert JobConfig.from_dict({"job": {"sites": ["a", "b"]}}).mode == "server"
    assert JobConfig.load(ROOT / "site_configs" / "job.yaml").mode == "server"
    cfg = JobConfig.from_dict({"job": {"sites": ["a", "b"], "mode": "swarm"}})
    assert cfg.mode == "swarm" and cfg.tracking == "none"


@pytest.mark.parametrize("value", ["Swarm", "p2p", "", None, True, 1, ["swarm"]])
def test_mode_error_names_file_key_value_and_allowed(tmp_path, value):
    path = write_yaml(tmp_path / "job.yaml", set_key(shipped_job(), "job.mode", value))
    with pytest.raises(ConfigError) as info:
        JobConfig.load(path)
    assert_precise(info.value, path, "job.mode", value, "server, swarm")


@pytest.mark.parametrize("tracking", ["tensorboard", "mlflow"])
def test_swarm_mode_refuses_tracking(tmp_path, tracking):
    job = set_key(set_key(shipped_job(), "job.mode", "swarm"), "job.tracking", tracking)
    path = write_yaml(tmp_path / "job.yaml", job)
    with pytest.raises(ConfigError) as info:
        JobConfig.load(path)
    assert_precise(info.value, path, "job.tracking", tracking, "none when job.mode is swarm")
    # the same tracking is fine in server mode
    server = write_yaml(tmp_path / "server.yaml", set_key(shipped_job(), "job.tracking", tracking))
    assert JobConfig.load(server).tracking == tracking


# --------------------------------------------------------------------------- site: report_metrics
def test_report_metrics_defaults_to_true():
    assert SITE_DEFAULTS["report_metrics"] is True
    assert SiteConfig.from_dict(site_dict(), "s.yaml").report_metrics is True
    for site in SITES:
        data = yaml.safe_load((ROOT / "site_configs" / f"{site}.yaml").read_text())
        assert SiteConfig.from_dict(data, f"{site}.yaml").report_metrics is True
    assert SiteConfig.from_dict(site_dict(report_metrics=False)).report_metrics is False


@pytest.mark.parametrize("value", ["false", "no", 0, 1, None, [True]])
def test_report_metrics_must_be_a_boolean(tmp_path, value):
    path = write_yaml(tmp_path / "site-1.yaml", site_dict(report_metrics=value))
    with pytest.raises(ConfigError) as info:
        SiteConfig.load(path)
    assert_precise(info.value, path, "report_metrics", value, "true or false")


@pytest.mark.parametrize(
    ("in_job", "in_own_file", "expected"),
    [
        (True, False, False),  # the hospital withholds what the job would send
        (False, True, False),  # the hospital cannot re-enable what the job withholds
        (False, False, False),
        (True, True, True),
        (True, ..., True),  # no key in the site's own file: the job's value
        (False, ..., False),
    ],
)
def test_report_metrics_false_in_either_file_wins(tmp_path, in_job, in_own_file, expected):
    site_yaml = write_yaml(tmp_path / "app" / "site-1.yaml", site_dict(report_metrics=in_job))
    own = {"data_path": "x.csv"} if in_own_file is ... else {"report_metrics": in_own_file}
    override = write_yaml(tmp_path / "local" / "fedforest.yaml", own)
    cfg = SiteConfig.load(site_yaml, override=override)
    assert cfg.report_metrics is expected
    assert SiteConfig.load(site_yaml).report_metrics is in_job  # the job's file alone


# --------------------------------------------------------------------------- site: privacy
def test_a_site_without_privacy_block_has_the_default_policy():
    assert SITE_DEFAULTS["privacy"] is None
    cfg = SiteConfig.from_dict(site_dict(), "s.yaml")
    # secure by default: no node of fewer than JOB_MIN_LEAF_ROWS rows, nothing else changed
    assert cfg.privacy == job_default_policy() and cfg.local_privacy is None
    assert cfg.privacy_policy() is cfg.privacy


def test_a_site_may_loosen_the_tree_sample_default_knowingly_and_is_warned(caplog):
    with caplog.at_level("WARNING", logger="fedforest.federation.config"):
        cfg = SiteConfig.from_dict(site_dict(privacy={"tree_sample_fraction": 1}), "s.yaml")
    assert cfg.privacy.tree_sample_fraction == 1 and cfg.privacy.min_leaf_rows == 5
    assert "privacy.tree_sample_fraction is 1.0, above the default of 0.3" in caplog.text
    tighter = SiteConfig.from_dict(site_dict(privacy={"tree_sample_fraction": 0.2}), "s.yaml")
    assert tighter.privacy.tree_sample_fraction == 0.2
    for bad in (0, 1.5, "half"):
        with pytest.raises(ConfigError, match="privacy.tree_sample_fraction"):
            SiteConfig.from_dict(site_dict(privacy={"tree_sample_fraction": bad}), "s.yaml")


def test_a_site_may_lower_the_default_knowingly_and_is_warned(caplog):
    with caplog.at_level("WARNING", logger="fedforest.federation.config"):
        cfg = SiteConfig.from_dict(site_dict(privacy={"min_leaf_rows": 1}), "site-1.yaml")
    assert cfg.privacy == PrivacyPolicy(tree_sample_fraction=0.3)  # leaves of any size
    assert "site-1.yaml: privacy.min_leaf_rows is 1, below the default of 5" in caplog.text
    assert "membership inference" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="fedforest.federation.config"):
        for block in ({"min_leaf_rows": 5}, {"min_leaf_rows": 9}, {"min_level_rows": 3}):
            cfg = SiteConfig.from_dict(site_dict(privacy=block), "site-1.yaml")
            assert cfg.privacy.min_leaf_rows == block.get("min_leaf_rows", JOB_MIN_LEAF_ROWS)
    assert caplog.text == ""


def test_dp_mode_keeps_its_own_leaves():
    block = {"dp_epsilon": 2.0, "feature_ranges": {"age": [0, 120]}}
    assert SiteConfig.from_dict(site_dict(privacy=block), "s.yaml").privacy.min_leaf_rows == 1


def test_the_privacy_block_of_the_site_yaml_is_read():
    block = {"min_leaf_rows": 5, "min_level_rows": 3, "share": {"intersection": False}}
    cfg = SiteConfig.from_dict(site_dict(privacy=block), "site_configs/site-1.yaml")
    policy = cfg.privacy_policy()
    assert policy.min_leaf_rows == 5 and policy.min_level_rows == 3
    assert policy.share["intersection"] is False and policy.share["imputers"] is True
    assert policy.source == "site_configs/site-1.yaml"


PRIVACY_ERRORS = [
    ({"min_leaf_rows": 0}, "privacy.min_leaf_rows", 0, "an integer in [1, 2147483647]"),
    ({"min_leaf_rows": "5"}, "privacy.min_leaf_rows", "5", "an integer in [1, 2147483647]"),
    ({"min_level_rows": -1}, "privacy.min_level_rows", -1, "an integer >= 0"),
    ({"dp_epsilon": 0}, "privacy.dp_epsilon", 0, "a finite number in [1e-06, 1000000.0]"),
    (
        {"count_noise_epsilon": -2.0},
        "privacy.count_noise_epsilon",
        -2.0,
        "a finite number in [1e-06, 1000000.0]",
    ),
    ({"share": {"imputers": "no"}}, "privacy.share.imputers", "no", "true or false"),
    ({"share": {"trees": False}}, "privacy.share.trees", False, "one of the known keys"),
    (
        {"threshold_grid": {"step": 0}},
        "privacy.threshold_grid.step",
        0,
        "a finite number in [1e-09, 3.4028234663852886e+38]",
    ),
    ({"k": 5}, "privacy.k", 5, "one of the known keys privacy.min_leaf_rows"),
    ([5], "privacy", [5], "a mapping of privacy keys to values"),
]


@pytest.mark.parametrize(
    ("block", "key", "shown", "allowed"), PRIVACY_ERRORS, ids=[k for _, k, *_ in PRIVACY_ERRORS]
)
def test_an_invalid_privacy_value_is_refused_at_build(tmp_path, block, key, shown, allowed):
    path = write_yaml(tmp_path / "site_configs" / "site-1.yaml", site_dict(privacy=block))
    with pytest.raises(ConfigError) as info:
        SiteConfig.load(path)  # what `fedforest job build` runs for every site
    assert_precise(info.value, path, key, shown, allowed)


@pytest.mark.parametrize(
    ("block", "key", "shown", "allowed"), PRIVACY_ERRORS, ids=[k for _, k, *_ in PRIVACY_ERRORS]
)
def test_an_invalid_privacy_value_in_the_sites_own_file_is_refused(
    tmp_path, site_yaml, block, key, shown, allowed
):
    override = write_yaml(tmp_path / "local" / "fedforest.yaml", {"privacy": block})
    with pytest.raises(ConfigError) as info:
        SiteConfig.load(site_yaml, override=override)  # what the site runs when it starts
    assert_precise(info.value, override, key, shown, allowed)


def test_job_build_refuses_an_invalid_privacy_block(tmp_path):
    job_module = pytest.importorskip("fedforest.flare.job")
    configs = tmp_path / "site_configs"
    make_demo_data(tmp_path / "demo_data", rows=40, seed=0)
    configs.mkdir()
    shutil.copy(ROOT / "site_configs" / "job.yaml", configs / "job.yaml")
    for site in SITES:
        data = yaml.safe_load((ROOT / "site_configs" / f"{site}.yaml").read_text())
        if site == "site-2":
            data["privacy"] = {"threshold_grid": {"step": 1, "edges": {"activity": [0.5]}}}
        write_yaml(configs / f"{site}.yaml", data)
    with pytest.raises(ConfigError) as info:
        job_module.load_configs(configs)
    assert_precise(
        info.value, configs / "site-2.yaml", "privacy.threshold_grid", ["activity"], "numeric"
    )


def test_the_sites_own_file_may_hold_a_privacy_block(tmp_path, site_yaml):
    override = write_yaml(tmp_path / "local" / "fedforest.yaml", {"privacy": {"min_leaf_rows": 10}})
    base = SiteConfig.load(site_yaml)
    cfg = SiteConfig.load(site_yaml, override=override)
    assert cfg.data_path == base.data_path and cfg.source == base.source  # no data_path there
    assert cfg.local_privacy.min_leaf_rows == 10
    assert cfg.privacy == job_default_policy()
    policy = cfg.privacy_policy()
    assert policy.min_leaf_rows == 10
    assert policy.source == f"{override} + {site_yaml}"
    both = write_yaml(
        tmp_path / "local2" / "fedforest.yaml",
        {"data_path": "x.csv", "privacy": {"min_level_rows": 5}},
    )
    cfg = SiteConfig.load(site_yaml, override=both)
    assert cfg.data_path.endswith("x.csv") and cfg.privacy_policy().min_level_rows == 5


def test_the_stricter_of_the_two_blocks_applies_for_every_key(tmp_path):
    job_block = {
        "min_leaf_rows": 5,
        "min_level_rows": 20,
        "count_noise_epsilon": 2.0,
        "share": {"imputers": False},
        "threshold_grid": {"step": 1.0},
    }
    own_block = {
        "min_leaf_rows": 20,
        "min_level_rows": 3,
        "count_noise_epsilon": 4.0,
        "share": {"surrogates": False},
        "threshold_grid": {"step": 0.5},
    }
    path = write_yaml(tmp_path / "site-1.yaml", site_dict(privacy=job_block))
    override = write_yaml(tmp_path / "local" / "fedforest.yaml", {"privacy": own_block})
    policy = SiteConfig.load(path, override=override).privacy_policy()
    assert policy.min_leaf_rows == 20  # the hospital's: a job cannot loosen it
    assert policy.min_level_rows == 20  # the job's: a job can tighten it
    assert policy.count_noise_epsilon == 2.0
    assert not policy.share["imputers"] and not policy.share["surrogates"]
    assert policy.share["feature_std"] and policy.share["intersection"]
    assert policy.threshold_grid.default == ("step", 1.0)  # the coarser grid


def test_two_grids_that_cannot_be_combined_are_refused_naming_both_files(tmp_path):
    path = write_yaml(
        tmp_path / "site-1.yaml", site_dict(privacy={"threshold_grid": {"step": 0.3}})
    )
    override = write_yaml(
        tmp_path / "local" / "fedforest.yaml", {"privacy": {"threshold_grid": {"step": 0.5}}}
    )
    with pytest.raises(ConfigError) as info:
        SiteConfig.load(path, override=override)
    msg = str(info.value)
    assert msg.startswith(f"{override} and {path}: key 'privacy.threshold_grid'"), msg
    assert f"step 0.5 ({override}) against step 0.3 ({path})" in msg


def test_a_site_whose_split_leaves_a_part_without_a_class_is_refused(tmp_path):
    sites = two_sites(tmp_path, rows=(100, 100), validation="holdout")
    path = Path(sites["site-1"].data_path)
    lines = path.read_text().splitlines()
    # one positive in 100 rows: the holdouts leave the training rows (or the others) one class
    rows = [
        line.rsplit(",", 1)[0] + ("," + ("1" if i == 7 else "0"))
        for i, line in enumerate(lines[1:])
    ]
    path.write_text("\n".join([lines[0], *rows]) + "\n")
    with pytest.raises(ConfigError) as info:
        check_job_against_sites(job_config(), sites)
    text = str(info.value)
    assert text.startswith(f"site-1.yaml: the data file {path} cannot run in this job")
    assert "target 'outcome' has class counts {0: 99, 1: 1}" in text
    assert "class 1 (1 row) gets" in text
    assert "with 100 rows a class needs at least 6 rows" in text
    assert "smaller validation_fraction or test_fraction" in text
    # the site runs the same check when it starts, on the table it has read
    with pytest.raises(ConfigError, match="class 1 \\(1 row\\) gets"):
        job_config().check_against_sites(
            {"site-1": sites["site-1"]}, {"site-1": read_table(sites["site-1"])}
        )


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        (
            "job:\n  name: a\n  sites: [s1, s2]\nforest:\n  max_depth: 3\njob:\n  name: b\n",
            "job",
            (1, 6),
        ),
        ("job:\n  name: a\n  sites: [s1, s2]\n  name: b\n", "job.name", (2, 4)),
        (
            "job:\n  sites: [s1, s2]\nforest: {max_depth: 3, max_depth: 4}\n",
            "forest.max_depth",
            (3, 3),
        ),
    ],
)
def test_a_key_given_twice_in_a_yaml_file_is_named_with_its_lines(tmp_path, text, key, lines):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        JobConfig.load(path)
    assert str(info.value).startswith(
        f"{path}: key '{key}' appears twice (lines {lines[0]} and {lines[1]}); allowed: each key once"
    )


def test_a_key_given_twice_in_a_site_yaml_is_refused_too(tmp_path):
    path = tmp_path / "site-1.yaml"
    path.write_text(
        "site: site-1\ndata_path: d.csv\ntarget: y\nprivacy:\n  min_leaf_rows: 20\nprivacy:\n  min_leaf_rows: 1\n"
    )
    with pytest.raises(ConfigError, match="key 'privacy' appears twice \\(lines 4 and 6\\)"):
        SiteConfig.load(path)


def test_a_regression_job_gets_regression_defaults_and_refuses_classification_keys():
    job = JobConfig.from_dict({"job": {"sites": ["a", "b"], "task": "regression"}}, "j.yaml")
    assert job.task == "regression" and job.metrics == ["rmse", "mae", "r2"]
    assert job.auto_metric == "rmse" and job.election.metric == "rmse"
    assert job.calibration == "none"
    refused = [
        ({"evaluation": {"metrics": ["auprc", "rmse"]}}, "evaluation.metrics"),
        ({"evaluation": {"calibration": "auto"}}, "evaluation.calibration"),
        ({"evaluation": {"voting": "hard"}}, "evaluation.voting"),
        ({"evaluation": {"auto_metric": "log_loss"}}, "evaluation.auto_metric"),
        ({"election": {"metric": "auprc"}}, "election.metric"),
    ]
    for extra, key in refused:
        data = {"job": {"sites": ["a", "b"], "task": "regression"}, **extra}
        with pytest.raises(ConfigError, match=f"j.yaml: key '{key}'"):
            JobConfig.from_dict(data, "j.yaml")
    with pytest.raises(ConfigError, match="key 'job.task' is 'ranking'"):
        JobConfig.from_dict({"job": {"sites": ["a", "b"], "task": "ranking"}}, "j.yaml")


def test_a_regression_site_names_the_selectors_it_may_use():
    with pytest.raises(ConfigError, match="key 'selector' is 'chi2'.*f_regression"):
        SiteConfig.from_dict(site_dict(selector="chi2"), "site-1.yaml", task="regression")
    with pytest.raises(ConfigError, match="key 'selector' is 'f_regression'"):
        SiteConfig.from_dict(site_dict(selector="f_regression"), "site-1.yaml")


def test_trees_per_site_is_every_tree_by_default_or_a_whole_number():
    from fedforest.federation.config import JOB_DEFAULTS

    job = {"job": {"sites": ["a", "b"]}}
    assert JobConfig.from_dict(job).trees_per_site is None
    assert JOB_DEFAULTS["evaluation"]["trees_per_site"] is None
    capped = {**job, "evaluation": {"trees_per_site": 300}}
    assert JobConfig.from_dict(capped).trees_per_site == 300


# --------------------------------------------------------------------------- validation modes
def test_the_validation_mode_is_the_sites_else_the_jobs():
    job = JobConfig.from_dict({"job": {"sites": ["a", "b"]}})
    assert job.validation == "oob"
    assert JobConfig.load(ROOT / "site_configs" / "job.yaml").validation == "holdout"
    held = JobConfig.from_dict(
        {"job": {"sites": ["a", "b"]}, "evaluation": {"validation": "holdout"}}
    )
    assert held.validation == "holdout"
    site = SiteConfig.from_dict(site_dict(), "site-1.yaml", validation=held.validation)
    assert site.validation is None and site.validation_choice() == (
        "holdout",
        "the job's evaluation.validation",
    )
    assert site.held_validation_fraction == 0.2
    own = SiteConfig.from_dict(site_dict(validation="oob"), "site-1.yaml", validation="holdout")
    assert own.validation_choice() == ("oob", "key 'validation' of site-1.yaml")
    assert own.held_validation_fraction is None


@pytest.mark.parametrize("value", ["cross", "OOB", 1, True, ["oob"]])
def test_a_bad_validation_mode_is_refused_naming_file_key_and_choices(value):
    with pytest.raises(ConfigError) as info:
        JobConfig.from_dict({"job": {"sites": ["a", "b"]}, "evaluation": {"validation": value}})
    assert_precise(info.value, "job.yaml", "evaluation.validation", value, "oob, holdout")
    with pytest.raises(ConfigError) as info:
        SiteConfig.from_dict(site_dict(validation=value), "site_configs/site-1.yaml")
    assert_precise(info.value, "site_configs/site-1.yaml", "validation", value, "oob, holdout")


def test_a_dp_site_asking_for_oob_is_refused_in_its_yaml():
    dp = {"dp_epsilon": 4.0, "feature_ranges": {"age": [0, 120]}}
    with pytest.raises(ConfigError) as info:
        SiteConfig.from_dict(site_dict(privacy=dp, validation="oob"), "site-1.yaml")
    assert_precise(info.value, "site-1.yaml", "validation", "oob", "holdout or null in DP mode")
    # the job's oob is no request of the site's: it holds out, and says why
    site = SiteConfig.from_dict(site_dict(privacy=dp), "site-1.yaml", validation="oob")
    mode, why = site.validation_choice()
    assert mode == "holdout" and why.startswith("DP mode (site-1.yaml) in place of oob")
