"""The wire protocol: every payload format round-trips, a future version is refused by name."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from fedforest import PayloadError, protocol
from fedforest.federation.election import SiteVote
from fedforest.federation.schema import GlobalSchema, SiteSchema
from fedforest.federation.server import JobServer
from fedforest.model.forest import PooledForest
from fedforest.model.imputers import ImputerSet
from fedforest.model.model_files import read_model

sys.path.insert(0, str(Path(__file__).resolve().parent / "federation"))
from test_site import make_job, run_job  # noqa: E402


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
        protocol.MODEL: (job.model, read_model),
        protocol.SITE_METRICS: (job.metrics[site], via_server("read_metrics")),
    }, site


def test_every_format_has_a_reader_and_round_trips(job):
    table, site = readers(job)
    assert set(table) == set(protocol.FORMATS)
    for fmt, (payload, read) in table.items():
        assert payload["format"] == fmt and payload["version"] == protocol.FORMATS[fmt]
        read(copy.deepcopy(payload), site)


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
    assert protocol.task_data(protocol.SCHEMA, seed=3) == {"seed": 3}
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
