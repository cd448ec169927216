"""The wire protocol: every payload format round-trips, a future version is refused by name."""

from __future__ import annotations

import copy
import typing

import pytest

from federation.test_site import make_job, run_job
from fedforest import PayloadError, protocol
from fedforest.election.ballot import SiteVote
from fedforest.federation.agreement import payload_digest
from fedforest.federation.config import JobConfig
from fedforest.federation.evaluation import read_site_metrics
from fedforest.federation.job_results import JobResults
from fedforest.federation.messages import MESSAGES, read_message, read_swarm_status
from fedforest.federation.schema import GlobalSchema, SiteSchema
from fedforest.federation.server import JobServer
from fedforest.federation.swarm import (
    InProcessTransport,
    Mailbox,
    SwarmSite,
    job_digest,
    swarm_message,
)
from fedforest.model.forest import PooledForest
from fedforest.model.imputers import ImputerSet
from fedforest.model.model_files import load_payload
from fedforest.model.pooled_model import PooledModel, load_model
from fedforest.privacy.policy import job_default_policy
from model.same import assert_same_arrays, assert_same_predictions
from model.v1_payloads import MODEL_V1, forest_fields, v1_payload


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("protocol_job")
    config, runners = make_job(folder, rows=150, n_estimators=6)
    return run_job(config, runners, folder / "run")


def readers(job):
    """(format, example payload, reader) for every format of the protocol."""
    features = GlobalSchema.from_payload(job.schema).features
    site, trained = next(iter(job.trained.items()))
    mask_score = job.runners[site].score_mask(job.elected, "auprc")

    def via_server(method: str, *args):
        """A reader of the server's: a refused reply drops the site and names the reason."""

        def read(payload, sender):
            server = JobServer(job.config, schema=job.server.schema, election=job.server.election)
            try:
                getattr(server, method)({sender: payload}, *args)
            except RuntimeError:  # fewer than min_sites left after the drop
                pass
            if sender in server.dropped:
                raise PayloadError(server.dropped[sender])

        return read

    sites = job.config.sites
    receiver = next(s for s in sites if s != site)
    digest = job_digest(job.config)

    def swarm_put(payload, sender):
        """Another site's mailbox receives the message (it refuses it with a PayloadError)."""
        Mailbox(receiver, sites, digest).put(sender, payload)

    def swarm_status(payload, sender):
        config = job.config
        read_swarm_status(payload, sender, sites, config.strategies, config.metrics)

    # a real SwarmSite's status, its fields set as a finished run leaves them
    boxes = {s: Mailbox(s, sites, digest) for s in sites}
    swarm = SwarmSite(
        job.config, site, job.runners[site], InProcessTransport(site, boxes), boxes[site]
    )
    swarm.state, swarm.phase = "finished", protocol.EVALUATE
    swarm.model_digest = payload_digest(job.model)
    swarm.metrics = job.metrics[site]

    return {
        protocol.POOLED_FOREST: (trained["forest"], PooledForest.from_payload),
        protocol.IMPUTERS: (trained["imputers"], ImputerSet.from_payload),
        protocol.SITE_SCHEMA: (job.describe[site], SiteSchema.from_payload),
        protocol.GLOBAL_SCHEMA: (job.schema, GlobalSchema.from_payload),
        protocol.SITE_VOTE: (
            job.votes[site],
            lambda p, sender: SiteVote.from_payload(p, sender, features=features),
        ),
        protocol.MASK_SCORE: (mask_score, via_server("score_replies")),
        protocol.SITE_MODELS: (trained, via_server("pool", True)),
        protocol.MODEL: (job.model, PooledModel.from_payload),
        protocol.SITE_METRICS: (job.metrics[site], via_server("read_metrics")),
        protocol.SWARM_MESSAGE: (
            swarm_message("payload", protocol.SCHEMA, digest, sites, job.describe[site]),
            swarm_put,
        ),
        protocol.SWARM_STATUS: (swarm.status(), swarm_status),
    }, site


def test_every_format_has_a_reader_and_round_trips(job):
    table, site = readers(job)
    assert set(table) == set(protocol.FORMATS)
    for fmt, (payload, read) in table.items():
        assert payload["format"] == fmt and payload["version"] == protocol.FORMATS[fmt]
        read(copy.deepcopy(payload), site)


def test_the_registry_reads_every_format_into_its_type(job):
    """Every example payload read by ``read_message``, with the context its receiver has."""
    table, site = readers(job)
    config = job.config
    context = {
        protocol.SITE_VOTE: {"features": GlobalSchema.from_payload(job.schema).features},
        protocol.SITE_METRICS: {"strategies": config.strategies, "metrics": config.metrics},
        protocol.SWARM_MESSAGE: {"sites": config.sites, "job": job_digest(config)},
        protocol.SWARM_STATUS: {
            "sites": config.sites,
            "strategies": config.strategies,
            "metrics": config.metrics,
        },
    }
    assert set(MESSAGES) == set(table)
    for fmt, (payload, _) in table.items():
        message = MESSAGES[fmt]
        read = read_message(copy.deepcopy(payload), site, fmt, **context.get(fmt, {}))
        expected = dict if typing.is_typeddict(message.type) else message.type
        assert isinstance(read, expected), fmt


@pytest.mark.parametrize("fmt", sorted(protocol.FORMATS))
def test_a_future_version_is_refused_by_name(job, fmt):
    table, site = readers(job)
    payload, read = table[fmt]
    newer = dict(copy.deepcopy(payload), version=protocol.FORMATS[fmt] + 1)
    with pytest.raises(PayloadError) as err:
        read(newer, site)
    message = str(err.value)
    assert fmt in message and "upgrade fedforest" in message and site in message


def test_every_task_has_data_keys_a_phase_and_a_reply_format():
    assert set(protocol.TASK_DATA) == set(protocol.TASKS) == set(protocol.REPLY_FORMAT)
    assert set(protocol.TASK_PHASE) == set(protocol.TASKS)
    assert set(protocol.REPLY_FORMAT.values()) <= set(protocol.FORMATS)


def test_task_data_must_match_the_protocol():
    data = protocol.task_data(protocol.SCHEMA, seed=3, time_quantiles=False)
    assert data == {"seed": 3, "time_quantiles": False}
    with pytest.raises(ValueError, match="carries"):
        protocol.task_data(protocol.SCHEMA, seed=3, extra=1)
    with pytest.raises(ValueError, match="unknown task"):
        protocol.task_data("guess")


@pytest.mark.parametrize("version", [0, -1, "1", 1.0, True, None])
def test_versions_must_be_positive_integers(version):
    with pytest.raises(ValueError, match="version"):
        protocol.check_version(protocol.MODEL, version)


def test_older_versions_are_upgraded_step_by_step(monkeypatch):
    monkeypatch.setitem(protocol.FORMATS, protocol.MODEL, 3)
    monkeypatch.setitem(protocol.UPGRADES, (protocol.MODEL, 1), lambda p: {**p, "b": 1})
    monkeypatch.setitem(protocol.UPGRADES, (protocol.MODEL, 2), lambda p: {**p, "c": p["b"] + 1})
    assert protocol.upgrade(protocol.MODEL, 1, {"a": 0}) == {"a": 0, "b": 1, "c": 2}
    assert protocol.check_version(protocol.MODEL, 2) == 2


# ------------------------------------------------------------ old versions
#: A ``fedforest/site-metrics`` reply of version 1, as fedforest wrote it before the site's
#: privacy policy was reported (version 2 adds the field ``privacy``).
SITE_METRICS_V1 = {
    "format": "fedforest/site-metrics",
    "version": 1,
    "site": "site-1",
    "rows": 75,
    "strategies": {
        "mp": {
            "auprc": 0.81,
            "auc": 0.84,
            "rows": 75,
            "mean_trees_kept": 60.0,
            "fallback_rows": 0,
        },
        "auto": {
            "auprc": 0.8,
            "auc": None,
            "rows": 75,
            "mean_trees_kept": 41.5,
            "fallback_rows": 2,
            "chosen": "ipr",
            "validation": {"ipr": 0.9, "mp": 0.85, "fpv": None},
        },
    },
}


def test_every_older_version_has_an_upgrade():
    for fmt, current in protocol.FORMATS.items():
        for version in range(1, current):
            assert (fmt, version) in protocol.UPGRADES, (fmt, version)
    assert protocol.FORMATS[protocol.SITE_METRICS] == 8
    assert protocol.FORMATS[protocol.SITE_SCHEMA] == protocol.FORMATS[protocol.GLOBAL_SCHEMA] == 2
    assert protocol.FORMATS[protocol.POOLED_FOREST] == 4
    assert protocol.FORMATS[protocol.MODEL] == 3


def test_version_1_pooled_forests_still_load(job):
    """A site whose fedforest still writes version 1 forests takes part in a job, and a
    model file holding version 1 forests loads (``tests/model/data/model_v1.npz``)."""
    site, trained = next(iter(job.trained.items()))
    current = PooledForest.from_payload(trained["forest"], site)
    old = copy.deepcopy(trained)
    old["forest"] = v1_payload(current)
    old["intersection"] = v1_payload(PooledForest.from_payload(trained["intersection"], site))
    assert old["forest"]["version"] == 1 and "children_left" in old["forest"]
    # the server pools it with the others, exactly as the version 2 reply
    server = JobServer(job.config, schema=job.server.schema, election=job.server.election)
    replies = {**copy.deepcopy(job.trained), site: old}
    model = server.pool(replies, want_intersection=True)
    assert server.dropped == {}
    again = JobServer(job.config, schema=job.server.schema, election=job.server.election)
    expected = again.pool(copy.deepcopy(job.trained), want_intersection=True)
    assert model["forest"]["version"] == 4
    read = PooledModel.from_payload
    assert_same_arrays(read(model).forest, read(expected).forest)
    # a model bundle (version 1) whose forests are version 1
    bundle = dict(copy.deepcopy(job.model), forest=v1_payload(read(job.model).forest))
    assert_same_arrays(read(bundle, site).forest, read(job.model).forest)
    # and a model file written when forests were version 1
    saved = load_model(MODEL_V1)
    assert saved.forest.n_trees == 10 and saved.intersection.n_trees == 6
    as_sent = PooledForest(**forest_fields(load_payload(MODEL_V1)["forest"]))
    std = saved.feature_std
    assert assert_same_predictions(saved.forest, as_sent, saved.imputers, std, ("mp",))


def test_a_version_1_site_metrics_reply_still_loads(tmp_path):
    payload = copy.deepcopy(SITE_METRICS_V1)
    read = read_site_metrics(payload, "site-1", ["mp", "auto"], ["auprc", "auc"])
    assert payload == SITE_METRICS_V1  # the reply itself is left as it came
    assert read["privacy"] is None  # version 1 did not report a policy
    assert read["rows"] == 75 and read["strategies"]["auto"]["chosen"] == "ipr"
    mp = read["strategies"]["mp"]
    assert mp["calibration"] == "none" and mp["bins"] is None  # version 3 fields, as upgraded
    assert mp["events"] is None and mp["intervals"] is None  # version 4 fields, as upgraded
    assert mp["calibration_skipped"] is None  # the version 5 field, as upgraded
    added = ("calibration", "bins", "events", "intervals", "calibration_skipped")
    assert {k: v for k, v in mp.items() if k not in added} == SITE_METRICS_V1["strategies"]["mp"]
    auto = read["strategies"]["auto"]
    assert auto["chosen_calibration"] == "none" and auto["runner_up"] is None
    # through the server: recorded as not reported
    config = JobConfig.from_dict(
        {
            "job": {"sites": ["site-1", "site-2"], "min_sites": 1},
            "evaluation": {"strategies": ["mp", "auto"], "metrics": ["auprc", "auc"]},
        }
    )
    server = JobServer(config)
    metrics = server.read_metrics({"site-1": payload})
    assert server.dropped == {} and metrics["site-1"]["privacy"] is None
    results = server.write_results(tmp_path, metrics, None)
    assert results["privacy"] == {"site-1": None}
    assert "- `site-1`: not reported" in (tmp_path / "report.md").read_text()


def _as_version_6(payload: dict) -> dict:
    """A version 7 metrics reply of a classification job as a version 6 site wrote it (the
    same fields: version 7 only allows the survival metrics)."""
    return {**payload, "version": 6}


def _as_version_5(payload: dict) -> dict:
    """A version 6 metrics reply as a version 5 site wrote it (no validation mode)."""
    return {**{k: v for k, v in payload.items() if k != "validation"}, "version": 5}


def _as_version_4(payload: dict) -> dict:
    """A version 6 metrics reply as a version 4 site wrote it (no calibration_skipped)."""
    rows = {
        name: {k: v for k, v in row.items() if k != "calibration_skipped"}
        for name, row in payload["strategies"].items()
    }
    return {**_as_version_5(payload), "version": 4, "strategies": rows}


def _as_version_3(payload: dict) -> dict:
    """A version 5 metrics reply as a version 3 site wrote it (no events, intervals, outcome)."""
    rows = {}
    for name, row in _as_version_4(payload)["strategies"].items():
        row = {k: v for k, v in row.items() if k not in ("events", "intervals")}
        if row.get("bins") is not None:
            row["bins"] = {k: v for k, v in row["bins"].items() if k != "outcome"}
        rows[name] = row
    return {**_as_version_4(payload), "version": 3, "strategies": rows}


def _as_version_2(payload: dict) -> dict:
    """A version 5 metrics reply as a version 2 site wrote it (no calibration fields)."""
    payload = _as_version_3(payload)
    added = ("calibration", "bins", "chosen_calibration", "runner_up")
    rows = {
        name: {k: v for k, v in row.items() if k not in added}
        for name, row in payload["strategies"].items()
    }
    return {**payload, "version": 2, "strategies": rows}


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7, 8])
def test_a_site_metrics_reply_from_version_2_on_must_carry_the_policy(job, version):
    site = "site-1"
    payload = copy.deepcopy(job.metrics[site])
    default = job_default_policy().to_dict()  # a job's default
    assert payload["version"] == 8 and payload["privacy"] == default
    payload = {
        2: _as_version_2,
        3: _as_version_3,
        4: _as_version_4,
        5: _as_version_5,
        6: _as_version_6,
        7: lambda p: {**p, "version": 7},  # a classification row is version 8's
    }.get(version, dict)(payload)
    strategies, metrics = job.config.strategies, job.config.metrics
    read = read_site_metrics(payload, site, strategies, metrics)
    assert read["privacy"] == payload["privacy"]
    if version == 2:  # read as uncalibrated rows without bins
        assert {row.get("calibration") for row in read["strategies"].values()} <= {"none"}
    del payload["privacy"]
    with pytest.raises(PayloadError, match="field 'privacy' is missing"):
        read_site_metrics(payload, site, strategies, metrics)


def test_a_version_3_site_metrics_reply_reads_as_no_events_and_no_intervals(job):
    site = "site-1"
    current = copy.deepcopy(job.metrics[site])
    old = _as_version_3(current)
    strategies, metrics = job.config.strategies, job.config.metrics
    read = read_site_metrics(old, site, strategies, metrics)
    new = read_site_metrics(current, site, strategies, metrics)
    for name, row in read["strategies"].items():
        assert row["events"] is None and row["intervals"] is None
        if row.get("bins") is not None:
            assert "outcome" not in row["bins"]
        # everything else reads as the current reply does
        skip = ("events", "intervals", "bins")
        assert {k: v for k, v in row.items() if k not in skip} == {
            k: v for k, v in new["strategies"][name].items() if k not in skip
        }
    assert new["strategies"]["mp"]["events"] > 0
    assert set(new["strategies"]["mp"]["intervals"]) == {"auc", "auprc", "brier"}


def test_a_version_4_site_metrics_reply_reads_as_no_calibration_skipped(job):
    site = "site-1"
    current = copy.deepcopy(job.metrics[site])
    strategies, metrics = job.config.strategies, job.config.metrics
    read = read_site_metrics(_as_version_4(current), site, strategies, metrics)
    new = read_site_metrics(current, site, strategies, metrics)
    for name, row in read["strategies"].items():
        assert row.get("calibration_skipped") is None
        assert {k: v for k, v in row.items() if k != "calibration_skipped"} == {
            k: v for k, v in new["strategies"][name].items() if k != "calibration_skipped"
        }


def test_a_version_4_reply_holding_the_version_5_field_is_refused(job):
    site = "site-1"
    old = _as_version_4(copy.deepcopy(job.metrics[site]))
    old["strategies"]["mp"]["calibration_skipped"] = "isotonic: too few rows"
    with pytest.raises(PayloadError) as info:
        read_site_metrics(old, site, job.config.strategies, job.config.metrics)
    message = str(info.value)
    assert "calibration_skipped" in message and "belongs to version 5" in message


@pytest.mark.parametrize(
    ("fmt", "version", "field"),
    [
        (protocol.MODEL, 1, "deployment"),
        (protocol.MODEL, 1, "inputs"),
        (protocol.MODEL, 2, "inputs"),
        (protocol.SITE_METRICS, 1, "privacy"),
        (protocol.POOLED_FOREST, 2, "task"),
    ],
)
def test_a_field_of_a_later_version_is_refused_in_an_older_payload(fmt, version, field):
    with pytest.raises(ValueError) as info:
        protocol.upgrade(fmt, version, {"a": 0, field: None})
    message = str(info.value)
    assert f"field {field!r} belongs to version" in message
    assert f"declares version {version}" in message


def test_an_older_payload_of_its_own_fields_is_upgraded():
    assert protocol.upgrade(protocol.MODEL, 1, {"forest": {}}) == {
        "forest": {},
        "deployment": None,
        "inputs": None,
    }


def test_a_site_metrics_reply_says_which_validation_mode_the_site_used(job, tmp_path):
    site = "site-1"
    strategies, metrics = job.config.strategies, job.config.metrics
    current = {**copy.deepcopy(job.metrics[site]), "validation": "oob"}
    assert read_site_metrics(current, site, strategies, metrics)["validation"] == "oob"
    # version 5 had one mode: its replies read as holdout
    old = _as_version_5(current)
    assert read_site_metrics(old, site, strategies, metrics)["validation"] == "holdout"
    with pytest.raises(PayloadError, match="belongs to version 6"):
        read_site_metrics({**old, "validation": "oob"}, site, strategies, metrics)
    with pytest.raises(PayloadError, match="field 'validation'|validation is 'cross'"):
        read_site_metrics({**current, "validation": "cross"}, site, strategies, metrics)
    # through the server into results.json and report.md
    server = JobServer(job.config)
    read = server.read_metrics({site: current, "site-2": job.metrics["site-2"]})
    results = server.write_results(tmp_path, read, None)
    assert results["validation"] == {"site-1": "oob", "site-2": "holdout"}
    assert JobResults.from_dict(results).validation == results["validation"]
    report = (tmp_path / "report.md").read_text()
    assert "## Validation" in report
    assert "- `site-1`: oob (tuning, `auto`, calibration and `wmp` scored on the training " in (
        report
    )
    assert "- `site-2`: holdout (tuning, `auto`, calibration and `wmp` scored on held-out" in (
        report
    )


def test_version_1_schemas_load_as_schemas_without_survival_fields():
    """Schemas written before survival jobs (version 1) read as no quantiles and no grid."""
    site_v1 = {
        "format": protocol.SITE_SCHEMA,
        "version": 1,
        "site": "site-1",
        "columns": ["age", "smoker"],
        "kinds": ["numeric", "categorical"],
        "levels": {"smoker": ["no", "yes"]},
        "classes": [0, 1],
        "n_rows": 120,
    }
    site = read_message(site_v1, "site-1", protocol.SITE_SCHEMA)
    assert site.event_times == [] and site.columns == ["age", "smoker"]
    global_v1 = {
        "format": protocol.GLOBAL_SCHEMA,
        "version": 1,
        "features": ["age", "smoker"],
        "categories": {"smoker": ["no", "yes"]},
        "classes": [0, 1],
        "shared": ["age"],
        "site_columns": {"site-1": ["age", "smoker"], "site-2": ["age"]},
        "site_rows": {"site-1": 120, "site-2": 80},
    }
    schema = read_message(global_v1, "server", protocol.GLOBAL_SCHEMA)
    assert schema.times == [] and schema.shared == ["age"]
    with pytest.raises(PayloadError, match="'times' belongs to version 2"):
        read_message({**global_v1, "times": [1.0, 2.0]}, "server", protocol.GLOBAL_SCHEMA)
    # the current version refuses a grid that is not strictly increasing
    current = {**global_v1, "version": 2, "times": [5.0, 5.0]}
    with pytest.raises(PayloadError, match="field 'times' must be strictly increasing"):
        read_message(current, "server", protocol.GLOBAL_SCHEMA)
