"""The rules of results.json, field by field (federation/results_rules.py), on a job's file."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fedforest.federation import results_rules as rr
from fedforest.federation.job_results import BRIEF_FIELDS, SERVER_FIELDS, SWARM_FIELDS

DATA = Path(__file__).resolve().parents[1] / "cli" / "data"
SOURCE = "results.json"
FIELDS = {"server": SERVER_FIELDS, "swarm": SWARM_FIELDS, "brief": BRIEF_FIELDS}


@pytest.fixture(scope="module")
def written():
    """A version 5 results file a job wrote, without its format and version."""
    data = json.loads((DATA / "job_results_v5.json").read_text())
    return {k: v for k, v in data.items() if k not in ("format", "version")}


def refused(data, match):
    with pytest.raises(ValueError, match=match) as info:
        rr.check_results_fields(data, 5, SOURCE)
    assert str(info.value).startswith(f"{SOURCE}: ")
    return str(info.value)


def changed(data, change):
    out = copy.deepcopy(data)
    change(out)
    return out


# ------------------------------------------------------------------ the value rules
def test_names_are_short_strings_without_control_characters():
    assert rr.name(SOURCE, "job", "<b>demo</b> *job*") == "<b>demo</b> *job*"
    for bad in ("", "a\nb", "x\x7f", "a" * (rr.MAX_NAME + 1), 3, None):
        with pytest.raises(ValueError, match="allowed: a name of 1 to 1000 characters"):
            rr.name(SOURCE, "job", bad)


def test_texts_numbers_and_whole_numbers_are_bounded():
    assert rr.text(SOURCE, "error", None, optional=True) is None
    with pytest.raises(ValueError, match="field 'error' is .*allowed: a text of at most 100000"):
        rr.text(SOURCE, "error", "x" * (rr.MAX_TEXT + 1))
    assert rr.whole(SOURCE, "rows", 3) == 3
    for bad in (True, -1, 2.0, 2**63):
        with pytest.raises(ValueError, match=r"allowed: a whole number in \[0, "):
            rr.whole(SOURCE, "rows", bad)
    assert rr.number(SOURCE, "score", 1, 0, 1) == 1.0
    with pytest.raises(ValueError, match=r"allowed: a finite number in \[0, 1\]"):
        rr.number(SOURCE, "score", 1.5, 0, 1)
    with pytest.raises(ValueError, match="allowed: a finite number >= 0"):
        rr.number(SOURCE, "seconds", float("nan"), 0)
    with pytest.raises(ValueError, match="allowed: a finite number$"):
        rr.number(SOURCE, "score", False)


def test_mappings_and_lists_of_names():
    assert rr.mapping(SOURCE, "privacy", None, optional=True) == {}
    with pytest.raises(ValueError, match=r"field 'test_rows \(a key\)'"):
        rr.mapping(SOURCE, "test_rows", {"": 3})
    assert rr.names(SOURCE, "sites", ["a", "b"]) == ["a", "b"]
    with pytest.raises(ValueError, match="allowed: a list without duplicates"):
        rr.names(SOURCE, "sites", ["a", "a"])
    with pytest.raises(ValueError, match=r"field 'sites\[1\]'"):
        rr.names(SOURCE, "sites", ["a", 1])


# ------------------------------------------------------------------ the file
def test_a_jobs_own_file_passes_and_its_rows_are_read(written):
    checked = rr.check_results_fields(written, 5, SOURCE)
    assert set(checked["metrics"]) == set(written["metrics"])
    site = next(iter(written["metrics"]))
    row = checked["metrics"][site][written["strategies"][0]]
    assert row["auc"] == written["metrics"][site][written["strategies"][0]]["auc"]
    assert set(checked["privacy"]) == set(written["privacy"])


def test_the_fields_a_versioned_file_must_hold(written):
    assert rr.required_fields(written, None, FIELDS) == ()
    required = rr.required_fields(written, 5, FIELDS)
    assert "metrics" in required and "model" not in required
    assert not set(rr.DERIVED) & set(required)
    brief = {k: written.get(k) for k in BRIEF_FIELDS}
    assert rr.required_fields(brief, 5, FIELDS) == BRIEF_FIELDS
    swarm = rr.required_fields({**written, "mode": "swarm"}, 5, FIELDS)
    assert "site_states" in swarm


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda d: d.update(status="done"), "field 'status' is 'done'; allowed: finished, failed"),
        (lambda d: d.update(sites=["site-1", "site-1"]), "a list without duplicates"),
        (lambda d: d["dropped_sites"].update({"site-9": 5}), r"field 'dropped_sites.site-9'"),
        (lambda d: d.update(classes_missing={"site-1": [True]}), r"classes_missing.site-1\[0\]"),
        (lambda d: d["test_rows"].update({"site-1": -1}), r"field 'test_rows.site-1' is -1"),
        (lambda d: d["election"]["stats"].pop("kept"), r"field 'election.stats' has no 'kept'"),
        (lambda d: d["election"].update(colour=1), r"field 'election' has unknown keys"),
        (lambda d: d["election"].update(aggregation="max"), "field 'election.aggregation'"),
        (lambda d: d["election"].update(freedom_degree=2), r"in \[0, 1\]"),
        (lambda d: d["tuning"]["history"][0].update(reused="no"), r"history\[0\].reused"),
        (lambda d: d.update(phase_seconds={"train": -1}), "field 'phase_seconds.train'"),
        (lambda d: d["payload_bytes"].update({"site-1": {"trees": 1.5}}), "payload_bytes"),
        (lambda d: d["model"].update(trees=-3), "field 'model.trees' is -3"),
        (lambda d: d.update(schema={"format": "x"}), "field 'schema': "),
    ],
)
def test_a_field_the_job_would_not_write_is_named_with_its_path(written, change, match):
    refused(changed(written, change), match)


def test_a_bad_metric_is_named_at_its_place_in_the_file(written):
    site = next(iter(written["metrics"]))
    strategy = written["strategies"][0]

    def bad_auc(d):
        d["metrics"][site][strategy]["auc"] = 1.5

    message = refused(changed(written, bad_auc), f"field 'metrics.{site}.{strategy}.auc'")
    assert "1.5" in message
    refused(
        changed(written, lambda d: d["metrics"][site].pop(strategy)),
        rf"field 'metrics.{site}' is .*allowed: a row for each of the file's strategies",
    )


def test_the_swarm_fields_are_checked_in_swarm_mode(written):
    swarm = {**written, "mode": "swarm", "site_states": {"site-1": "done"}}
    digest = "a" * 64
    ok = {**swarm, "model_digest": digest, "model_digests": {"site-1": digest}}
    ok["site_states"] = {"site-1": rr.SWARM_STATES[0]}
    rr.check_results_fields(ok, 5, SOURCE)
    refused(swarm, r"field 'site_states.site-1' is 'done'; allowed: ")
    refused({**ok, "model_digest": "A" * 64}, "SHA-256 digest")
    refused({**ok, "peer_messages_encrypted": {"site-1": "yes"}}, "true, false or null")
    refused({**ok, "metrics_withheld": ["site-1", "site-1"]}, "without duplicates")


def test_a_readers_message_is_placed_in_the_results_file():
    key = "metrics.site-1"
    msg = "payload from site-1 refused: strategies['mp']: field 'auc' is 2; allowed: [0, 1]"
    assert rr._in_results(key, msg) == "field 'metrics.site-1.mp.auc' is 2; allowed: [0, 1]"
    assert rr._in_results(key, "strategies['mp']: no row") == "field 'metrics.site-1.mp': no row"
    assert rr._in_results(key, "something else") == "field 'metrics.site-1': something else"
