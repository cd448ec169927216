"""results.json as a typed JobResults: the layouts, the version, the older unversioned form."""

from __future__ import annotations

import copy
import json

import pytest

from fedforest.federation.job_results import (
    BRIEF_FIELDS,
    RESULTS_FORMAT,
    RESULTS_VERSION,
    SERVER_FIELDS,
    SWARM_FIELDS,
    JobResults,
    ModelSummary,
    SwarmSummary,
    as_results,
)
from fedforest.federation.results import render_report
from fedforest.privacy.policy import PrivacyPolicy

#: A site's policy as its metrics reply reports it (``PrivacyPolicy.to_dict``).
POLICY = PrivacyPolicy(min_leaf_rows=5)
ROW = {"auprc": 0.81, "auc": 0.84, "mcc": 0.4, "accuracy": 0.7, "rows": 75}
ROW.update(mean_trees_kept=60.0, fallback_rows=0)
#: A row as the current site-metrics reader gives it (results of the current version).
CURRENT_ROW = {k: ROW[k] for k in ("auprc", "auc", "mcc", "accuracy", "rows")}
CURRENT_ROW.update(events=None, intervals=None, mean_trees_kept=60.0, fallback_rows=0)
CURRENT_ROW.update(calibration="none", calibration_skipped=None, bins=None)

#: A server-mode results.json as fedforest wrote it before the file had a version.
SERVER_UNVERSIONED = {
    "job": "fedforest-demo",
    "status": "finished",
    "error": None,
    "sites": ["site-1", "site-2"],
    "dropped_sites": {},
    "classes_missing": {"site-2": [2]},
    "strategies": ["mp", "auto"],
    "metrics": {
        "site-1": {"mp": ROW, "auto": {**ROW, "chosen": "mp", "validation": {"mp": 0.8}}},
        "site-2": {"mp": ROW, "auto": {**ROW, "chosen": "mp", "validation": {"mp": 0.7}}},
    },
    "test_rows": {"site-1": 75, "site-2": 75},
    "schema": {
        "format": "fedforest/global-schema",
        "version": 1,
        "features": ["age"],
        "categories": {},
        "classes": [0, 1],
        "shared": ["age"],
        "site_columns": {"site-1": ["age"], "site-2": ["age"]},
        "site_rows": {"site-1": 300, "site-2": 300},
    },
    "election": {
        "selected": ["age"],
        "stats": {"intersection": 1, "union": 1, "disputed": 0, "kept": 1},
        "freedom_degree": 0.5,
    },
    "tuning": {
        "freedom_degree": 0.5,
        "score": 0.8,
        "kept": 1,
        "history": [{"freedom_degree": 0.5, "kept": 1, "score": 0.8, "reused": False}],
    },
    "phase_seconds": {"schema": 1.5, "vote": 0.2, "train": 3.0},
    "payload_bytes": {"site-1": {"schema": 120, "train": 4000}},
    "privacy": {"site-1": None, "site-2": json.loads(json.dumps(POLICY.to_dict()))},
    "model": {"trees": 12, "nodes": 300, "features": ["age"], "owners": ["site-1"], "bytes": 99},
}

#: A swarm job's results.json (the server's) as fedforest wrote it before the version.
SWARM_UNVERSIONED = {
    "job": "fedforest-demo",
    "mode": "swarm",
    "status": "failed",
    "error": "phase train: only 1 site(s) left",
    "sites": ["site-1", "site-2"],
    "site_states": {"site-1": "finished", "site-2": "failed"},
    "site_errors": {"site-2": "OSError: disk full"},
    "dropped_sites": {"site-2": "train: it failed: OSError: disk full"},
    "classes_missing": {},
    "strategies": ["mp"],
    "metrics": {"site-1": {"mp": ROW}},
    "test_rows": {"site-1": 75},
    "metrics_withheld": [],
    "model_digest": "a" * 64,
    "model_digests": {},
    "phase_seconds": {"site-1": {"schema": 0.5, "train": 1.0}},
    "privacy": {"site-1": None},
    "peer_messages_encrypted": {"site-1": False, "site-2": None},
}

#: The brief results.json written when even the partial results failed.
BRIEF_UNVERSIONED = {"job": "t", "status": "failed", "error": "boom", "dropped_sites": {}}


def versioned(data: dict) -> dict:
    """``data`` as the current version writes it: its metric rows as a current site-metrics
    reader gives them (every field, null where the older rows had none)."""
    data = copy.deepcopy(data)
    for per in (data.get("metrics") or {}).values():
        for strategy, row in per.items():
            for key in ("events", "intervals", "calibration_skipped", "bins"):
                row.setdefault(key, None)
            row.setdefault("calibration", "none")
            if strategy == "auto":
                row.setdefault("chosen_calibration", "none")
                row.setdefault("runner_up", None)
    return {"format": RESULTS_FORMAT, "version": RESULTS_VERSION, **data}


@pytest.mark.parametrize("old", [SERVER_UNVERSIONED, SWARM_UNVERSIONED], ids=["server", "swarm"])
def test_the_unversioned_form_is_read_and_written_back_with_a_version(old):
    results = JobResults.from_dict(copy.deepcopy(old))
    again = results.to_dict()
    added = ("test_events", "sample_warnings")  # version 4: derived from the rows
    # written back in the current layout: the rows as the current reader gives them
    assert {k: v for k, v in again.items() if k not in (*added, "validation")} == versioned(old)
    assert again["test_events"] == dict.fromkeys(old["test_rows"])  # no events counted then
    assert again["sample_warnings"] == {}  # 75 test rows each, events unknown
    # version 6: each site's validation mode; before it every site held out
    assert again["validation"] == dict.fromkeys(old["metrics"], "holdout")
    fields = list(old)
    fields[fields.index("test_rows") + 1 : fields.index("test_rows") + 1] = added
    fields.insert(fields.index("privacy") + 1, "validation")
    assert list(again) == ["format", "version", *fields]  # the same fields in the same order
    assert JobResults.from_dict(json.loads(json.dumps(again))) == results


def test_the_server_layout():
    results = JobResults.from_dict(SERVER_UNVERSIONED)
    assert results.mode == "server" and results.finished and results.swarm is None
    assert results.model == ModelSummary(12, 300, ["age"], ["site-1"], 99)
    assert tuple(results.to_dict())[2:] == SERVER_FIELDS
    without_model = JobResults.from_dict({**SERVER_UNVERSIONED, "model": None}).to_dict()
    assert "model" not in without_model  # a job that pooled nothing has no model block


def test_the_swarm_layout():
    results = JobResults.from_dict(SWARM_UNVERSIONED)
    assert results.mode == "swarm" and not results.finished
    assert results.swarm == SwarmSummary(
        site_states={"site-1": "finished", "site-2": "failed"},
        site_errors={"site-2": "OSError: disk full"},
        metrics_withheld=[],
        model_digest="a" * 64,
        model_digests={},
        peer_messages_encrypted={"site-1": False, "site-2": None},
    )
    assert tuple(results.to_dict())[2:] == SWARM_FIELDS
    assert results.schema is None and results.model is None and results.payload_bytes == {}


def test_the_brief_form():
    results = JobResults.from_dict(BRIEF_UNVERSIONED)
    assert (results.job, results.status, results.error) == ("t", "failed", "boom")
    assert results.brief_dict() == versioned(BRIEF_UNVERSIONED)
    assert tuple(results.brief_dict())[2:] == BRIEF_FIELDS
    assert JobResults.from_dict(results.brief_dict()).brief_dict() == results.brief_dict()


def test_as_results_takes_either():
    results = JobResults(job="j")
    assert as_results(results) is results
    assert as_results(results.to_dict()) == results


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(version=RESULTS_VERSION + 1), f"version {RESULTS_VERSION + 1} is not"),
        (lambda d: d.update(version=0), "field 'version' is 0"),
        (lambda d: d.update(version=True), "field 'version' is True"),
        (lambda d: d.update(format="fedforest/model"), "field 'format' is 'fedforest/model'"),
        (lambda d: d.pop("format"), "field 'format' is None"),
        (lambda d: d.update(extra=1), "unknown fields ['extra']"),
        (lambda d: d.update(job=None), "field 'job' is None"),
        (lambda d: d.update(mode="cloud"), "field 'mode' is 'cloud'"),
        (lambda d: d["model"].pop("trees"), "field 'model' has no 'trees'"),
        (lambda d: d.update(model=[1]), "field 'model' is [1]; allowed: a dict"),
    ],
)
def test_what_the_reader_refuses_names_the_file_and_field(change, message):
    data = versioned(copy.deepcopy(SERVER_UNVERSIONED))
    change(data)
    with pytest.raises(ValueError, match="^run/results.json") as err:
        JobResults.from_dict(data, source="run/results.json")
    assert message in str(err.value)
    if "not supported" in message:
        assert RESULTS_FORMAT in str(err.value) and "upgrade fedforest" in str(err.value)


def test_a_results_file_that_is_not_a_dict():
    with pytest.raises(ValueError, match="expected a dict, got list"):
        JobResults.from_dict([1, 2])


def test_the_models_of_their_own_the_sites_were_sent_round_trip():
    data = versioned(SERVER_UNVERSIONED)
    sizes = {"site-1": {"trees": 5, "bytes": 40}, "site-2": {"trees": 6, "bytes": 44}}
    data["model"] = {**data["model"], "site_models": sizes}
    results = JobResults.from_dict(data)
    assert results.model.site_models == sizes
    assert results.to_dict()["model"]["site_models"] == sizes
    # a version 2 file (no site_models): every site was sent the pooled model
    head = {"format": RESULTS_FORMAT, "version": 2}
    older = JobResults.from_dict({**head, **SERVER_UNVERSIONED})
    assert older.model.site_models == {} and "site_models" not in older.to_dict()["model"]


@pytest.mark.parametrize(
    "bad",
    [
        [1, 2],
        {"site-1": 5},
        {"site-1": {"trees": 5}},
        {"site-1": {"trees": -1, "bytes": 3}},
        {"site-1": {"trees": 2.5, "bytes": 3}},
        {"site-1": {"trees": True, "bytes": 3}},
        {"site-1": {"trees": 5, "bytes": 3, "extra": 1}},
    ],
)
def test_malformed_site_models_are_refused_naming_the_field(bad):
    data = versioned(SERVER_UNVERSIONED)
    data["model"] = {**data["model"], "site_models": bad}
    with pytest.raises(ValueError, match=r"model\.site_models"):
        JobResults.from_dict(data)


# --------------------------------------------------------------------------- version 4
def version_4() -> dict:
    """A version 4 server results.json: rows with events and intervals, site-2 warned."""
    data = versioned(json.loads(json.dumps(SERVER_UNVERSIONED)))  # rows no longer shared
    data["test_rows"] = {"site-1": 75, "site-2": 30}
    for site, events in (("site-1", 20), ("site-2", 6)):
        for row in data["metrics"][site].values():
            row.update(rows=data["test_rows"][site], events=events)
            row["intervals"] = {"auc": [0.7, 0.9], "auprc": [0.66, 0.93]}
    results = JobResults.from_dict(data)
    return json.loads(json.dumps(results.to_dict()))


def test_version_4_counts_warns_and_round_trips():
    data = version_4()
    assert data["version"] == RESULTS_VERSION == 9
    assert data["test_events"] == {"site-1": 20, "site-2": 6}
    assert list(data["sample_warnings"]) == ["site-2"]  # 30 rows and 6 events
    assert (
        "30 test rows (fewer than 50) and 6 events (fewer than 10)"
        in (data["sample_warnings"]["site-2"])
    )
    results = JobResults.from_dict(data)
    assert results.to_dict() == data
    assert results.metrics["site-1"]["mp"]["intervals"]["auc"] == [0.7, 0.9]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_older_version_reads_with_no_events_and_no_intervals(version):
    head = {"format": RESULTS_FORMAT, "version": version}
    data = {**head, **copy.deepcopy(SERVER_UNVERSIONED)}
    results = JobResults.from_dict(data)
    assert results.test_events == {"site-1": None, "site-2": None}
    assert results.sample_warnings == {}  # 75 test rows: enough, events unknown
    small = {**data, "test_rows": {"site-1": 75, "site-2": 20}}
    small["metrics"] = json.loads(json.dumps(data["metrics"]))  # rows no longer shared
    for row in small["metrics"]["site-2"].values():
        row["rows"] = 20
    assert list(JobResults.from_dict(small).sample_warnings) == ["site-2"]  # rows alone


def _row(d, key, value, site="site-1", strategy="mp"):
    d["metrics"][site][strategy][key] = value


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: _row(d, "events", 80), "field 'metrics.site-1.mp.events' is 80"),
        (lambda d: _row(d, "events", -1), "field 'metrics.site-1.mp.events' is -1"),
        (lambda d: _row(d, "events", "6"), "field 'metrics.site-1.mp.events' is '6'"),
        (lambda d: _row(d, "intervals", [1]), "field 'metrics.site-1.mp.intervals' is [1]"),
        (
            lambda d: _row(d, "intervals", {"auc": [0.9, 0.95]}),
            "field 'metrics.site-1.mp.intervals.auc': expected [low, high] with low <= 0.84",
        ),
        (
            lambda d: _row(d, "intervals", {"auc": [0.5, 1.5]}),
            "'metrics.site-1.mp.intervals.auc': expected low <= high within [0, 1]",
        ),
        (
            lambda d: _row(d, "intervals", {"auc": [0.5, float("nan")]}),
            "'metrics.site-1.mp.intervals.auc': expected [low, high], two finite numbers",
        ),
        (lambda d: _row(d, "intervals", {"speed": [0, 1]}), "intervals' names 'speed'"),
        (lambda d: _row(d, "auc", "high"), "field 'metrics.site-1.mp.auc' is 'high'"),
        (lambda d: d["test_events"].update({"site-1": 3}), "field 'test_events' does not match"),
        (lambda d: d.update(test_events=[1]), "field 'test_events': expected a dict"),
        (lambda d: d.update(sample_warnings={}), "field 'sample_warnings' does not match"),
        (
            lambda d: d["sample_warnings"].update({"site-1": "x"}),
            "field 'sample_warnings' does not match the metric rows at 'site-1'",
        ),
        (lambda d: d["sample_warnings"].update({"site-2": 5}), "'sample_warnings.site-2' is 5"),
        (lambda d: d["test_rows"].update({"site-1": -3}), "field 'test_rows.site-1' is -3"),
        (lambda d: d["test_rows"].update({"site-1": "75"}), "field 'test_rows.site-1' is '75'"),
    ],
)
def test_tampered_counts_and_intervals_are_refused_naming_the_field(change, message):
    data = version_4()
    change(data)
    with pytest.raises(ValueError, match="^run/results.json: ") as err:
        JobResults.from_dict(data, source="run/results.json")
    assert message in str(err.value), str(err.value)


def test_each_sites_validation_mode_is_read_and_refused_naming_the_field():
    data = versioned(json.loads(json.dumps(SERVER_UNVERSIONED)))
    assert JobResults.from_dict(data).validation == {}  # a current file that reports none
    data["validation"] = {"site-1": "oob", "site-2": "holdout"}
    results = JobResults.from_dict(data)
    assert results.validation == {"site-1": "oob", "site-2": "holdout"}
    assert results.to_dict()["validation"] == data["validation"]
    data["validation"] = {"site-1": "cross"}
    with pytest.raises(ValueError, match="field 'validation.site-1' is 'cross'"):
        JobResults.from_dict(data, "run/results.json")


def test_a_version_7_survival_file_reads_its_one_calibration_as_its_only_horizon(survival_job):
    """Before version 8 a survival row held one calibration (at the grid's middle time) and
    no time-dependent AUC at a horizon: it reads as one horizon without an AUC."""
    job, _ = survival_job
    data = copy.deepcopy(job.results.to_dict())
    assert data["version"] == RESULTS_VERSION == 9
    data["version"] = 7
    # a version 7 file never held a null freedom degree (every feature kept: version 9)
    tuning = data["tuning"]
    tuning["history"] = [h for h in tuning["history"] if h["freedom_degree"] is not None]
    if tuning["freedom_degree"] is None:
        tuning["freedom_degree"] = data["election"]["freedom_degree"] = 1.0
    for per in data["metrics"].values():
        for row in per.values():
            curves = row["survival_curves"]
            first = curves.pop("horizons")[0]
            curves["calibration"] = {k: v for k, v in first.items() if k != "td_auc"}
    read = JobResults.from_dict(data, "old/results.json")
    for site, per in read.metrics.items():
        now = job.results.metrics[site]["mp"]["survival_curves"]["horizons"][0]
        assert per["mp"]["survival_curves"]["horizons"] == [{**now, "td_auc": None}]
    # a version 8 layout in a file that says version 7 is refused, naming the field
    mixed = {**copy.deepcopy(job.results.to_dict()), "version": 7}
    with pytest.raises(ValueError, match="horizons' belongs to version 8"):
        JobResults.from_dict(mixed, "mixed/results.json")


def test_a_freedom_degree_is_null_only_from_version_9():
    """Version 9: the election kept every feature (the tuner's candidate); the election's,
    the tuning's and that step's freedom degree are null. A version 8 file's are numbers."""
    data = versioned(copy.deepcopy(SERVER_UNVERSIONED))
    data["election"]["freedom_degree"] = None
    data["tuning"]["freedom_degree"] = None
    data["tuning"]["history"].append(
        {"freedom_degree": None, "kept": 2, "score": 0.9, "reused": False}
    )
    read = JobResults.from_dict(copy.deepcopy(data), "run/results.json")
    assert read.election["freedom_degree"] is None
    assert read.to_dict()["tuning"]["history"][-1]["freedom_degree"] is None
    report = render_report(read)
    assert "at every feature, which tuning scored best" in report
    assert "| every feature | 2 | 0.9000 |" in report
    data["version"] = 8
    with pytest.raises(ValueError, match=r"field 'election.freedom_degree' is None"):
        JobResults.from_dict(data, "run/results.json")
    data["version"] = 9
    data["tuning"]["history"][-1]["freedom_degree"] = "all"
    with pytest.raises(ValueError) as err:
        JobResults.from_dict(data, "run/results.json")
    assert "'tuning.history[1].freedom_degree' is 'all'" in str(err.value)
    assert "null (every feature kept) or a finite number in [0, 1]" in str(err.value)
