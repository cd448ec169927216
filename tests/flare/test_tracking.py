"""``job.tracking``: the sites' metrics and the election in NVIDIA FLARE's experiment tracking.

The end-to-end test runs the real simulator (``SimEnv``) with
``job.tracking: tensorboard`` and reads back the event files FLARE's
``TBAnalyticsReceiver`` wrote in the server's run folder.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from fedforest.errors import ConfigError
from fedforest.flare import tracking
from fedforest.flare.environments import simulate
from fedforest.flare.job import build_job
from fedforest.flare.recipe import FedForestRecipe
from fedforest.flare.tracking import Record, election_records, site_metric_records
from fedforest.vocabulary import METRICS

from .flare_setup import UNCALIBRATED, write_configs

SITES = ["site-1", "site-2", "site-3"]


def read_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """``{tag: {step: value}}`` of every scalar in the TensorBoard event files under ``folder``."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    scalars: dict[str, dict[int, float]] = defaultdict(dict)
    files = sorted(folder.rglob("events.out.tfevents.*"))
    assert files, f"no event file in {folder}"
    for path in files:
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                # the loader migrates simple_value scalars to tensors
                number = tensor_util.make_ndarray(value.tensor).item()
                assert event.step not in scalars[value.tag], (path, value.tag, event.step)
                scalars[value.tag][event.step] = number
    return dict(scalars)


def f32(value: float) -> float:
    """What TensorBoard keeps of a number: a float32."""
    return float(np.float32(value))


@pytest.mark.flare
def test_tensorboard_gets_every_site_metric_and_the_tuning_history(tmp_path):
    configs = write_configs(
        tmp_path,
        rows=200,
        forest={"n_estimators": 8},
        election={"auto_tune": True, "tuning_rounds": 2},
        evaluation=UNCALIBRATED,
        job={"tracking": "tensorboard"},
    )
    log = tmp_path / "sim.log"
    run_dir = simulate(FedForestRecipe(configs), tmp_path / "ws", log_file=log, timeout=600)
    assert (run_dir / "results.json").is_file(), log.read_text()[-3000:]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "finished" and results["dropped_sites"] == {}

    tb = run_dir / tracking.TB_FOLDER
    origins = sorted(p.name for p in tb.iterdir() if p.is_dir())
    server = [name for name in origins if name not in SITES]
    assert sorted(set(origins) - set(server)) == SITES and len(server) == 1, origins

    # each site's folder: exactly its metrics, equal to results.json's
    metrics = results["metrics"]
    assert sorted(metrics) == SITES
    for site in SITES:
        logged = read_scalars(tb / site)
        expected = {
            f"{site}/{metric}/{strategy}": value
            for strategy, row in metrics[site].items()
            for metric, value in row.items()
            if metric in METRICS and value is not None
        }
        assert len(expected) >= 4 * 9, expected  # every strategy, (nearly) every metric
        assert set(logged) == set(expected), (site, sorted(set(logged) ^ set(expected)))
        for tag, value in expected.items():
            assert logged[tag] == {0: f32(value)}, (tag, logged[tag], value)

    # the server's folder: the tuning history step by step and the election's outcome
    logged = read_scalars(tb / server[0])
    history = results["tuning"]["history"]
    assert len(history) >= 2
    expected_history = {
        "election/tuning/freedom_degree": [h["freedom_degree"] for h in history],
        "election/tuning/features_kept": [h["kept"] for h in history],
        "election/tuning/validation_auprc": [h["score"] for h in history],
    }
    # the second step scored every feature: it has no freedom degree, and logs none
    assert history[1]["freedom_degree"] is None
    for tag, values in expected_history.items():
        steps = {i: f32(v) for i, v in enumerate(values) if v is not None}
        assert logged[tag] == steps, (tag, logged[tag])
    outcome = {"election/features_kept"}
    assert logged["election/features_kept"] == {0: len(results["election"]["selected"])}
    if results["tuning"]["freedom_degree"] is not None:
        outcome.add("election/freedom_degree")
        assert logged["election/freedom_degree"] == {0: f32(results["tuning"]["freedom_degree"])}
    assert set(logged) == {*expected_history, *outcome}


# --------------------------------------------------------------------------- building the job
#: Executor arguments every job has, whatever its tracking.
JOB_ARGS = ("site_config", "job_validation")


def _components(job_dir: Path) -> dict[str, list[str]]:
    """Each app's component classes, then the controller's or executor's arguments."""
    out = {}
    for app in sorted(job_dir.glob("app_*")):
        config = next((app / "config").glob("config_fed_*.json"))
        data = json.loads(config.read_text())
        out[app.name] = sorted(c["path"].rsplit(".", 1)[1] for c in data.get("components", []))
        for runner in [*data.get("workflows", []), *data.get("executors", [])]:
            args = runner.get("args", runner.get("executor", {}).get("args", {}))
            # what tracking adds, not the job's own settings every executor is given
            out[app.name] += [f"{k}={v}" for k, v in args.items() if k not in JOB_ARGS]
    return out


def test_tracking_none_adds_nothing_to_the_job(tmp_path):
    configs = write_configs(tmp_path, rows=60, forest={"n_estimators": 4})
    components = _components(build_job(configs, tmp_path / "jobs"))
    assert components == {f"app_{name}": [] for name in ["server", *SITES]}


def test_tracking_tensorboard_adds_flare_receiver_writers_and_widgets(tmp_path):
    configs = write_configs(tmp_path, rows=60, job={"tracking": "tensorboard"})
    components = _components(build_job(configs, tmp_path / "jobs"))
    assert components["app_server"] == ["TBAnalyticsReceiver", "tracking=tensorboard"]
    writer = f"log_writer_id={tracking.LOG_WRITER_ID}"
    for site in SITES:
        assert components[f"app_{site}"] == ["ConvertToFedEvent", "TBWriter", writer]


def test_mlflow_without_the_mlflow_package_is_refused_when_the_job_is_built(tmp_path, monkeypatch):
    real = tracking._installed
    monkeypatch.setattr(tracking, "_installed", lambda p: p != "mlflow" and real(p))
    configs = write_configs(tmp_path, rows=60, job={"tracking": "mlflow"})
    with pytest.raises(ConfigError) as info:
        build_job(configs, tmp_path / "jobs")
    msg = str(info.value)
    assert msg.startswith(f"{configs / 'job.yaml'}: key 'job.tracking' is 'mlflow';"), msg
    assert "allowed: none, tensorboard, or mlflow once the mlflow package is installed" in msg
    assert "`pip install mlflow`" in msg
    assert not (tmp_path / "jobs" / "fedforest-demo").exists()
    with pytest.raises(ConfigError, match="pip install mlflow"):
        FedForestRecipe(configs)


def test_tensorboard_without_its_package_is_refused_too(monkeypatch):
    monkeypatch.setattr(tracking, "_installed", lambda package: False)
    with pytest.raises(ConfigError) as info:
        tracking.server_components("tensorboard", "demo", "site_configs/job.yaml")
    msg = str(info.value)
    assert msg.startswith(
        "site_configs/job.yaml: key 'job.tracking' is 'tensorboard'; allowed: none,"
    )
    assert "`pip install tensorboard`" in msg
    assert tracking.server_components("none", "demo") == {}


# --------------------------------------------------------------------------- what is logged
def test_site_metric_records_name_site_metric_and_strategy():
    strategies = {
        "mp": {"auprc": 0.9, "auc": 0.8, "mcc": None, "rows": 50, "mean_trees_kept": 9.0},
        "auto": {"auprc": 0.7, "auc": np.float64(0.6), "mcc": 0.1, "chosen": "mp"},
    }
    records = site_metric_records("site-2", strategies, ["auprc", "auc", "mcc"])
    assert records == [
        Record("site-2/auprc/mp", 0.9),
        Record("site-2/auprc/auto", 0.7),
        Record("site-2/auc/mp", 0.8),
        Record("site-2/auc/auto", 0.6),
        Record("site-2/mcc/auto", 0.1),
    ]
    assert all(type(r.value) is float and r.step == 0 for r in records)


def test_election_records_give_the_history_by_step_and_the_outcome():
    tuning = {
        "history": [
            {"freedom_degree": 0.5, "kept": 6, "score": 0.81, "reused": False},
            {"freedom_degree": 0.6, "kept": 4, "score": float("nan"), "reused": False},
            {"freedom_degree": None, "kept": 9, "score": 0.83, "reused": False},
        ]
    }
    election = {"freedom_degree": 0.5, "selected": ["a", "b", "c"]}
    records = election_records(tuning, election, "auc")
    assert records == [
        Record("election/tuning/freedom_degree", 0.5, 0),
        Record("election/tuning/features_kept", 6.0, 0),
        Record("election/tuning/validation_auc", 0.81, 0),
        Record("election/tuning/freedom_degree", 0.6, 1),
        Record("election/tuning/features_kept", 4.0, 1),
        # a score that is not a number is left out
        # every feature: no freedom degree
        Record("election/tuning/features_kept", 9.0, 2),
        Record("election/tuning/validation_auc", 0.83, 2),
        Record("election/freedom_degree", 0.5, 0),
        Record("election/features_kept", 3.0, 0),
    ]
    assert election_records(None, None) == []
    assert election_records(None, election) == records[-2:]
