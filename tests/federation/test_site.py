"""The site side of a job (SiteRunner), driven in-process with the three demo hospitals.

The helpers here (``make_job``, ``run_job``, ``assert_plain``) are also used by
``test_server.py``: they run every phase the way the FLARE controller does, with
real data files, real YAML configs and real scikit-learn.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fedforest import STRATEGIES, protocol
from fedforest.errors import ConfigError, SchemaError
from fedforest.federation.config import (
    LOCAL_OVERRIDE,
    JobConfig,
    SiteConfig,
    split_sizes,
)
from fedforest.federation.schema import GlobalSchema, SiteSchema, lacking_classes
from fedforest.federation.server import JobServer
from fedforest.federation.site import SiteRunner
from fedforest.model.forest import PooledForest
from fedforest.model.pooled_model import load_model
from fedforest.privacy.audit import check_forest, disclosed_rare_levels
from fedforest.privacy.levels import OTHER_LEVEL
from fedforest.privacy.policy import (
    JOB_MIN_LEAF_ROWS,
    JOB_TREE_SAMPLE_FRACTION,
    job_default_policy,
)
from fedforest.vocabulary import JOB_STRATEGIES

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "data_prep"))

from make_demo_data import make_demo_data  # noqa: E402

SITES = ("site-1", "site-2", "site-3")
SHARED = ["age", "bmi", "smoker", "systolic_bp"]
OWN_COLUMNS = {
    "site-1": ["age", "bmi", "glucose", "insulin", "ldl", "smoker", "systolic_bp"],
    "site-2": ["activity", "age", "bmi", "glucose", "hba1c", "smoker", "systolic_bp"],
    "site-3": ["activity", "age", "bmi", "cholesterol", "insulin", "smoker", "systolic_bp"],
}
METRIC_NAMES = ("auprc", "auc", "mcc", "accuracy")


# --------------------------------------------------------------------------- helpers
def make_job(
    folder: Path,
    rows: int = 300,
    n_estimators: int = 20,
    site_changes: dict | None = None,
    local: dict | None = None,
    validation: str = "holdout",
    **job_overrides,
):
    """Demo data, a job YAML and three site YAMLs in ``folder``; the config and runners.

    ``site_changes`` adds keys to a site's YAML (``{site: {key: value}}``);
    ``local`` writes a site's own ``local/fedforest.yaml`` (``{site: content}``),
    loaded as the FLARE executor loads it. ``validation`` is the job's
    ``evaluation.validation`` (``holdout``: the sites score on validation rows, so
    the numbers these tests compare are the holdout job's).
    """
    make_demo_data(folder / "data", rows=rows, seed=0)
    configs = folder / "site_configs"
    configs.mkdir(parents=True, exist_ok=True)
    job = yaml.safe_load((ROOT / "site_configs" / "job.yaml").read_text())
    job["forest"]["n_estimators"] = n_estimators
    job["election"]["tuning_rounds"] = 3
    job["evaluation"]["validation"] = validation
    for section, values in job_overrides.items():
        job[section].update(values)
    (configs / "job.yaml").write_text(yaml.safe_dump(job))
    for site in SITES:
        cfg = yaml.safe_load((ROOT / "site_configs" / f"{site}.yaml").read_text())
        cfg["data_path"] = f"../data/{site}.csv"  # relative to the YAML, as shipped
        cfg.update((site_changes or {}).get(site, {}))
        (configs / f"{site}.yaml").write_text(yaml.safe_dump(cfg))
        if site in (local or {}):
            own = folder / "local" / site / LOCAL_OVERRIDE
            own.parent.mkdir(parents=True, exist_ok=True)
            own.write_text(yaml.safe_dump(local[site]))
    config = JobConfig.load(configs / "job.yaml")
    runners = {
        site: SiteRunner(
            SiteConfig.load(
                configs / f"{site}.yaml",
                override=folder / "local" / site / LOCAL_OVERRIDE,
                task=config.task,
                validation=config.validation,
            ),
            random_state=config.seed,
        )
        for site in config.sites
    }
    return config, runners


@dataclass
class Job:
    """Everything a job run produced, phase by phase."""

    config: JobConfig
    runners: dict
    server: JobServer
    describe: dict = field(default_factory=dict)
    schema: dict | None = None
    votes: dict = field(default_factory=dict)
    ballot: object = None
    scored_masks: list = field(default_factory=list)
    elected: list = field(default_factory=list)
    trained: dict = field(default_factory=dict)
    model: dict | None = None
    metrics: dict = field(default_factory=dict)
    results: dict | None = None
    run_dir: Path | None = None


def run_job(config: JobConfig, runners: dict, run_dir: Path) -> Job:
    """describe -> build_schema -> set_schema -> vote -> read_votes -> elect -> train -> pool
    -> evaluate -> write_results, every payload crossing as the controller would carry it."""
    server = JobServer(config)
    job = Job(config, runners, server, run_dir=run_dir)
    alive = lambda: server.alive(config.sites)  # noqa: E731

    job.describe = server.timed("schema", lambda: {s: runners[s].describe() for s in alive()})
    job.schema = server.timed("schema", lambda: server.build_schema(job.describe))
    for site in alive():
        server.timed("election", lambda site=site: runners[site].set_schema(job.schema))
    job.votes = server.timed("election", lambda: {s: runners[s].vote() for s in alive()})
    job.ballot = server.read_votes(job.votes)

    def score(features: list[str]) -> float:
        metric = config.election.metric
        replies = {s: runners[s].score_mask(features, metric) for s in alive()}
        job.scored_masks.append((list(features), replies))
        return server.score_replies(replies)

    job.elected = server.timed("election", lambda: server.elect(job.ballot, score))
    want_inter = "intersection" in config.strategies
    job.trained = server.timed(
        "train",
        lambda: {
            s: runners[s].train(
                job.elected, config.forest.to_dict(), config.surrogates.to_dict(), want_inter
            )
            for s in alive()
        },
    )
    job.model = server.timed("pool", lambda: server.pool(job.trained, want_inter))
    job.metrics = server.timed(
        "evaluate",
        lambda: {
            s: runners[s].run_task(
                protocol.EVALUATE,
                protocol.task_data(
                    protocol.EVALUATE,
                    model=copy.deepcopy(job.model),
                    strategies=config.strategies,
                    voting=config.voting,
                    depth_threshold=config.depth_threshold,
                    metrics=config.metrics,
                    auto_metric=config.auto_metric,
                    calibration=config.calibration,
                    horizons=None,
                ),
                save_dir=run_dir / s,
            )
            for s in alive()
        },
    )
    job.results = server.write_results(run_dir, job.metrics, job.model)
    return job


PLAIN = (str, int, float, bool)


def assert_plain(value, where: str = "payload") -> None:
    """Only dicts/lists of str, int, float, bool, None and arrays of numbers or strings."""
    if isinstance(value, np.ndarray):
        assert value.dtype.kind in "iufbU", f"{where}: array of dtype {value.dtype}"
    elif isinstance(value, dict):
        for k, v in value.items():
            assert isinstance(k, str), f"{where}: key {k!r} is not a string"
            assert_plain(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            assert_plain(v, f"{where}[{i}]")
    else:
        assert value is None or type(value) in PLAIN, f"{where}: {type(value).__name__}"


def assert_payload_equal(a, b, where: str = "payload") -> None:
    """Two payloads hold the same structure, values and arrays."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            assert_payload_equal(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_payload_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Job:
    folder = tmp_path_factory.mktemp("site_job")
    config, runners = make_job(folder)
    return run_job(config, runners, folder / "run")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """Runners that have seen the schema but nothing else (for phase-level checks)."""
    folder = tmp_path_factory.mktemp("site_fresh")
    config, runners = make_job(folder, rows=120, n_estimators=8)
    server = JobServer(config)
    schema = server.build_schema({s: r.describe() for s, r in runners.items()})
    for r in runners.values():
        r.set_schema(schema)
    return config, runners, schema, folder


# --------------------------------------------------------------------------- phase 1
def test_load_renames_to_global_names(job):
    frame = job.runners["site-2"].frame
    assert "glucose" in frame.columns and "glucose_mg_dl" not in frame.columns
    assert frame.shape == (300, 8)


def test_describe_payload(job):
    for site, payload in job.describe.items():
        assert_plain(payload, f"{site}.describe")
        assert payload["format"] == "fedforest/site-schema" and payload["site"] == site
        assert sorted(payload["columns"]) == OWN_COLUMNS[site]
        kinds = dict(zip(payload["columns"], payload["kinds"], strict=True))
        assert kinds["smoker"] == "categorical" and kinds["age"] == "numeric"
        assert payload["levels"]["smoker"] == ["current", "former", "never"]
        assert payload["classes"] == [0, 1] and payload["n_rows"] == 300
        assert "outcome" not in payload["columns"]
    assert job.describe["site-2"]["levels"]["activity"] == ["high", "low", "medium"]


def test_set_schema_splits_and_encodes(job):
    for site, runner in job.runners.items():
        assert runner.columns == OWN_COLUMNS[site]
        n_test, n_val, n_train = len(runner.X_test), len(runner.X_val), len(runner.X_train)
        assert (n_train, n_val, n_test) == (165, 60, 75)
        index = [*runner.X_train.index, *runner.X_val.index, *runner.X_test.index]
        assert sorted(index) == list(range(300))  # disjoint and complete
        assert list(runner.X_train.columns) == OWN_COLUMNS[site]
        codes = np.unique(runner.X_train["smoker"])
        assert set(codes) <= {0.0, 1.0, 2.0}
        assert all(dt == np.float64 for dt in runner.X_train.dtypes)
        assert set(np.unique(runner.y_train)) == {0, 1}


def test_set_schema_refuses_a_schema_without_this_site(fresh):
    _, runners, schema, _ = fresh
    other = copy.deepcopy(schema)
    del other["site_columns"]["site-3"]
    runner = SiteRunner(runners["site-3"].config)
    runner.load()
    with pytest.raises(ValueError, match="does not list site 'site-3'"):
        runner.set_schema(other)


def test_too_few_rows_refused(tmp_path):
    path = tmp_path / "tiny.csv"
    pd.DataFrame({"a": range(5), "outcome": [0, 1, 0, 1, 0]}).to_csv(path, index=False)
    cfg = SiteConfig.from_dict({"site": "s", "data_path": str(path), "target": "outcome"}, "s.yaml")
    with pytest.raises(ValueError, match="has 5 rows; at least 10"):
        SiteRunner(cfg).load()


# --------------------------------------------------------------------------- phase 2
def test_each_vote_covers_only_its_own_columns(job):
    features = job.schema["features"]
    for site, vote in job.votes.items():
        assert_plain(vote, f"{site}.vote")
        assert vote["site"] == site and "features" not in vote  # names travel as indices
        idx = vote["feature_index"]
        assert idx.dtype.kind == "i" and len(set(idx.tolist())) == idx.size
        assert sorted(features[i] for i in idx) == OWN_COLUMNS[site]
        assert vote["mask"].dtype == bool and vote["mask"].shape == idx.shape
        assert np.all(np.isfinite(vote["scores"])) and vote["scores"].shape == idx.shape
        assert vote["n_rows"] == 165


def test_score_mask(fresh):
    config, runners, _, _ = fresh
    runner = runners["site-1"]
    reply = runner.score_mask(["glucose", "insulin", "bmi"], "auprc")
    assert set(reply) == {"format", "version", "score", "n_rows"}
    assert reply["format"] == "fedforest/mask-score"
    assert type(reply["score"]) is float and 0.0 <= reply["score"] <= 1.0
    assert reply["n_rows"] == len(runner.X_val)
    assert runner.score_mask(["glucose", "insulin", "bmi"], "auprc") == reply  # seeded
    # a mask of columns the site lacks: the constant predictor, still a valid score
    lacking = runner.score_mask(["hba1c", "cholesterol"], "auc")
    assert lacking["score"] == pytest.approx(0.5)


# --------------------------------------------------------------------------- phase 3
def test_training_payloads_are_plain_and_follow_the_election(job):
    elected = set(job.elected)
    shared = set(job.schema["shared"])
    for site, payload in job.trained.items():
        assert_plain(payload, f"{site}.train")
        assert set(payload) == {
            "format",
            "version",
            "forest",
            "imputers",
            "feature_std",
            "n_rows",
            "intersection",
        }
        forest = payload["forest"]
        assert forest["owners"] == [site]
        own_elected = [c for c in OWN_COLUMNS[site] if c in elected]
        assert forest["feature_names"] == own_elected
        private = [c for c in own_elected if c not in shared]
        imputed = [imp["feature"] for imp in payload["imputers"]["imputers"]]
        assert set(imputed) <= set(private)
        for imp in payload["imputers"]["imputers"]:
            assert set(imp["predictors"]) <= shared & elected and imp["owner"] == site
        assert set(payload["feature_std"]) == {c for c in own_elected if c != "smoker"}
        assert all(v >= 0 for v in payload["feature_std"].values())
        assert payload["n_rows"] == 165
        assert payload["intersection"]["feature_names"] == SHARED
        assert payload["intersection"]["owners"] == [site]


def test_training_is_reproducible(fresh):
    config, runners, _, _ = fresh
    elected = ["age", "bmi", "glucose", "insulin", "smoker"]
    a = runners["site-1"].train(
        elected, config.forest.to_dict(), config.surrogates.to_dict(), False
    )
    b = runners["site-1"].train(
        elected, config.forest.to_dict(), config.surrogates.to_dict(), False
    )
    assert "intersection" not in a
    assert_payload_equal(a, b)


def test_train_refuses_an_election_without_any_own_column(fresh):
    config, runners, _, _ = fresh
    with pytest.raises(ValueError, match="site 'site-1' has none of the elected features"):
        runners["site-1"].train(
            ["hba1c", "activity"], config.forest.to_dict(), config.surrogates.to_dict(), False
        )


def test_train_with_only_shared_columns_has_no_imputers(fresh):
    config, runners, _, _ = fresh
    out = runners["site-3"].train(
        ["age", "bmi"], config.forest.to_dict(), config.surrogates.to_dict(), False
    )
    assert out["imputers"]["imputers"] == []
    assert out["forest"]["feature_names"] == ["age", "bmi"]


# --------------------------------------------------------------------------- phase 4
def test_evaluate_returns_every_strategy_with_metrics_in_range(job):
    assert job.config.strategies == list(JOB_STRATEGIES)
    for site, out in job.metrics.items():
        assert_plain(out, f"{site}.metrics")
        assert out["site"] == site and out["rows"] == 75
        assert list(out["strategies"]) == list(JOB_STRATEGIES)
        for strategy, row in out["strategies"].items():
            assert 0.0 <= row["auprc"] <= 1.0 and 0.0 <= row["auc"] <= 1.0, (site, strategy)
            assert -1.0 <= row["mcc"] <= 1.0 and 0.0 <= row["accuracy"] <= 1.0
            assert row["rows"] == 75 and row["fallback_rows"] >= 0
            assert 0 < row["mean_trees_kept"] <= 60
            assert 0.0 <= row["brier"] <= 1.0 and row["log_loss"] >= 0 and 0 <= row["ece"] <= 1
            assert row["calibration"] in ("none", "prior", "sigmoid", "isotonic")
            assert sum(row["bins"]["count"]) == 75 and row["bins"]["target"] == "1"
        assert out["strategies"]["local"]["mean_trees_kept"] == 20
        assert out["strategies"]["mp"]["mean_trees_kept"] == 60  # mp never discards
        auto = out["strategies"]["auto"]
        assert auto["chosen"] in (*STRATEGIES, "intersection")
        assert auto["chosen"] in auto["validation"] and "intersection" in auto["validation"]
        # the job's auto_metric is log-loss: the lowest cross-fitted validation score wins,
        # or a preferred candidate within one standard error of it
        assert job.config.auto_metric == "log_loss"
        assert auto["validation"][auto["chosen"]] <= min(auto["validation"].values()) + 0.1
        assert auto["runner_up"] in auto["validation"] and auto["runner_up"] != auto["chosen"]
        assert auto["chosen_calibration"] == out["strategies"][auto["chosen"]]["calibration"]


def test_mp_beats_the_intersection_baseline(job):
    def mean_auprc(strategy):
        return np.mean([m["strategies"][strategy]["auprc"] for m in job.metrics.values()])

    assert mean_auprc("mp") > mean_auprc("intersection")


def test_evaluate_saves_the_model_and_metrics(job):
    for site in SITES:
        folder = job.run_dir / site
        saved = json.loads((folder / "metrics.json").read_text())
        assert saved == json.loads(json.dumps(job.metrics[site]))
        parts = load_model(folder / "pooled_model.npz")
        assert parts.forest.owners == list(SITES)
        assert parts.forest.n_trees == 60 and parts.intersection.n_trees == 60


def test_evaluate_without_an_intersection_forest(job):
    model = copy.deepcopy(job.model)
    model["intersection"] = None
    runner = job.runners["site-1"]
    # no site shared an intersection forest: that row is undefined, the others are scored
    out = runner.evaluate(model, ["intersection", "fpv"], metrics=["auc", "mcc"])
    events = int(sum(runner.y_test == runner.schema.classes[1]))
    assert out["strategies"]["intersection"] == {
        "auc": None,
        "mcc": None,
        "rows": 75,
        "events": events,
        "intervals": {"auc": None},  # an undefined score has no interval
        "mean_trees_kept": 0.0,
        "fallback_rows": 0,
    }
    assert out["strategies"]["fpv"]["auc"] is not None
    out = runner.evaluate(model, ["mp", "fpv"], metrics=["auc"])
    assert list(out["strategies"]) == ["mp", "fpv"]
    row = out["strategies"]["mp"]
    assert 0.0 <= row["auc"] <= 1.0 and "auprc" not in row and "chosen" not in row


def test_auto_shares_its_test_prediction_without_changing_a_bit(job):
    # evaluate_strategies predicts the test rows once per strategy; auto reuses the row of
    # the strategy it chose. Each strategy scored on its own (its own prediction, as before
    # the sharing) must give the very same row, in whatever order the strategies come.
    for site in SITES:
        runner = job.runners[site]

        def scores(strategies, runner=runner):
            return runner.evaluate(
                copy.deepcopy(job.model), strategies, calibration=job.config.calibration
            )["strategies"]

        together = job.metrics[site]["strategies"]
        chosen = together["auto"]["chosen"]
        for strategy in JOB_STRATEGIES:
            assert scores([strategy])[strategy] == together[strategy], (site, strategy)
        alone = scores([chosen])[chosen]
        auto_only = ("chosen", "chosen_calibration", "runner_up", "validation")
        shared = {k: v for k, v in together["auto"].items() if k not in auto_only}
        assert shared == alone, site
        auto_first = scores(["auto", chosen])
        assert auto_first["auto"] == together["auto"] and auto_first[chosen] == alone, site


def test_evaluate_refuses_a_tampered_model(job):
    model = copy.deepcopy(job.model)
    model["forest"]["feature"] = model["forest"]["feature"].astype(np.int64)
    model["forest"]["feature"][0] = 999
    from fedforest.errors import PayloadError

    with pytest.raises(PayloadError, match="from 'server' refused"):
        job.runners["site-1"].evaluate(model, ["mp"])


# --------------------------------------------------------------------------- site start checks
def hospital_csv(path: Path, labels, n: int = 60, seed: int = 0, index: bool = False) -> Path:
    """A small table: an identifier, two numeric columns, a text column and a label."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "patient_id": [f"P{seed}-{i:04d}" for i in range(n)],
            "age": rng.integers(20, 90, n),
            "bmi": rng.normal(27, 4, n).round(1),
            "smoker": rng.choice(["never", "former", "current"], n),
            "outcome": [labels[i % len(labels)] for i in range(n)],
        }
    )
    frame.to_csv(path, index=index)
    return path


def site_runner(tmp_path: Path, name: str, labels, **config) -> SiteRunner:
    data = hospital_csv(tmp_path / f"{name}.csv", labels, seed=len(name) + len(labels))
    cfg = {"site": name, "data_path": str(data), "target": "outcome", **config}
    return SiteRunner(SiteConfig.from_dict(cfg, f"{name}.yaml"))


def test_the_site_refuses_a_saved_index_when_it_starts(tmp_path):
    data = hospital_csv(tmp_path / "s.csv", [0, 1], index=True)
    cfg = SiteConfig.from_dict({"site": "s", "data_path": str(data), "target": "outcome"}, "s.yaml")
    with pytest.raises(ConfigError) as info:
        SiteRunner(cfg).load()
    msg = str(info.value)
    assert msg.startswith(f"s.yaml: data file {data}: column 'Unnamed: 0' has no name")
    assert "drop_columns: ['Unnamed: 0']" in msg


def test_dropped_columns_and_label_map_apply_before_describing(tmp_path):
    runner = site_runner(
        tmp_path, "s", ["No", "Yes"], drop_columns=["patient_id"], label_map={"No": 0, "Yes": 1}
    )
    payload = runner.describe()
    assert payload["columns"] == ["age", "bmi", "smoker"]  # the identifier is never a feature
    assert payload["classes"] == [0, 1]
    assert "patient_id" not in runner.frame.columns


def test_label_map_fixes_a_coding_difference(tmp_path):
    a = site_runner(tmp_path, "a", [0, 1], drop_columns=["patient_id"])
    b = site_runner(tmp_path, "b", [1, 2], drop_columns=["patient_id"])
    with pytest.raises(SchemaError, match="a coding difference such as 0/1 against 1/2"):
        GlobalSchema.build([SiteSchema.from_payload(r.describe()) for r in (a, b)])
    b = site_runner(tmp_path, "b", [1, 2], drop_columns=["patient_id"], label_map={1: 0, 2: 1})
    schema = GlobalSchema.build([SiteSchema.from_payload(r.describe()) for r in (a, b)])
    assert schema.classes == [0, 1]
    b.set_schema(schema.to_payload())
    assert set(np.unique(b.y_train)) == {0, 1}


def test_a_site_lacking_a_class_takes_part(tmp_path):
    a = site_runner(tmp_path, "a", ["high", "low", "mid"], drop_columns=["patient_id"])
    b = site_runner(tmp_path, "b", ["high", "low"], drop_columns=["patient_id"])
    sites = [SiteSchema.from_payload(r.describe()) for r in (a, b)]
    schema = GlobalSchema.build(sites)
    assert schema.classes == ["high", "low", "mid"]
    assert lacking_classes(sites) == {"b": ["mid"]}


def test_the_job_settings_are_checked_against_the_site_when_it_starts(tmp_path):
    job = JobConfig.from_dict({"job": {"sites": ["s", "t"]}, "forest": {"min_samples_leaf": 17}})
    runner = site_runner(tmp_path, "s", [0, 1], drop_columns=["patient_id"], validation="holdout")
    n_train = split_sizes(60, 0.2, 0.25)[0]
    assert n_train == 33
    with pytest.raises(ConfigError) as info:
        runner.load(job=job)
    msg = str(info.value)
    assert msg.startswith("job.yaml: key 'forest.min_samples_leaf' is 17; allowed: at most 16")
    assert "s.yaml gives 33 training rows" in msg
    assert runner.frame is None
    job.forest = dataclasses.replace(job.forest, min_samples_leaf=16)
    assert runner.load(job=job).frame.shape == (60, 4)


def test_split_sizes_match_the_splits_of_set_schema(job):
    for runner in job.runners.values():
        n = len(runner.frame)
        expected = split_sizes(n, runner.config.validation_fraction, runner.config.test_fraction)
        assert expected == (len(runner.X_train), len(runner.X_val), len(runner.X_test))


def test_train_refuses_a_leaf_size_that_leaves_one_leaf_trees(fresh):
    config, runners, schema, _ = fresh
    runner = runners["site-1"]
    too_big = {**config.forest.to_dict(), "min_samples_leaf": len(runner.X_train)}
    with pytest.raises(ValueError, match="forest.min_samples_leaf=.* training rows for a single"):
        runner.train(list(runner.columns), too_big, config.surrogates.to_dict(), False)


# --------------------------------------------------------------------------- privacy policies
#: Public ranges of site-3's numeric columns (its DP mode needs them).
SITE3_RANGES = {
    "age": [0, 120],
    "bmi": [10, 60],
    "systolic_bp": [60, 220],
    "insulin": [0, 60],
    "cholesterol": [80, 320],
}
#: Rows of site-1 given a level of 'smoker' no other row has.
RARE_ROWS = [3, 50, 120, 200]


def payload_forest(payload: dict, part: str = "forest") -> PooledForest:
    return PooledForest.from_payload(payload[part], sender="test")


def numeric_thresholds(forest: PooledForest) -> np.ndarray:
    numeric = np.append(~forest.is_categorical, False)
    split = (forest.feature >= 0) & numeric[forest.feature] & np.isfinite(forest.threshold)
    return forest.threshold[split]


@pytest.fixture(scope="module")
def policy_job(tmp_path_factory) -> Job:
    """site-1: a strict policy of its own, a looser one from the job; site-2: the job
    tightens the hospital's policy; site-3: DP mode."""
    folder = tmp_path_factory.mktemp("privacy_job")
    config, runners = make_job(
        folder,
        evaluation={"calibration": "none"},  # privacy, not calibration, is tested here
        site_changes={
            "site-1": {"privacy": {"min_leaf_rows": 5}},
            "site-2": {
                "privacy": {
                    "min_leaf_rows": 15,
                    "share": {"surrogates": False, "feature_std": False},
                }
            },
            "site-3": {"privacy": {"dp_epsilon": 8.0, "feature_ranges": SITE3_RANGES}},
        },
        local={
            "site-1": {
                "privacy": {
                    "min_leaf_rows": 20,
                    "threshold_grid": {"step": 0.5},
                    "min_level_rows": 30,
                }
            },
            "site-2": {"privacy": {"min_leaf_rows": 5}},
        },
    )
    data = folder / "data" / "site-1.csv"
    frame = pd.read_csv(data)
    frame.loc[RARE_ROWS, "smoker"] = "occasional"  # 4 rows: a level that could identify them
    frame.to_csv(data, index=False)
    return run_job(config, runners, folder / "run")


def test_the_sites_own_policy_wins_over_a_looser_job(policy_job):
    runner = policy_job.runners["site-1"]
    policy = runner.policy
    assert policy.min_leaf_rows == 20 and policy.min_level_rows == 30  # not the job's 5
    assert policy.threshold_grid.default == ("step", 0.5)
    payload = policy_job.trained["site-1"]
    for part in ("forest", "intersection"):
        forest = payload_forest(payload, part)
        assert forest.n_node_samples.min() >= 20, part  # no node under 20 rows
        thresholds = numeric_thresholds(forest)
        assert thresholds.size and np.all(thresholds % 0.5 == 0), part  # all on the grid
        assert check_forest(forest, policy) == [], part


def test_rare_levels_never_leave_the_site(policy_job):
    raw = pd.read_csv(policy_job.runners["site-1"].config.data_path)
    assert (raw["smoker"] == "occasional").sum() == len(RARE_ROWS)
    levels = policy_job.describe["site-1"]["levels"]
    assert "occasional" not in levels["smoker"] and OTHER_LEVEL in levels["smoker"]
    assert disclosed_rare_levels(levels, raw, 30) == {}
    assert policy_job.runners["site-1"].hidden == {"smoker": ["occasional"]}
    assert "occasional" not in str(policy_job.schema) and "occasional" not in str(
        policy_job.trained["site-1"]
    )
    # its own validation and test rows are rewritten the same way
    runner = policy_job.runners["site-1"]
    other = GlobalSchema.from_payload(policy_job.schema).categories["smoker"].index(OTHER_LEVEL)
    for X in (runner.X_train, runner.X_val, runner.X_test):
        rare = X.index.intersection(RARE_ROWS)
        assert np.all(X.loc[rare, "smoker"] == other)
    assert sum(len(X.index.intersection(RARE_ROWS)) for X in (runner.X_val, runner.X_test)) > 0
    hidden = runner.hide(raw.loc[RARE_ROWS])
    assert set(hidden["smoker"]) == {OTHER_LEVEL}


def test_a_job_can_tighten_the_policy_of_a_site(policy_job):
    policy = policy_job.runners["site-2"].policy
    assert policy.min_leaf_rows == 15  # the job's 15, not the hospital's 5
    assert not policy.share["surrogates"] and not policy.share["feature_std"]
    payload = policy_job.trained["site-2"]
    forest = payload_forest(payload)
    assert forest.n_node_samples.min() >= 15
    assert np.all(forest.surrogate_feature == -1)
    assert payload["feature_std"] == {}
    # no σ is sent, so neither are numeric imputers (the bundle would be refused without σ)
    kinds = {imp["kind"] for imp in payload["imputers"]["imputers"]}
    assert kinds <= {"categorical"}
    assert payload_forest(payload, "intersection").n_node_samples.min() >= 15


def test_a_dp_site_sends_random_trees_and_nothing_else_from_its_rows(policy_job):
    runner = policy_job.runners["site-3"]
    assert runner.policy.dp and runner.policy.dp_epsilon == 8.0
    payload = policy_job.trained["site-3"]
    assert payload["imputers"]["imputers"] == [] and payload["feature_std"] == {}
    for part in ("forest", "intersection"):
        forest = payload_forest(payload, part)
        assert forest.n_trees == 10 and forest.node_depth.max() <= 4  # DEFAULT_DP_* values
        assert np.all(forest.surrogate_feature == -1) and not forest.saw_missing.any()
        assert forest.classes.tolist() == [0, 1]
    # the vote: the 'none' selector (every column, equal scores)
    vote = policy_job.votes["site-3"]
    assert vote["mask"].all() and np.unique(vote["scores"]).size == 1
    # every mask score is the same constant
    assert policy_job.scored_masks
    for _, replies in policy_job.scored_masks:
        assert replies["site-3"] == {
            "format": "fedforest/mask-score",
            "version": 1,
            "score": 0.0,
            "n_rows": len(runner.X_val),
        }


def test_dp_structure_is_the_same_when_one_training_row_changes(policy_job):
    runner = policy_job.runners["site-3"]
    args = (
        policy_job.elected,
        policy_job.config.forest.to_dict(),
        policy_job.config.surrogates.to_dict(),
        True,
    )
    first = runner.train(*args)
    X_train, y_train = runner.X_train, runner.y_train
    try:
        runner.X_train = X_train.copy()
        row = runner.X_train.index[7]
        runner.X_train.loc[row, ["age", "bmi", "insulin"]] += [9.0, -4.0, 2.5]
        runner.y_train = np.array(y_train, copy=True)
        runner.y_train[7] = 1 - runner.y_train[7]
        second = runner.train(*args)
    finally:
        runner.X_train, runner.y_train = X_train, y_train
    for part in ("forest", "intersection"):
        a, b = payload_forest(first, part), payload_forest(second, part)
        for key in ("tree_start", "children_left", "children_right", "feature", "threshold"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=f"{part}.{key}")
        # the noise is fresh on every run (operating-system entropy, never the job seed)
        assert not np.array_equal(a.value, b.value)
    again = runner.train(*args)
    assert not np.array_equal(payload_forest(first).value, payload_forest(again).value)


def test_a_job_with_privacy_policies_completes_and_records_them(policy_job):
    results = policy_job.results
    assert results["status"] == "finished" and results["dropped_sites"] == {}
    policies = {s: policy_job.runners[s].policy.to_dict() for s in SITES}
    assert results["privacy"] == policies
    assert results["privacy"]["site-1"]["min_leaf_rows"] == 20
    assert results["privacy"]["site-2"]["share"]["feature_std"] is False
    assert results["privacy"]["site-3"]["dp_epsilon"] == 8.0
    saved = json.loads((policy_job.run_dir / "results.json").read_text())
    assert saved["privacy"] == policies
    report = (policy_job.run_dir / "report.md").read_text()
    assert "## Privacy policies" in report
    assert "- `site-1`: min_leaf_rows 20; threshold_grid {step: 0.5}; min_level_rows 30" in report
    assert "- `site-2`: min_leaf_rows 15; withholds feature_std, surrogates" in report
    assert "- `site-3`: withholds imputers, feature_std, surrogates; dp_epsilon 8" in report
    for site in SITES:
        metrics = policy_job.metrics[site]
        assert metrics["version"] == 8 and metrics["privacy"] == policies[site]
        assert metrics["validation"] == "holdout"
        for row in metrics["strategies"].values():
            assert row["auc"] is None or 0.0 <= row["auc"] <= 1.0


def test_the_default_policy_is_the_jobs_5_row_leaves_on_sampled_trees(tmp_path, job):
    """Privacy blocks that state the defaults give the same run as no block at all."""
    default = {
        "privacy": {
            "min_leaf_rows": JOB_MIN_LEAF_ROWS,
            "tree_sample_fraction": JOB_TREE_SAMPLE_FRACTION,
            "min_level_rows": 0,
            "share": {"imputers": True},
        }
    }
    config, runners = make_job(
        tmp_path,
        site_changes=dict.fromkeys(SITES, default),
        local={"site-1": {"privacy": {"threshold_grid": None}}},
    )
    again = run_job(config, runners, tmp_path / "run")
    assert all(r.policy == job_default_policy() for r in runners.values())
    for site in SITES:  # no node sent describes fewer rows; each tree saw a sample of them
        forest = payload_forest(job.trained[site])
        assert forest.n_node_samples.min() >= JOB_MIN_LEAF_ROWS
        roots = forest.n_node_samples[forest.tree_start[:-1]]
        assert roots.max() <= job_default_policy().tree_rows(len(runners[site].X_train))
    for name in ("describe", "votes", "trained", "model", "elected"):
        assert_payload_equal(getattr(job, name), getattr(again, name), name)
    for site in SITES:
        assert_payload_equal(job.metrics[site], again.metrics[site], f"metrics.{site}")
    assert again.results["privacy"] == job.results["privacy"]


def test_train_names_the_privacy_key_that_raised_the_leaf_size(fresh):
    config, runners, _, _ = fresh
    runner = SiteRunner(runners["site-1"].config)
    runner.load()
    runner.set_schema(fresh[2])
    runner.policy = dataclasses.replace(runner.policy, min_leaf_rows=len(runner.X_train))
    with pytest.raises(ValueError, match=r"privacy.min_leaf_rows \(.*site-1.yaml\)=\d+ needs"):
        runner.train(["age", "bmi"], config.forest.to_dict(), config.surrogates.to_dict(), False)


# --------------------------------------------------------------------------- privacy at start
def own_file(tmp_path: Path, content) -> Path:
    path = tmp_path / "local" / LOCAL_OVERRIDE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(content))
    return path


def hospital(tmp_path: Path, local=None, **config) -> SiteRunner:
    data = hospital_csv(tmp_path / "s.csv", [0, 1])
    cfg = {"site": "s", "data_path": str(data), "target": "outcome", **config}
    cfg["drop_columns"] = ["patient_id"]
    path = tmp_path / "site_configs" / "s.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg))
    override = own_file(tmp_path, local) if local is not None else None
    return SiteRunner(SiteConfig.load(path, override=override))


@pytest.mark.parametrize(
    ("local", "job_block", "key", "shown", "allowed"),
    [
        (
            {"threshold_grid": {"steps": {"age": 1}}},
            None,
            "privacy.threshold_grid",
            {"steps": {"age": 1.0}},
            "a rule for every numeric feature; ['bmi'] have none",
        ),
        (
            {"threshold_grid": {"step": 1, "edges": {"smoker": [0.5]}}},
            None,
            "privacy.threshold_grid",
            ["smoker"],
            "numeric features only",
        ),
        (
            {"dp_epsilon": 1.0},
            {"feature_ranges": {"age": [0, 120]}},
            "privacy.feature_ranges",
            {"age": [0.0, 120.0]},
            "a public [low, high] for every numeric feature in DP mode; missing: ['bmi']",
        ),
        ({"min_leaf_rows": 17}, None, "privacy.min_leaf_rows", 17, "at most 16 for site 's'"),
        (None, {"min_leaf_rows": 17}, "privacy.min_leaf_rows", 17, "at most 16 for site 's'"),
    ],
)
def test_a_policy_that_cannot_be_applied_stops_the_site_at_start(
    tmp_path, local, job_block, key, shown, allowed
):
    extra = {} if job_block is None else {"privacy": job_block}
    extra["validation"] = "holdout"  # 33 training rows, as the allowed values say
    runner = hospital(tmp_path, None if local is None else {"privacy": local}, **extra)
    with pytest.raises(ConfigError) as info:
        runner.load()
    msg = str(info.value)
    job_file = tmp_path / "site_configs" / "s.yaml"
    files = (
        f"{job_file}" if local is None else f"{tmp_path / 'local' / LOCAL_OVERRIDE} + {job_file}"
    )
    assert msg.startswith(f"{files}: key '{key}' is {shown!r}; allowed: "), msg
    assert allowed in msg, msg
    assert runner.frame is None


def test_an_invalid_value_in_the_sites_own_file_names_that_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        hospital(tmp_path, {"privacy": {"min_leaf_rows": 0}})
    own = tmp_path / "local" / LOCAL_OVERRIDE
    assert str(info.value) == (
        f"{own}: key 'privacy.min_leaf_rows' is 0; allowed: an integer in [1, 2147483647]"
    )


def test_a_policy_is_logged_when_the_site_starts(tmp_path, caplog):
    runner = hospital(tmp_path, {"privacy": {"min_leaf_rows": 7}})
    with caplog.at_level("INFO", logger="fedforest.federation.site"):
        runner.load()
    assert '"min_leaf_rows": 7' in caplog.text
    assert str(tmp_path / "local" / LOCAL_OVERRIDE) in caplog.text


def test_a_level_named_like_the_rare_group_stops_the_site_at_start(tmp_path):
    runner = hospital(tmp_path, {"privacy": {"min_level_rows": 5}})
    frame = pd.read_csv(runner.config.data_path)
    frame.loc[0, "smoker"] = OTHER_LEVEL
    frame.to_csv(runner.config.data_path, index=False)
    with pytest.raises(ConfigError) as info:
        runner.load()
    msg = str(info.value)
    assert msg.startswith(f"{runner.config.source}: data file {runner.config.data_path}: ")
    assert "already has a level '(other)'" in msg and "allowed: no level named like" in msg


@pytest.mark.parametrize("own", ["none", "prior"])
def test_a_sites_own_calibration_replaces_the_jobs(job, own):
    import dataclasses

    runner = job.runners["site-2"]
    config = runner.config
    try:
        runner.config = dataclasses.replace(config, calibration=own)
        out = runner.evaluate(copy.deepcopy(job.model), ["mp", "local", "auto"], calibration="auto")
    finally:
        runner.config = config
    assert {row["calibration"] for row in out["strategies"].values()} == {own}
    assert out["strategies"]["auto"]["chosen_calibration"] == own


def test_rows_pooling_weights_reach_the_sites_with_the_model(job):
    import dataclasses

    server = JobServer(
        dataclasses.replace(job.config, pooling_weights="rows"),
        schema=job.server.schema,
        election=job.server.election,
    )
    model = server.pool(copy.deepcopy(job.trained), want_intersection=True)
    rows = {s: int(job.trained[s]["n_rows"]) for s in SITES}
    assert model["settings"]["owner_weights"] == {s: float(n) for s, n in rows.items()}
    assert "owner_weights" not in job.model["settings"]  # equal: every tree one vote
    weighted = job.runners["site-1"].evaluate(model, ["mp"], calibration="none")
    equal = job.runners["site-1"].evaluate(copy.deepcopy(job.model), ["mp"], calibration="none")
    if len(set(rows.values())) > 1:
        assert weighted["strategies"]["mp"]["log_loss"] != equal["strategies"]["mp"]["log_loss"]


# --------------------------------------------------------------------------- out of bag
def test_without_validation_rows_the_site_fits_on_its_training_rows_out_of_bag(job, caplog):
    from fedforest.federation.evaluation import evaluate_strategies
    from fedforest.model.pooled_model import PooledModel
    from fedforest.prediction.out_of_bag import InBag

    runner = job.runners["site-1"]
    pooled = PooledModel.from_payload(copy.deepcopy(job.model))
    record, inter_record = runner.in_bag
    # the records find the site's trees in the pooled model, after the job's privacy policy
    with caplog.at_level("WARNING"):
        bag = InBag.from_records(pooled.forest, record, pooled.intersection, inter_record)
    assert "match no entry" not in caplog.text
    own = pooled.forest.owner_mask("site-1")
    assert bag.forest[own].any(axis=1).all() and not bag.forest[~own].any()
    assert bag.n_rows == len(runner.X_train)
    saved = runner.X_val, runner.y_val
    runner.X_val = runner.y_val = None
    try:
        out = runner.evaluate(copy.deepcopy(job.model), ["wmp", "auto"], calibration="sigmoid")
    finally:
        runner.X_val, runner.y_val = saved
    expected = evaluate_strategies(
        pooled,
        runner.X_test,
        runner.y_test,
        runner.schema.classes,
        ["wmp", "auto"],
        site="site-1",
        X_val=runner.X_train,
        y_val=runner.y_train,
        random_state=runner.random_state,
        calibration="sigmoid",
        outcome=runner.config.target,
        in_bag=bag,
    )
    assert out["strategies"] == expected
    holdout = runner.evaluate(copy.deepcopy(job.model), ["auto"], calibration="sigmoid")
    assert out["strategies"]["auto"]["validation"] != holdout["strategies"]["auto"]["validation"]


def test_out_of_bag_needs_the_record_of_the_sites_training(fresh):
    _, runners, _, _ = fresh
    runner = copy.copy(runners["site-2"])
    runner.X_val = runner.y_val = None
    with pytest.raises(ValueError, match="needs the in-bag record of this site's training"):
        runner._out_of_bag(None)


# --------------------------------------------------------------------------- validation modes
@pytest.fixture(scope="module")
def oob_fresh(tmp_path_factory):
    """The ``fresh`` runners of a job whose validation is ``oob`` (site-3 in DP mode)."""
    folder = tmp_path_factory.mktemp("site_oob")
    config, runners = make_job(
        folder,
        rows=120,
        n_estimators=8,
        validation="oob",
        site_changes={"site-3": {"privacy": {"dp_epsilon": 8.0, "feature_ranges": SITE3_RANGES}}},
    )
    schema = JobServer(config).build_schema({s: r.describe() for s, r in runners.items()})
    return config, runners, schema


def test_an_oob_site_trains_on_every_row_but_its_test_rows(oob_fresh, fresh, caplog):
    config, runners, schema = oob_fresh
    runner = runners["site-1"]
    with caplog.at_level("INFO", logger="fedforest.federation.site"):
        runner.set_schema(schema)
    assert runner.validation == "oob" and runner.X_val is None and runner.y_val is None
    assert (len(runner.X_train), len(runner.X_test)) == (90, 30)
    assert len(runner.y_train) == 90
    # the test rows are the holdout site's test rows; its training and validation rows train
    holdout = fresh[1]["site-1"]
    assert holdout.validation == "holdout"
    assert runner.X_test.index.equals(holdout.X_test.index)
    assert sorted(runner.X_train.index) == sorted([*holdout.X_train.index, *holdout.X_val.index])
    assert split_sizes(120, None, 0.25) == (90, 0, 30)
    (line,) = [r.getMessage() for r in caplog.records if "train," in r.getMessage()]
    assert line.startswith("site site-1: 90 train, no validation (oob: the training rows ")
    assert "the job's evaluation.validation" in line and line.endswith("30 test rows")


def test_an_oob_site_scores_a_mask_on_its_training_rows_out_of_bag(oob_fresh):
    from fedforest.election.tuning import score_mask

    config, runners, schema = oob_fresh
    runner = runners["site-1"]
    runner.set_schema(schema)
    reply = runner.score_mask(["glucose", "insulin", "bmi"], "auprc")
    assert reply["n_rows"] == len(runner.X_train) == 90
    expected = score_mask(
        runner.X_train,
        runner.y_train,
        None,
        None,
        ["glucose", "insulin", "bmi"],
        [0, 1],
        "auprc",
        random_state=config.seed,
    )
    assert reply["score"] == expected and 0.0 <= expected <= 1.0


def test_a_dp_site_holds_out_validation_rows_whatever_the_job_says(oob_fresh, caplog):
    config, runners, schema = oob_fresh
    runner = runners["site-3"]
    assert config.validation == "oob" and runner.policy.dp
    with caplog.at_level("INFO", logger="fedforest.federation.site"):
        runner.set_schema(schema)
    assert runner.validation == "holdout" and len(runner.X_val) == 24
    (why,) = [r.getMessage() for r in caplog.records if "validation holdout" in r.getMessage()]
    assert "DP mode" in why and "in place of oob (the job's evaluation.validation)" in why
    assert "no row is out of bag" in why
    # its mask scores stay the constant, counted on its validation rows
    assert runner.score_mask(["age"], "auprc")["n_rows"] == 24


def test_a_dp_site_asking_for_oob_is_refused(tmp_path):
    block = {"dp_epsilon": 8.0, "feature_ranges": {"age": [0, 120], "bmi": [10, 60]}}
    with pytest.raises(ConfigError) as info:
        hospital(tmp_path, privacy=block, validation="oob")
    msg = str(info.value)
    assert msg.startswith(f"{tmp_path / 'site_configs' / 's.yaml'}: key 'validation' is 'oob'")
    assert "allowed: holdout or null in DP mode" in msg
    runner = hospital(tmp_path, privacy=block, validation="holdout")
    assert runner.config.validation_mode() == "holdout"


def test_a_dp_policy_of_the_hospitals_own_turns_oob_into_holdout(tmp_path):
    block = {"dp_epsilon": 8.0, "feature_ranges": {"age": [0, 120], "bmi": [10, 60]}}
    runner = hospital(tmp_path, {"privacy": block}, validation="oob")
    mode, why = runner.config.validation_choice()
    assert mode == "holdout" and "DP mode" in why and "key 'validation' of" in why
    assert runner.config.held_validation_fraction == 0.2


def test_an_oob_job_evaluates_on_its_training_rows_out_of_bag(tmp_path):
    config, runners = make_job(tmp_path, rows=150, n_estimators=6, validation="oob")
    runners = {s: r.load(job=config) for s, r in runners.items()}
    job = run_job(config, runners, tmp_path / "run")
    assert set(job.metrics) == set(SITES)
