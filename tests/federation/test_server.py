"""The server side of a job (JobServer): a full in-process job, then every refusal."""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from fedforest import protocol
from fedforest.federation.config import JobConfig
from fedforest.federation.job_results import RESULTS_FORMAT, RESULTS_VERSION
from fedforest.federation.messages import MESSAGES, MaskScore, read_message
from fedforest.federation.schema import SchemaError
from fedforest.federation.server import JobServer, payload_bytes
from fedforest.model.pooled_model import PooledModel, load_model
from fedforest.privacy.policy import job_default_policy
from fedforest.vocabulary import JOB_STRATEGIES, STRATEGY_NAMES

from .test_site import SHARED, SITES, assert_plain, make_job, run_job

ALL_FEATURES = [
    "activity",
    "age",
    "bmi",
    "cholesterol",
    "glucose",
    "hba1c",
    "insulin",
    "ldl",
    "smoker",
    "systolic_bp",
]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("server_job")
    # the server's rules, not the sites' calibration, are tested here (test_site runs it)
    config, runners = make_job(folder, evaluation={"calibration": "none"})
    return run_job(config, runners, folder / "run")


def server_after_election(job) -> JobServer:
    """A new server that has joined the job's schemas and read its votes."""
    server = JobServer(copy.deepcopy(job.config))
    server.build_schema(copy.deepcopy(job.describe))
    server.read_votes(copy.deepcopy(job.votes))
    server.election = job.server.election  # the tuned election of the real run
    return server


# --------------------------------------------------------------------------- the full job
def test_schema_joins_the_three_sites(job):
    schema = job.schema
    assert_plain(schema, "schema")
    assert schema["features"] == ALL_FEATURES
    assert schema["shared"] == SHARED  # the 4 columns every demo site has
    assert "glucose" in schema["site_columns"]["site-2"]  # renamed from glucose_mg_dl
    assert "glucose_mg_dl" not in schema["features"]
    assert schema["categories"] == {
        "activity": ["high", "low", "medium"],
        "smoker": ["current", "former", "never"],
    }
    assert schema["classes"] == [0, 1]
    assert schema["site_rows"] == {s: 300 for s in SITES}
    assert job.server.site_rows == {s: 300 for s in SITES}


def test_election_was_tuned_with_the_sites_scores(job):
    server = job.server
    assert server.tuning is not None and server.election is not None
    assert job.elected == server.election.selected and job.elected
    assert set(job.elected) <= set(ALL_FEATURES)
    # every score came from the three sites' score_mask replies, row-weighted
    assert job.scored_masks
    for features, replies in job.scored_masks:
        assert features and set(features) <= set(ALL_FEATURES)
        assert set(replies) == set(SITES)
        read = {s: read_message(r, s, protocol.MASK_SCORE) for s, r in replies.items()}
        scores = [r.score for r in read.values()]
        assert min(scores) <= JobServer.weighted_score(read) <= max(scores)
    history = server.tuning.to_dict()["history"]
    assert history[0]["freedom_degree"] == job.config.election.freedom_degree
    # then the mask of every feature (election.tune_every_feature, on by default)
    assert job.config.election.tune_every_feature and job.config.election.tuning_rounds >= 2
    assert history[1]["freedom_degree"] is None
    assert history[1]["kept"] == len(server.election.features)
    assert sum(not h["reused"] for h in history) <= job.config.election.tuning_rounds
    assert server.tuning.score == max(h["score"] for h in history) or (
        max(h["score"] for h in history) - server.tuning.score <= job.config.election.tolerance
    )


def test_election_counts_only_the_sites_that_have_a_feature(job):
    el = job.server.election
    assert el.sites_with["hba1c"] == ["site-2"]
    assert el.sites_with["age"] == list(SITES)
    assert set(el.sites_with["insulin"]) == {"site-1", "site-3"}


def test_pooled_model(job):
    model = job.model
    assert_plain(model, "model")
    parts = PooledModel.from_payload(model)
    assert parts.forest.owners == list(SITES)
    assert parts.forest.n_trees == 3 * 20
    assert set(parts.forest.feature_names) <= set(job.elected)
    assert parts.intersection.feature_names == SHARED
    assert parts.intersection.owners == list(SITES)
    assert set(parts.imputers) <= set(job.elected) - set(SHARED)
    assert model["settings"] == {"depth_threshold": 2, "voting": "soft", "seed": 0}
    # the pooled std is the mean of the sites' stds
    for name, value in parts.feature_std.items():
        stds = [p["feature_std"][name] for p in job.trained.values() if name in p["feature_std"]]
        assert value == pytest.approx(np.mean(stds))
    assert job.server.dropped == {}


def test_results_json(job):
    path = job.run_dir / "results.json"
    results = json.loads(path.read_text())
    assert set(results) == {
        "format",
        "version",
        "job",
        "status",
        "error",
        "sites",
        "dropped_sites",
        "classes_missing",
        "strategies",
        "metrics",
        "test_rows",
        "test_events",
        "sample_warnings",
        "schema",
        "election",
        "tuning",
        "phase_seconds",
        "payload_bytes",
        "model",
        "privacy",
        "validation",
    }
    assert results["format"] == RESULTS_FORMAT and results["version"] == RESULTS_VERSION
    assert results["validation"] == dict.fromkeys(SITES, "holdout")
    assert results["job"] == "fedforest-demo" and results["status"] == "finished"
    assert results["error"] is None and results["dropped_sites"] == {}
    assert results["sites"] == list(SITES)
    assert results["strategies"] == list(JOB_STRATEGIES)
    assert set(results["metrics"]) == set(SITES)
    for per in results["metrics"].values():
        assert list(per) == list(JOB_STRATEGIES)
    assert results["test_rows"] == {s: 75 for s in SITES}
    assert results["schema"]["shared"] == SHARED
    assert results["election"]["selected"] == job.elected
    assert results["tuning"]["history"]
    assert results["model"]["trees"] == 60 and results["model"]["owners"] == list(SITES)
    assert results["model"]["features"] == job.model["forest"]["feature_names"]
    assert results["model"]["nodes"] == int(job.model["forest"]["tree_start"][-1])
    assert results["model"]["bytes"] == payload_bytes(job.model) > 0
    # no privacy block anywhere: every site reports the job's default policy
    default = job_default_policy().to_dict()
    assert results["privacy"] == dict.fromkeys(SITES, default)


def test_phase_timings_and_payload_sizes_recorded(job):
    results = json.loads((job.run_dir / "results.json").read_text())
    seconds = results["phase_seconds"]
    assert set(seconds) == {"schema", "election", "train", "pool", "evaluate"}
    assert all(v >= 0 for v in seconds.values()) and seconds["train"] > 0
    sizes = results["payload_bytes"]
    assert set(sizes) == set(SITES)
    for site, per_phase in sizes.items():
        assert set(per_phase) == {"schema", "election", "train"}
        assert all(isinstance(v, int) and v > 0 for v in per_phase.values())
        assert per_phase["train"] == payload_bytes(job.trained[site])
        assert per_phase["train"] > per_phase["election"]


def results_events(job, site: str) -> int:
    return json.loads((job.run_dir / "results.json").read_text())["test_events"][site]


def test_report_md(job):
    report = (job.run_dir / "report.md").read_text()
    assert report.startswith("# fedforest job `fedforest-demo`: finished")
    for heading in (
        "## Test metrics per site and strategy",
        *(f"### {s} (75 test rows, {results_events(job, s)} events)" for s in job.config.sites),
        "### Mean over sites",
        "## Feature election",
        "## Phase timings (seconds)",
        "## Payload sizes (bytes)",
    ):
        assert heading in report
    assert "## Dropped sites" not in report and "**Error:**" not in report
    name = STRATEGY_NAMES.get  # the report spells every strategy out
    for strategy in JOB_STRATEGIES:
        assert f"| {name(strategy)} |" in report or f"| {name(strategy)} →" in report
    auto = job.metrics["site-1"]["strategies"]["auto"]
    label = f"| {name('auto')} → {name(auto['chosen'])}"
    if auto["chosen_calibration"] != "none":
        label += f" + {auto['chosen_calibration']}"
    assert f"{label} (runner-up {name(auto['runner_up'])}) |" in report
    assert "| strategy | AUPRC | AUC | MCC | accuracy | Brier | log-loss | ECE |" in report
    for site in SITES:  # wmp's row names the guess weight the site fitted
        weight = job.metrics[site]["strategies"]["wmp"]["guess_weight"]
        assert f"| {name('wmp')} (guess weight {weight:g}) |" in report
    assert f"Kept {len(job.elected)} features" in report
    assert "| freedom degree | features kept | validation score |" in report


def test_saved_model_matches_the_pooled_one(job):
    parts = load_model(job.run_dir / "site-2" / "pooled_model.npz")
    np.testing.assert_array_equal(
        parts.forest.threshold, PooledModel.from_payload(job.model).forest.threshold
    )


# --------------------------------------------------------------------------- schema refusals
def test_schema_from_a_site_claiming_to_be_another(job):
    payloads = copy.deepcopy(job.describe)
    payloads["site-3"]["site"] = "site-1"
    server = JobServer(job.config)
    schema = server.build_schema(payloads)
    assert list(server.dropped) == ["site-3"]
    reason = server.dropped["site-3"]
    assert reason.startswith("schema: payload from 'site-3' refused")
    assert "it says it is site 'site-1'" in reason
    assert sorted(schema["site_columns"]) == ["site-1", "site-2"]
    assert "cholesterol" not in schema["features"]  # only site-3 had it
    assert schema["shared"] == ["age", "bmi", "glucose", "smoker", "systolic_bp"]
    assert server.alive(job.config.sites) == ["site-1", "site-2"]


def test_site_with_a_single_class_is_dropped(tmp_path, job):
    path = tmp_path / "site-3.csv"
    frame = pd.read_csv(job.runners["site-3"].config.data_path)
    frame["outcome"] = 1
    frame.to_csv(path, index=False)
    runner = type(job.runners["site-3"])(
        type(job.runners["site-3"].config)(
            **{**job.runners["site-3"].config.__dict__, "data_path": str(path)}
        )
    )
    payloads = {s: copy.deepcopy(job.describe[s]) for s in ("site-1", "site-2")}
    payloads["site-3"] = runner.describe()
    server = JobServer(job.config)
    server.build_schema(payloads)
    assert list(server.dropped) == ["site-3"]
    assert "site 'site-3' has a single class [1]" in server.dropped["site-3"]


def test_malformed_schema_payload(job):
    payloads = copy.deepcopy(job.describe)
    payloads["site-2"]["kinds"] = ["numeric"]
    server = JobServer(job.config)
    server.build_schema(payloads)
    assert list(server.dropped) == ["site-2"]
    assert "payload from 'site-2' refused" in server.dropped["site-2"]
    assert "'kinds'" in server.dropped["site-2"]


def test_contradicting_schemas_fail_naming_site_and_column(job):
    payloads = copy.deepcopy(job.describe)
    p = payloads["site-2"]
    p["kinds"][p["columns"].index("smoker")] = "numeric"
    del p["levels"]["smoker"]
    with pytest.raises(SchemaError, match="column 'smoker' is .* at site 'site-[12]'"):
        JobServer(job.config).build_schema(payloads)


def test_schema_below_min_sites(job):
    payloads = copy.deepcopy(job.describe)
    payloads["site-2"]["site"] = "site-9"
    payloads["site-3"]["classes"] = [0]
    server = JobServer(job.config)
    with pytest.raises(RuntimeError) as info:
        server.build_schema(payloads)
    msg = str(info.value)
    assert "phase schema" in msg and "min_sites=2" in msg and "only 1 site(s) left (site-1)" in msg
    assert "site-2 (schema: payload from 'site-2' refused: it says it is site 'site-9')" in msg
    assert "site-3 (schema:" in msg and "single class" in msg


# --------------------------------------------------------------------------- vote refusals
def test_vote_with_a_feature_index_out_of_range(job):
    server = JobServer(job.config)
    server.build_schema(copy.deepcopy(job.describe))
    votes = copy.deepcopy(job.votes)
    votes["site-2"]["feature_index"][0] = len(ALL_FEATURES)
    ballot = server.read_votes(votes)
    assert list(server.dropped) == ["site-2"]
    assert "payload from 'site-2' refused" in server.dropped["site-2"]
    assert "'feature_index' has indices outside [0, 10)" in server.dropped["site-2"]
    assert ballot.sites == ["site-1", "site-3"]
    assert server.elect(ballot, None)  # the others still elect


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda v: v.__setitem__("site", "site-1"), "it says it is site 'site-1'"),
        (
            lambda v: v["feature_index"].__setitem__(0, ALL_FEATURES.index("ldl")),
            "it votes on columns it does not have: ['ldl']",
        ),
        (
            lambda v: v["scores"].__setitem__(0, np.nan),
            "field 'scores' is an array of dtype float64 and shape (7,); expected finite values only",
        ),
        (
            lambda v: v.__setitem__("mask", v["mask"][:2]),
            "field 'mask' is an array of dtype bool and shape (2,); expected an array of length 7",
        ),
        (lambda v: v.__setitem__("mask", v["mask"].astype(object)), "dtype object"),
        (lambda v: v.__setitem__("n_rows", 0), "'n_rows' is 0"),
    ],
    ids=["other-site", "foreign-column", "nan-score", "short-mask", "object-mask", "no-rows"],
)
def test_malformed_votes_drop_the_site(job, tamper, reason):
    server = JobServer(job.config)
    server.build_schema(copy.deepcopy(job.describe))
    votes = copy.deepcopy(job.votes)
    tamper(votes["site-3"])
    ballot = server.read_votes(votes)
    assert list(server.dropped) == ["site-3"]
    assert server.dropped["site-3"].startswith("election: payload from 'site-3' refused")
    assert reason in server.dropped["site-3"]
    assert ballot.sites == ["site-1", "site-2"]


def test_votes_below_min_sites(job):
    server = JobServer(job.config)
    server.build_schema(copy.deepcopy(job.describe))
    votes = copy.deepcopy(job.votes)
    votes["site-1"]["site"] = "site-2"
    votes["site-2"]["mask"] = votes["site-2"]["mask"].astype(int)
    with pytest.raises(RuntimeError, match="phase election: only 1 site.*min_sites=2") as info:
        server.read_votes(votes)
    assert "site-1 (election:" in str(info.value) and "site-2 (election:" in str(info.value)


def test_elect_without_tuning_counts_at_the_configured_freedom_degree(job):
    for fd, expected in ((0.0, "intersection"), (1.0, "union")):
        config = copy.deepcopy(job.config)
        config.election = dataclasses.replace(config.election, auto_tune=False, freedom_degree=fd)
        server = JobServer(config)
        server.build_schema(copy.deepcopy(job.describe))
        selected = server.elect(server.read_votes(copy.deepcopy(job.votes)), None)
        assert server.tuning is None
        assert selected == getattr(server.election, expected)


# --------------------------------------------------------------------------- train refusals
def bad_tree(p, site):
    bits = p["forest"]["leaf_bits"] = p["forest"]["leaf_bits"].copy()
    bits[0] |= 0x80  # the root becomes a leaf: tree 0 closes at its first node


def wrong_owner(p, site):
    p["forest"]["owners"] = ["site-1"]


def other_levels(p, site):
    p["intersection"]["categories"]["smoker"] = ["a", "b", "c"]


def string_classes(p, site):
    p["forest"]["classes"] = ["0", "1"]


def foreign_imputer(p, site):
    p["imputers"]["imputers"][0]["owner"] = "site-1"


def negative_std(p, site):
    p["feature_std"][next(iter(p["feature_std"]))] = -1.0


def nan_threshold(p, site):
    p["forest"]["threshold"] = p["forest"]["threshold"].copy()
    p["forest"]["threshold"][0] = np.nan


def object_array(p, site):
    p["forest"]["value"] = p["forest"]["value"].astype(object)


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (bad_tree, "field 'leaf_bits' does not describe tree 0 (nodes 0 to"),
        (wrong_owner, "its trees claim owners ['site-1']"),
        (other_levels, "its trees give feature 'smoker' the levels ['a', 'b', 'c']"),
        (string_classes, "its trees have classes ['0', '1'], but the schema has [0, 1]"),
        (foreign_imputer, "owner 'site-1') does not match the elected features and the schema"),
        (negative_std, "field 'feature_std' must map feature names to numbers in [0, "),
        (nan_threshold, "field 'threshold' holds NaN or -inf"),
        (object_array, "field 'value' is an array of dtype object"),
    ],
    ids=lambda x: getattr(x, "__name__", None),
)
def test_bad_training_payload_drops_the_site_and_pools_the_others(job, tamper, reason):
    server = server_after_election(job)
    payloads = copy.deepcopy(job.trained)
    tamper(payloads["site-3"], "site-3")
    model = server.pool(payloads, want_intersection=True)
    assert list(server.dropped) == ["site-3"]
    assert server.dropped["site-3"].startswith("train: payload from 'site-3' refused")
    assert reason in server.dropped["site-3"]
    parts = PooledModel.from_payload(model)
    assert parts.forest.owners == ["site-1", "site-2"]
    assert parts.forest.n_trees == 40
    assert parts.intersection.owners == ["site-1", "site-2"]
    assert all(imp.owner in ("site-1", "site-2") for imp in parts.imputers.values())


def test_training_payload_with_features_that_were_not_elected(job):
    server = server_after_election(job)
    runner = job.runners["site-2"]
    everything = runner.columns  # site-2 trains on all its columns, ignoring the election
    assert set(everything) - set(job.elected)
    payloads = copy.deepcopy(job.trained)
    payloads["site-2"] = runner.train(
        everything, job.config.forest.to_dict(), job.config.surrogates.to_dict(), True
    )
    model = server.pool(payloads, want_intersection=True)
    assert list(server.dropped) == ["site-2"]
    reason = server.dropped["site-2"]
    assert "payload from 'site-2' refused: its trees use features that were not elected" in reason
    assert str(sorted(set(everything) - set(job.elected))) in reason
    assert PooledModel.from_payload(model).forest.owners == ["site-1", "site-3"]


def test_pool_without_an_election_takes_every_feature(job):
    """Election disabled: sites train on all their columns, categorical imputers included."""
    server = JobServer(job.config)
    server.build_schema(copy.deepcopy(job.describe))
    payloads = {
        site: runner.train(
            runner.columns,
            job.config.forest.to_dict(),
            job.config.surrogates.to_dict(),
            intersection=False,
        )
        for site, runner in job.runners.items()
    }
    model = server.pool(payloads, want_intersection=False)
    assert server.dropped == {}
    parts = PooledModel.from_payload(model)
    assert sorted(parts.forest.feature_names) == ALL_FEATURES
    assert parts.forest.categories == job.schema["categories"]
    activity = parts.imputers["activity"]
    assert activity.kind == "categorical" and activity.n_levels == 3
    assert activity.owner in ("site-2", "site-3")
    assert set(parts.imputers) == set(ALL_FEATURES) - set(SHARED)


def test_training_payload_that_is_not_a_dict(job):
    server = server_after_election(job)
    payloads = copy.deepcopy(job.trained)
    payloads["site-1"] = [payloads["site-1"]]
    server.pool(payloads, want_intersection=False)
    assert server.dropped == {
        "site-1": "train: payload from 'site-1' refused: expected a dict for "
        "fedforest/site-models, got list"
    }


def test_pool_without_intersection(job):
    server = server_after_election(job)
    model = server.pool(copy.deepcopy(job.trained), want_intersection=False)
    assert model["intersection"] is None and server.dropped == {}


def test_training_below_min_sites(job):
    server = server_after_election(job)
    payloads = copy.deepcopy(job.trained)
    bad_tree(payloads["site-1"], "site-1")
    wrong_owner(payloads["site-2"], "site-2")
    with pytest.raises(RuntimeError) as info:
        server.pool(payloads, want_intersection=True)
    msg = str(info.value)
    assert "phase train: only 1 site(s) left (site-3), fewer than min_sites=2" in msg
    assert "site-1 (train: payload from 'site-1' refused: forest: field 'leaf_bits'" in msg
    assert "site-2 (train: payload from 'site-2' refused: its trees claim owners" in msg


def test_min_sites_counts_sites_dropped_earlier(job):
    config = JobConfig.from_dict(
        {"job": {"sites": list(SITES), "min_sites": 3}, "election": {"auto_tune": False}}
    )
    server = JobServer(config)
    payloads = copy.deepcopy(job.describe)
    payloads["site-1"]["site"] = "site-2"
    with pytest.raises(RuntimeError, match="min_sites=3. Dropped: site-1 \\(schema:"):
        server.build_schema(payloads)


# --------------------------------------------------------------------------- scores, sizes, report
def test_weighted_score():
    scores = {"b": MaskScore(1.0, 30), "a": MaskScore(0.5, 10)}
    assert JobServer.weighted_score(scores) == pytest.approx(0.875)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"score": math.nan}, "field 'score' is nan; expected a finite number"),
        ({"score": math.inf}, "field 'score' is inf; expected a finite number"),
        ({"score": "0.5"}, "field 'score' is '0.5'; expected a finite number"),
        ({"score": None}, "field 'score' is None; expected a finite number"),
        ({"n_rows": 0}, "field 'n_rows' is 0; expected an integer in [1, "),
        ({"n_rows": 2.5}, "field 'n_rows' is 2.5; expected an integer in [1, "),
        ({"trees": [1]}, "unknown fields ['trees']; expected only ['n_rows', 'score']"),
    ],
)
def test_a_bad_mask_score_drops_its_site_naming_the_field(change, match):
    config = JobConfig.from_dict({"job": {"sites": ["site-1", "site-2"], "min_sites": 1}})
    server = JobServer(config)
    replies = {"site-1": MaskScore(0.7, 20).to_payload(), "site-2": MaskScore(0.5, 10).to_payload()}
    replies["site-2"].update(change)
    assert server.score_replies(replies) == pytest.approx(0.7)  # site-1's score alone
    assert list(server.dropped) == ["site-2"]
    reason = server.dropped["site-2"]
    assert reason.startswith("election: payload from 'site-2' refused: ") and match in reason


def test_weighted_score_needs_a_reply():
    with pytest.raises(RuntimeError, match="no site scored"):
        JobServer.weighted_score({})


def test_payload_bytes():
    assert payload_bytes(np.zeros(10)) == 80
    assert payload_bytes({"ab": np.zeros(2, np.int32), "c": [1, "xyz"]}) == 2 + 8 + 1 + 1 + 3


def test_failed_job_report_names_the_error_and_dropped_sites(job, tmp_path):
    server = server_after_election(job)
    payloads = copy.deepcopy(job.trained)
    bad_tree(payloads["site-3"], "site-3")
    model = server.pool(payloads, want_intersection=True)
    metrics = {s: job.metrics[s] for s in ("site-1", "site-2")}
    results = server.write_results(tmp_path, metrics, model, status="failed", error="boom")
    assert results["status"] == "failed" and results["error"] == "boom"
    assert list(results["dropped_sites"]) == ["site-3"]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["dropped_sites"] == results["dropped_sites"]
    assert saved["model"]["owners"] == ["site-1", "site-2"]
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# fedforest job `fedforest-demo`: failed")
    assert "**Error:** boom" in report
    assert "## Dropped sites" in report and "- `site-3`: train: payload from 'site-3'" in report
    assert "### site-3" not in report


def test_results_before_any_phase(tmp_path, job):
    server = JobServer(job.config)
    results = server.write_results(tmp_path, {}, None, status="failed", error="no sites")
    assert results["schema"] is None and results["election"] is None and "model" not in results
    report = (tmp_path / "report.md").read_text()
    assert "**Error:** no sites" in report and "## Test metrics" not in report


def mask_score(score, n_rows):
    return {"format": "fedforest/mask-score", "version": 1, "score": score, "n_rows": n_rows}


def test_score_replies_drops_a_site_with_a_bad_score():
    from fedforest.federation.config import JobConfig
    from fedforest.federation.server import JobServer

    config = JobConfig.from_dict({"job": {"sites": ["a", "b", "c"], "min_sites": 2}})
    server = JobServer(config)
    value = server.score_replies(
        {
            "a": mask_score(0.8, 10),
            "b": mask_score(float("nan"), 10),
            "c": mask_score(0.6, 30),
        }
    )
    assert value == pytest.approx((0.8 * 10 + 0.6 * 30) / 40)
    assert list(server.dropped) == ["b"] and "finite" in server.dropped["b"]
    with pytest.raises(RuntimeError, match="min_sites"):
        server.score_replies({"a": {"score": True, "n_rows": 10}, "c": {"score": 0.5, "n_rows": 3}})


def test_pooling_does_not_depend_on_the_order_replies_arrive(job):
    forward = server_after_election(job).pool(copy.deepcopy(job.trained), want_intersection=True)
    backward_payloads = dict(reversed(list(copy.deepcopy(job.trained).items())))
    backward = server_after_election(job).pool(backward_payloads, want_intersection=True)
    a, b = PooledModel.from_payload(forward), PooledModel.from_payload(backward)
    assert a.forest.owners == b.forest.owners == sorted(SITES)
    assert np.array_equal(a.forest.feature, b.forest.feature)
    assert np.array_equal(a.forest.threshold, b.forest.threshold)
    assert a.feature_std == b.feature_std


# --------------------------------------------------------------------------- any failure: one site
def test_an_unexpected_error_with_one_payload_drops_only_that_site(job, monkeypatch):
    """A payload that passes validation yet breaks the code using it costs only its sender."""
    schema = MESSAGES[protocol.SITE_SCHEMA]

    def breaks_on_site_2(payload, sender=None):
        if sender == "site-2":
            raise TypeError("unsupported operand")
        return schema.reader(payload, sender)

    broken = dataclasses.replace(schema, reader=breaks_on_site_2)
    monkeypatch.setitem(MESSAGES, protocol.SITE_SCHEMA, broken)
    server = JobServer(copy.deepcopy(job.config))
    server.build_schema(copy.deepcopy(job.describe))
    assert list(server.dropped) == ["site-2"]
    assert server.dropped["site-2"] == (
        "schema: its payload could not be used (TypeError: unsupported operand)"
    )
    assert server.schema.sites == ["site-1", "site-3"]


def test_a_model_that_breaks_pooling_is_found_and_its_site_dropped(job, monkeypatch):
    from fedforest.federation import server as server_module

    real = server_module.pool_site_models

    def fails_with_site_3(models):
        if any(m.forest.owners == ["site-3"] for m in models):
            raise ValueError("forests disagree about feature 'x'")
        return real(models)

    monkeypatch.setattr(server_module, "pool_site_models", fails_with_site_3)
    server = server_after_election(job)
    model = server.pool(copy.deepcopy(job.trained), want_intersection=True)
    assert server.dropped == {
        "site-3": "train: its payload could not be used (ValueError: forests disagree about "
        "feature 'x')"
    }
    assert PooledModel.from_payload(model).forest.owners == ["site-1", "site-2"]


def test_sites_lacking_a_class_are_named_in_the_results(job, tmp_path):
    describe = copy.deepcopy(job.describe)
    describe["site-1"]["classes"] = [0, 1, 2]  # site-1 alone has a third class
    server = JobServer(copy.deepcopy(job.config))
    server.build_schema(describe)
    assert server.classes_missing == {"site-2": [2], "site-3": [2]}
    results = server.write_results(tmp_path, {}, None)
    assert results["classes_missing"] == {"site-2": [2], "site-3": [2]}
    assert "## Classes a site has no row of" in (tmp_path / "report.md").read_text()


def _metrics(job, site="site-1"):
    return copy.deepcopy(job.metrics[site])


def _interval(m: dict, metric: str, interval) -> None:
    """Replace the ``mp`` row's interval of ``metric`` (its point kept)."""
    m["strategies"]["mp"]["intervals"][metric] = interval


def _shift_events(m: dict, strategy: str) -> None:
    row = m["strategies"][strategy]
    row["events"] = row["events"] - 1 if row["events"] else 1


def test_a_site_reports_its_events_and_bootstrap_intervals_and_they_pass(job):
    server = server_after_election(job)
    metrics = server.read_metrics({s: _metrics(job, s) for s in job.config.sites})
    assert server.dropped == {}
    for site, read in metrics.items():
        events = {row["events"] for row in read["strategies"].values()}
        assert len(events) == 1 and 0 < events.pop() < read["rows"]
        mp = read["strategies"]["mp"]
        assert set(mp["intervals"]) == {"auc", "auprc", "brier"} & set(job.config.metrics)
        for metric, (lo, hi) in mp["intervals"].items():
            assert lo <= mp[metric] <= hi and hi - lo > 0, (site, metric)
        assert mp["bins"]["outcome"] == job.runners[site].config.target


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda m: m["strategies"].pop("mp"), "field 'strategies' has"),
        (lambda m: m["strategies"].update(extra={}), "field 'strategies' has"),
        (lambda m: m["strategies"]["mp"].update(auprc=1.5), "'auprc' is 1.5"),
        (lambda m: m["strategies"]["mp"].update(auprc=float("nan")), "'auprc' is nan"),
        (lambda m: m["strategies"]["mp"].update(auprc="0.9"), "'auprc' is '0.9'"),
        (lambda m: m["strategies"]["mp"].update(rows=-1), "'rows' is -1"),
        (lambda m: m["strategies"]["auto"].update(chosen="magic"), "'chosen' is 'magic'"),
        (lambda m: m["strategies"]["mp"].update(chosen="mp"), "belong to the 'auto' row"),
        (lambda m: m["strategies"]["mp"].update(note="hi"), "unknown fields ['note']"),
        (lambda m: m["strategies"]["wmp"].pop("guess_weight"), "'guess_weight' is missing"),
        (lambda m: m["strategies"]["wmp"].update(guess_weight=1.5), "'guess_weight' is 1.5"),
        (lambda m: m["strategies"]["wmp"].update(guess_weight="x"), "'guess_weight' is 'x'"),
        (
            lambda m: m["strategies"]["mp"].update(guess_weight=0.5),
            "'guess_weight' belongs to the wmp row only",
        ),
        (lambda m: m.update(site="site-2"), "field 'site' is 'site-2'"),
        (lambda m: m.update(rows=np.array([1, 2])), "field 'rows' is an array"),
        (lambda m: m["strategies"].update(mp=[0.9]), "strategies['mp']: expected a dict"),
        (lambda m: m.pop("privacy"), "field 'privacy' is missing"),
        (lambda m: m.update(privacy=[1]), "field 'privacy' is [1]; expected a privacy policy"),
        (
            lambda m: m["privacy"].update(min_leaf_rows=0),
            "field 'privacy' is not a privacy policy: the reply of 'site-1': key "
            "'privacy.min_leaf_rows' is 0",
        ),
        (lambda m: m["privacy"].update(k=3), "key 'privacy.k' is 3"),
        # the counts: every row scored the reply's test rows, with the same events
        (lambda m: m["strategies"]["mp"].update(rows=m["rows"] + 1), "the reply's 'rows' is"),
        (lambda m: m["strategies"]["mp"].update(events=m["rows"] + 1), "'events' is"),
        (lambda m: m["strategies"]["mp"].update(events=-2), "'events' is -2"),
        (lambda m: m["strategies"]["mp"].update(events=2.5), "'events' is 2.5"),
        (lambda m: _shift_events(m, "auto"), "(one site, one set of test rows)"),
        # the bootstrap intervals: [low, high], finite, in range, holding the point
        (lambda m: _interval(m, "auc", [0.1, 0.2]), "'intervals.auc': expected [low, high] with"),
        (lambda m: _interval(m, "auprc", [0.0, 1.5]), "'intervals.auprc': expected low <= high"),
        (lambda m: _interval(m, "brier", [-0.1, 0.5]), "'intervals.brier': expected low <= high"),
        (lambda m: _interval(m, "auc", [float("nan"), 1.0]), "two finite numbers"),
        (lambda m: _interval(m, "auc", [0.0, float("inf")]), "two finite numbers"),
        (lambda m: _interval(m, "auc", [0.5]), "two finite numbers"),
        (lambda m: _interval(m, "auc", {"lo": 0}), "two finite numbers"),
        (lambda m: _interval(m, "mcc", [0.0, 1.0]), "field 'intervals' names 'mcc'"),
        (lambda m: m["strategies"]["mp"].update(intervals=[0.1]), "field 'intervals' is"),
    ],
)
def test_malformed_metrics_drop_the_site(job, change, reason):
    server = server_after_election(job)
    bad = _metrics(job)
    change(bad)
    good = {s: _metrics(job, s) for s in ("site-2", "site-3")}
    metrics = server.read_metrics({"site-1": bad, **good})
    assert sorted(metrics) == ["site-2", "site-3"]
    assert server.dropped["site-1"].startswith("evaluate: payload from 'site-1' refused")
    assert reason in server.dropped["site-1"], server.dropped["site-1"]
