"""The message registry: every payload format, its type and its one reader."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from fedforest import protocol
from fedforest.errors import PayloadError
from fedforest.federation.messages import (
    MAX_KEY,
    MAX_REASON,
    MESSAGES,
    MaskScore,
    Message,
    SiteModelsReply,
    SwarmMessage,
    SwarmMessageRefused,
    read_message,
)
from fedforest.federation.swarm import swarm_message
from fedforest.federation.training import fit_site_models
from fedforest.model.forest import PooledForest
from fedforest.privacy.policy import PrivacyPolicy

SITES = ["site-1", "site-2", "site-3"]
JOB = "d" * 64


@pytest.fixture(scope="module")
def trained():
    """A site's training reply with real scikit-learn trees, surrogates and imputers."""
    rng = np.random.default_rng(1)
    n = 200
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.normal(size=n)})
    y = (X["a"] + X["c"] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    models = fit_site_models(
        "site-2",
        X,
        y,
        own=["a", "b", "c"],
        shared=["a", "b"],
        categories={},
        forest_params={"n_estimators": 4},
        random_state=0,
        intersection_columns=["a", "b"],
    )
    return SiteModelsReply(
        models.forest, models.imputers, models.feature_std, n, models.intersection
    )


def metrics_payload(site="site-2", rows=50) -> dict:
    return {
        "format": protocol.SITE_METRICS,
        "version": protocol.FORMATS[protocol.SITE_METRICS],
        "site": site,
        "rows": rows,
        "strategies": {
            "mp": {
                "auprc": 0.8,
                "auc": 0.7,
                "rows": rows,
                "mean_trees_kept": 5.0,
                "fallback_rows": 0,
            },
            "fpv": {
                "auprc": 0.6,
                "auc": None,
                "rows": rows,
                "mean_trees_kept": 4.0,
                "fallback_rows": 1,
            },
        },
        "privacy": PrivacyPolicy().to_dict(),
    }


def status_payload(site="site-2", metrics=None) -> dict:
    return {
        "format": protocol.SWARM_STATUS,
        "version": protocol.FORMATS[protocol.SWARM_STATUS],
        "site": site,
        "state": "finished",
        "phase": "evaluate",
        "error": None,
        "participants": ["site-1", "site-2"],
        "dropped": {"site-3": "train: it failed"},
        "model_digest": "a" * 64,
        "phase_seconds": {"train": 1.5},
        "metrics": metrics,
        "metrics_withheld": False,
        "encrypted": None,
    }


# ------------------------------------------------------------------------ the registry
def test_every_format_of_the_protocol_has_one_message():
    assert set(MESSAGES) == set(protocol.FORMATS)
    for fmt, message in MESSAGES.items():
        assert isinstance(message, Message) and message.format == fmt
        assert callable(message.reader) and message.type is not None and message.sent_by


def test_a_payload_of_another_format_is_refused_naming_the_sender_and_both_formats():
    with pytest.raises(PayloadError) as err:
        read_message(MaskScore(0.5, 10).to_payload(), "site-2", protocol.SITE_VOTE)
    text = str(err.value)
    assert text.startswith("payload from 'site-2' refused: ")
    assert repr(protocol.MASK_SCORE) in text and repr(protocol.SITE_VOTE) in text
    for anything in (None, [1, 2], "text", 3.0):
        with pytest.raises(PayloadError, match="payload from 'site-2' refused"):
            read_message(anything, "site-2", protocol.MASK_SCORE)


def test_the_caller_must_name_a_format_and_the_context_its_reader_takes():
    with pytest.raises(ValueError, match="unknown payload format 'fedforest/nothing'"):
        read_message({}, "site-2", "fedforest/nothing")
    with pytest.raises(TypeError, match=r"takes \['features'\], not \['strategies'\]"):
        read_message({}, "site-2", protocol.SITE_VOTE, strategies=["mp"])


def test_a_future_version_is_refused_by_every_reader():
    payload = dict(
        MaskScore(0.5, 10).to_payload(), version=protocol.FORMATS[protocol.MASK_SCORE] + 1
    )
    with pytest.raises(PayloadError, match="upgrade fedforest at this site"):
        read_message(payload, "site-2", protocol.MASK_SCORE)


# ----------------------------------------------------------------------------- mask score
def test_a_mask_score_round_trips():
    score = MaskScore(0.25, 40)
    assert read_message(score.to_payload(), "site-1", protocol.MASK_SCORE) == score


# ------------------------------------------------------------------- a training reply
def test_a_training_reply_round_trips_with_every_part(trained):
    payload = trained.to_payload()
    assert set(payload) == {"format", "version", "forest", "imputers", "feature_std", "n_rows"} | {
        "intersection"
    }
    read = read_message(copy.deepcopy(payload), "site-2", protocol.SITE_MODELS)
    assert isinstance(read, SiteModelsReply) and read.n_rows == trained.n_rows
    assert (
        read.feature_std == trained.feature_std
        and read.imputers.features == trained.imputers.features
    )
    np.testing.assert_array_equal(read.forest.threshold, trained.forest.threshold)
    assert read.intersection.n_trees == trained.intersection.n_trees
    # without an intersection forest
    bare = SiteModelsReply(trained.forest, trained.imputers, {}, 10).to_payload()
    assert "intersection" not in bare
    assert read_message(bare, "site-2", protocol.SITE_MODELS).intersection is None


@pytest.mark.parametrize(
    ("change", "part"),
    [
        ({"n_rows": 0}, "field 'n_rows' is 0; expected an integer in [1, "),
        ({"feature_std": {"a": -1.0}}, "field 'feature_std' must map feature names to numbers"),
        ({"extra": 1}, "unknown fields ['extra']"),
        (
            {"imputers": {"format": protocol.IMPUTERS}},
            "imputers: field 'version' is None; expected a positive integer",
        ),
    ],
)
def test_a_bad_training_reply_is_refused_naming_the_field_and_its_place(trained, change, part):
    payload = {**trained.to_payload(), **change}
    with pytest.raises(PayloadError) as err:
        read_message(payload, "site-2", protocol.SITE_MODELS)
    assert "payload from 'site-2' refused: " in str(err.value) and part in str(err.value)


def test_a_bad_nested_forest_is_named_by_its_place(trained):
    payload = trained.to_payload()
    payload["intersection"] = dict(payload["intersection"], owners=[])
    with pytest.raises(PayloadError, match="refused: intersection: field 'owners'"):
        read_message(payload, "site-2", protocol.SITE_MODELS)
    payload = trained.to_payload()
    payload["forest"] = dict(payload["forest"], version=99)
    with pytest.raises(PayloadError, match="refused: forest: 'fedforest/pooled-forest' version 99"):
        read_message(payload, "site-2", protocol.SITE_MODELS)


def test_the_nested_formats_read_on_their_own(trained):
    forest = read_message(trained.forest.to_payload(), "s", protocol.POOLED_FOREST, where="forest")
    assert isinstance(forest, PooledForest) and forest.n_trees == trained.forest.n_trees
    imputers = read_message(trained.imputers.to_payload(), "s", protocol.IMPUTERS)
    assert imputers.features == trained.imputers.features


# ------------------------------------------------------------------------- metrics
def test_a_metrics_reply_is_read_against_the_job_or_as_it_describes_itself():
    payload = metrics_payload()
    read = read_message(payload, "site-2", protocol.SITE_METRICS, strategies=["mp", "fpv"])
    assert read["rows"] == 50 and read["strategies"]["fpv"]["auc"] is None
    alone = read_message(payload, "site-2", protocol.SITE_METRICS)  # a site's own filter
    assert alone == read_message(
        payload, "site-2", protocol.SITE_METRICS, strategies=["fpv", "mp"], metrics=["auprc", "auc"]
    )
    with pytest.raises(PayloadError, match="field 'strategies' has .* expected \\['auto', 'mp'\\]"):
        read_message(payload, "site-2", protocol.SITE_METRICS, strategies=["mp", "auto"])


# ------------------------------------------------------------------------ swarm mode
def test_a_swarm_message_is_read_with_its_body():
    body = {"site-1": {"digest": "b" * 64}, "site-3": {"refused": "r" * 3000}}
    payload = swarm_message("receipt", "train", JOB, ["site-1", "site-3"], body)
    read = read_message(payload, "site-1", protocol.SWARM_MESSAGE, sites=SITES, job=JOB)
    assert read == SwarmMessage(
        "receipt",
        "train",
        JOB,
        ["site-1", "site-3"],
        {
            "site-1": {"digest": "b" * 64},
            "site-3": {"refused": "r" * MAX_REASON},
        },
    )
    failed = swarm_message("failed", "vote", JOB, SITES, {"error": "e" * 5000})
    read = read_message(failed, "site-1", protocol.SWARM_MESSAGE, sites=SITES, job=JOB)
    assert read.body == {"error": "e" * MAX_REASON}
    assert read.to_payload() == dict(failed, body={"error": "e" * MAX_REASON})


@pytest.mark.parametrize(
    ("change", "key", "part"),
    [
        ({"job": "e" * 64}, "schema", "it runs other job settings (digest eeeeeeeeeeee…)"),
        ({"view": ["site-9"]}, "schema", "field 'view'"),
        ({"kind": "gossip"}, "schema", "field 'kind'"),
        ({"key": "k" * (MAX_KEY + 1)}, "k" * (MAX_KEY + 1), f"at most {MAX_KEY} characters"),
        ({"format": protocol.SWARM_STATUS}, None, "field 'format'"),
        ({"body": {"site-9": {"digest": "a" * 64}}, "kind": "receipt"}, "schema", "site-9"),
    ],
)
def test_a_refused_swarm_message_keeps_its_key_when_it_could_be_read(change, key, part):
    payload = {**swarm_message("payload", "schema", JOB, SITES, {"x": 1}), **change}
    with pytest.raises(SwarmMessageRefused) as err:
        read_message(payload, "site-3", protocol.SWARM_MESSAGE, sites=SITES, job=JOB)
    assert err.value.key == key and err.value.sender == "site-3"
    assert str(err.value).startswith("payload from 'site-3' refused: ") and part in str(err.value)
    assert isinstance(err.value, PayloadError)


def test_a_swarm_status_is_read_against_the_job_or_as_it_describes_itself():
    payload = status_payload(metrics=metrics_payload())
    read = read_message(
        payload,
        "site-2",
        protocol.SWARM_STATUS,
        sites=SITES,
        strategies=["mp", "fpv"],
        metrics=["auprc", "auc"],
    )
    assert read["state"] == "finished" and read["dropped"] == {"site-3": "train: it failed"}
    assert read["metrics"]["rows"] == 50
    assert read_message(payload, "site-2", protocol.SWARM_STATUS) == read  # its own filter
    with pytest.raises(PayloadError, match="field 'participants'"):
        read_message(
            {**payload, "participants": ["site-9"]}, "site-2", protocol.SWARM_STATUS, sites=SITES
        )
    with pytest.raises(PayloadError, match="it says it is site 'site-2'"):
        read_message(payload, "site-1", protocol.SWARM_STATUS)
    long = {**payload, "error": "x" * 5000, "phase": "p" * 500}
    read = read_message(long, "site-2", protocol.SWARM_STATUS)
    assert len(read["error"]) == MAX_REASON and len(read["phase"]) == MAX_KEY


def test_no_message_can_carry_the_in_bag_record(trained):
    """Which rows trained which tree stays at the site: no message type has a field for it,
    and a training reply of a site that keeps its records holds nothing of them."""
    import dataclasses
    import typing

    from fedforest.model.in_bag import InBagRecord

    X = pd.DataFrame(np.random.default_rng(2).normal(size=(80, 2)), columns=["a", "b"])
    y = (X["a"] > 0).astype(int).to_numpy()
    models = fit_site_models(
        "site-2",
        X,
        y,
        ["a", "b"],
        ["a"],
        {},
        {"n_estimators": 3},
        random_state=0,
        intersection_columns=["a"],
    )
    assert isinstance(models.in_bag, InBagRecord)
    for message in MESSAGES.values():
        kind = message.type
        fields = (
            [f.name for f in dataclasses.fields(kind)]
            if dataclasses.is_dataclass(kind)
            else list(typing.get_type_hints(kind))
            if isinstance(kind, type)
            else []
        )
        assert not [f for f in fields if "bag" in f.lower()], message.format
    reply = SiteModelsReply(
        models.forest, models.imputers, models.feature_std, 80, models.intersection
    )

    def walk(value, where="reply"):
        assert not isinstance(value, InBagRecord), where
        if isinstance(value, dict):
            for k, v in value.items():
                assert "bag" not in str(k).lower(), where
                walk(v, f"{where}.{k}")
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")
        elif isinstance(value, np.ndarray) and value.shape[-1:] == (80,):
            raise AssertionError(f"{where}: an array with one entry per training row")

    walk(reply.to_payload())
