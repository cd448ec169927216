"""End-to-end runs of the real NVIDIA FLARE simulator (no mocks)."""

from __future__ import annotations

import json
import math
import re

import pytest

from fedforest import protocol
from fedforest.flare.environments import simulate
from fedforest.flare.recipe import FedForestRecipe
from fedforest.model.pooled_model import load_model
from fedforest.prediction.weighting import GUESS_WEIGHTS
from fedforest.vocabulary import JOB_STRATEGIES

from .faulty_executors import (
    ATTACKS,
    FailingTrainExecutor,
    HostileExecutor,
    MalformedTreeExecutor,
    SlowExecutor,
)
from .flare_setup import DEMO_RUNS, UNCALIBRATED, write_configs

pytestmark = pytest.mark.flare
SITES = ["site-1", "site-2", "site-3"]


def run(configs, tmp_path, custom=None):
    """Run the job's recipe in SimEnv; the results, the server's run folder, the site folders."""
    return simulated(FedForestRecipe(configs, job_custom=custom), tmp_path)


def simulated(recipe, tmp_path):
    """:func:`run` for a recipe already made."""
    run_dir = simulate(recipe, tmp_path / "ws", log_file=tmp_path / "sim.log", timeout=600)
    path = run_dir / "results.json"
    assert path.is_file(), (tmp_path / "sim.log").read_text()[-3000:]
    return json.loads(path.read_text()), run_dir, run_dir.parent.parent


@pytest.mark.xdist_group(DEMO_RUNS)
def test_three_sites_with_different_columns(demo_server_run):
    # the demo configs (write_configs' defaults) in server mode, a run test_swarm_job.py reads too
    results, run_dir, ws = demo_server_run.results, demo_server_run.run_dir, demo_server_run.ws
    assert results["status"] == "finished" and results["dropped_sites"] == {}
    assert sorted(results["metrics"]) == SITES
    for site in SITES:
        per = results["metrics"][site]
        assert set(per) == set(JOB_STRATEGIES)
        for strategy, row in per.items():
            assert 0.3 <= row["auprc"] <= 1.0, (site, strategy)
            assert 0.5 <= row["auc"] <= 1.0, (site, strategy)
            assert -1.0 <= row["mcc"] <= 1.0 and 0 <= row["accuracy"] <= 1
            assert row["rows"] == results["test_rows"][site]
        assert per["auto"]["chosen"] in per
        # the job's calibration (auto) ran at every site: each row says which method it used
        assert all(
            row["calibration"] in ("none", "prior", "sigmoid", "isotonic") for row in per.values()
        )
        assert all(sum(row["bins"]["count"]) == row["rows"] for row in per.values())
        # and which methods it could not fit, if any (site-metrics version 5)
        assert all(
            row["calibration_skipped"] is None or isinstance(row["calibration_skipped"], str)
            for row in per.values()
        )
        assert 0 <= per["mp"]["brier"] <= 1 and per["mp"]["log_loss"] > 0
        # node and wmp run in the job; wmp's weight is the site's own, fitted on its validation rows
        assert per["wmp"]["guess_weight"] in GUESS_WEIGHTS and "guess_weight" not in per["mp"]
    mean = {s: sum(results["metrics"][x][s]["auprc"] for x in SITES) / 3 for s in JOB_STRATEGIES}
    assert mean["mp"] > mean["intersection"] + 0.05
    # election, tuning history, timings and payload sizes are reported
    assert results["election"]["selected"]
    assert 1 <= len(results["tuning"]["history"])
    assert {"schema", "train", "evaluate"} <= set(results["phase_seconds"])
    assert all(results["payload_bytes"][s]["train"] > 1000 for s in SITES)
    report = (run_dir / "report.md").read_text()
    assert "## Test metrics per site and strategy" in report and "site-2" in report
    # each site saved the pooled model, which loads, and its own metrics
    for site in SITES:
        model = load_model(ws / site / "simulate_job" / "pooled_model.npz")
        assert model.forest.n_trees == 90 and model.intersection is not None
        # what the site deploys: auto's choice and its calibrator
        auto = results["metrics"][site]["auto"]
        assert model.deployment.site == site
        assert model.deployment.strategy == auto["chosen"]
        assert model.deployment.calibrator.method == auto["chosen_calibration"]
        # and how its own file becomes the model's input (site-2 renames its glucose column)
        inputs = model.deployment.inputs
        assert inputs.site == site and inputs.target == "outcome"
        renames = {"glucose_mg_dl": "glucose"} if site == "site-2" else {}
        assert inputs.renames == renames
        saved = json.loads((ws / site / "simulate_job" / "metrics.json").read_text())
        assert math.isclose(
            saved["strategies"]["mp"]["auprc"], results["metrics"][site]["mp"]["auprc"]
        )
        assert (
            saved["strategies"]["wmp"]["guess_weight"]
            == results["metrics"][site]["wmp"]["guess_weight"]
        )


#: The faulty sites of :func:`faulty_run`, each a copy of a demo site's YAML and data.
HOSTILE = {f"h-{i}": f"site-{i % 3 + 1}" for i in range(len(ATTACKS))}
FAILING, MALFORMED, VANISHED = "failing-train", "malformed-trees", "vanished-data"


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    """One simulator run of three honest sites beside thirteen faulty ones.

    Ten hostile sites each send one kind of malformed payload (:data:`ATTACKS`),
    one site raises in the train phase (:class:`FailingTrainExecutor`), one
    sends trees whose leaf flags do not describe trees
    (:class:`MalformedTreeExecutor`) and one's data file is gone by the time the
    job starts (it was there when the job was built): every fault at once, in
    one job.
    """
    tmp = tmp_path_factory.mktemp("faulty")
    configs = write_configs(
        tmp,
        rows=200,
        copies={**HOSTILE, FAILING: "site-2", MALFORMED: "site-3", VANISHED: "site-1"},
        # sixteen clients start on a machine the rest of the suite also loads: the schema
        # phase waits for every one of them, so that each fault reaches its own phase
        job={"min_sites": 3, "timeouts": {"schema": 600}},
        forest={"n_estimators": 8},
        election={"auto_tune": False},
        evaluation=UNCALIBRATED,
    )
    faulty = [
        (site, HostileExecutor(site_config="fedforest_site.yaml", attack=attack))
        for site, attack in zip(HOSTILE, ATTACKS, strict=True)
    ]
    faulty += [
        (FAILING, FailingTrainExecutor(site_config="fedforest_site.yaml")),
        (MALFORMED, MalformedTreeExecutor(site_config="fedforest_site.yaml")),
    ]
    recipe = FedForestRecipe(configs, job_custom=faulty)  # validated while the data are there
    (tmp / "data" / f"{VANISHED}.csv").unlink()
    results, run_dir, _ = simulated(recipe, tmp)
    return results, run_dir


def test_a_site_failing_in_train_is_dropped_and_named(faulty_run):
    results, _ = faulty_run
    assert results["status"] == "finished", results.get("error")
    assert "rehearsed fault" in results["dropped_sites"][FAILING]
    assert FAILING not in results["metrics"] and FAILING not in results["model"]["owners"]


def test_a_site_whose_data_vanished_is_dropped_with_the_reason(faulty_run):
    results, _ = faulty_run
    assert results["status"] == "finished", results.get("error")
    reason = results["dropped_sites"][VANISHED]
    assert "ConfigError" in reason and "key 'data_path'" in reason and "file not found" in reason
    assert VANISHED not in results["metrics"] and VANISHED not in results["model"]["owners"]


def test_the_job_fails_clearly_below_min_sites(tmp_path):
    configs = write_configs(
        tmp_path, job={"min_sites": 3}, election={"auto_tune": False}, evaluation=UNCALIBRATED
    )
    faulty = FailingTrainExecutor(site_config="fedforest_site.yaml")
    results, run_dir, _ = run(configs, tmp_path, custom=[("site-1", faulty)])
    assert results["status"] == "failed"
    assert "fewer than min_sites=3" in results["error"] and "site-1" in results["error"]
    assert results["metrics"] == {}
    assert "**Error:**" in (run_dir / "report.md").read_text()


def test_a_malformed_tree_payload_is_refused_and_never_used(faulty_run):
    results, _ = faulty_run
    assert results["status"] == "finished", results.get("error")
    reason = results["dropped_sites"][MALFORMED]
    assert f"payload from '{MALFORMED}' refused" in reason and "leaf_bits" in reason
    assert MALFORMED not in results["model"]["owners"] and MALFORMED not in results["metrics"]


def test_hostile_sites_cost_the_others_nothing(faulty_run):
    """Ten hostile sites, each sending one kind of malformed payload, beside three honest ones
    (and the three other faulty sites of the run)."""
    results, run_dir = faulty_run
    assert (run_dir / "report.md").is_file()
    assert results["status"] == "finished", results.get("error")
    assert sorted(results["metrics"]) == SITES  # every honest site finished
    # no tree of a site refused before pooling was pooled (a site attacking only in the
    # evaluate phase trained honestly, so its trees count)
    honest_in_train = [
        s for s, a in zip(HOSTILE, ATTACKS, strict=True) if ATTACKS[a][0] == "evaluate"
    ]
    assert sorted(results["model"]["owners"]) == sorted(SITES + honest_in_train)
    assert sorted(results["dropped_sites"]) == sorted([*HOSTILE, FAILING, MALFORMED, VANISHED])
    for site, attack in zip(HOSTILE, ATTACKS, strict=True):
        reason = results["dropped_sites"][site]
        phase = protocol.TASK_PHASE[ATTACKS[attack][0]]  # the vote task is the election phase
        assert reason.startswith(phase) and "refused" in reason, (attack, reason)
        assert f"'{site}'" in reason, (attack, reason)


def test_a_slow_site_is_kept_and_one_past_its_timeout_is_dropped_with_the_reason(tmp_path):
    configs = write_configs(
        tmp_path,
        rows=200,
        forest={"n_estimators": 8},
        election={"auto_tune": False},
        evaluation=UNCALIBRATED,
        job={
            "min_sites": 2,
            "timeouts": {"schema": 60, "election": 60, "train": 6.5, "evaluate": 60},
        },
    )
    slow = [
        ("site-2", SlowExecutor(site_config="fedforest_site.yaml", task="train", delay=3)),
        ("site-3", SlowExecutor(site_config="fedforest_site.yaml", task="train", delay=12)),
    ]
    results, _, _ = run(configs, tmp_path, custom=slow)
    assert results["status"] == "finished"
    assert sorted(results["metrics"]) == ["site-1", "site-2"]  # the slow one is kept
    assert list(results["dropped_sites"]) == ["site-3"]
    assert results["dropped_sites"]["site-3"] == (
        "train: no reply within the train timeout of 6.5 s"
    )
    assert 6.5 <= results["phase_seconds"]["train"] < 20


def test_a_regression_job_runs_in_the_simulator(tmp_path):
    """``job.task: regression``: the regression demo's configs, small: every strategy scored
    by RMSE, MAE and R² at every site, and each site keeps a regression model to predict
    with. With ``evaluation.trees_per_site`` below the pool, each site is sent a model of
    its own: its 10 trees and the 10 others its columns reach best."""
    configs = write_configs(
        tmp_path, rows=300, task="regression", forest={"n_estimators": 10},
        election={"tuning_rounds": 2}, evaluation={"trees_per_site": 20},
    )  # fmt: skip
    results, run_dir, ws = run(configs, tmp_path)
    assert results["status"] == "finished", results.get("error")
    assert results["dropped_sites"] == {}
    assert sorted(results["metrics"]) == SITES
    for site in SITES:
        per = results["metrics"][site]
        assert set(per) == set(JOB_STRATEGIES)
        for strategy, row in per.items():
            assert set(row) >= {"rmse", "mae", "r2"} and row["rmse"] > 0, (site, strategy)
            assert row["calibration"] == "none" and row["bins"] is None
        assert per["auto"]["chosen"] in per
        saved = load_model(ws / site / "simulate_job" / "pooled_model.npz")
        assert saved.forest.task == "regression" and saved.forest.n_classes == 0
        assert saved.deployment.calibrator is None
        assert saved.forest.n_trees == 20 and saved.forest.owner_mask(site).sum() == 10
    assert results["model"]["trees"] == 30  # the pooled forest itself keeps every tree
    assert {s: v["trees"] for s, v in results["model"]["site_models"].items()} == {
        s: 20 for s in SITES
    }
    assert results["schema"]["classes"] == []
    assert results["election"]["selected"]
    report = (run_dir / "report.md").read_text()
    assert "| strategy | RMSE | MAE | R² |" in report


def test_a_survival_job_runs_in_the_simulator(tmp_path):
    """``job.task: survival``: the survival demo's configs (GBSG2's three hospitals), small:
    the sites agree a time grid from their coarse event-time quantiles, elect the features
    with survival selectors, every strategy is scored by the survival metrics at every
    site, and each site keeps a survival model on that grid."""
    configs = write_configs(tmp_path, task="survival", forest={"n_estimators": 10})
    results, run_dir, ws = run(configs, tmp_path)
    assert results["status"] == "finished", results.get("error")
    assert results["dropped_sites"] == {} and sorted(results["metrics"]) == SITES
    times = results["schema"]["times"]
    assert 2 <= len(times) <= 30 and times == sorted(set(times))
    assert all(t % 30 == 0 for t in times)  # the sites' 30-day resolution
    assert results["schema"]["classes"] == []
    # the sites voted with coxnet, cox_univariate and a survival forest's importance, and
    # tuned the freedom degree on each mask's integrated Brier score
    elected = results["election"]["selected"]
    assert 0 < len(elected) < len(results["election"]["votes"])
    history = results["tuning"]["history"]
    assert history and all(0.0 < step["score"] < 0.25 for step in history)
    for site in SITES:
        per = results["metrics"][site]
        assert set(per) == set(JOB_STRATEGIES)
        for strategy, row in per.items():
            assert 0.5 <= row["cindex"] <= 1.0, (site, strategy, row)
            assert 0.0 < row["ibs"] < 0.25, (site, strategy, row)
            assert row["calibration"] == "none" and row["bins"] is None
        assert results["test_events"][site] == per["mp"]["events"] > 0
        at = per["mp"]["survival_curves"]["horizons"]  # the job's 1, 2 and 3 years
        assert [h["horizon"] for h in at] == [365.0, 730.0, 1095.0]
        assert all(h["td_auc"] is None or 0.0 <= h["td_auc"] <= 1.0 for h in at)
        assert per["auto"]["chosen"] in per
        saved = load_model(ws / site / "simulate_job" / "pooled_model.npz")
        assert saved.forest.is_survival and saved.forest.times.tolist() == times
        assert set(saved.forest.feature_names) <= set(elected)
        assert saved.deployment.strategy == per["auto"]["chosen"]
    report = (run_dir / "report.md").read_text()
    assert "| strategy | Harrell's C | Uno's C | IBS |" in report


@pytest.mark.xdist_group(DEMO_RUNS)
def test_the_console_shows_one_line_per_round_as_the_job_runs(demo_server_run):
    """The server's progress lines reach the console while the simulator runs; FLARE's own
    output goes to the log file only."""
    lines = [line for line, _ in demo_server_run.progress]
    rounds = sum(not h["reused"] for h in demo_server_run.results["tuning"]["history"])
    phases = [
        "schema",
        "vote",
        *[f"election tuning round {k}" for k in range(1, rounds + 1)],
        "train",
        "evaluate",
    ]
    assert len(lines) == len(phases) + 1 and lines[-1] == "job finished"
    for line, phase in zip(lines, phases, strict=False):
        assert re.fullmatch(rf"{phase}: 3 of 3 sites replied, \d+\.\d s", line), line
    # the lines came before the job had written its results, as it ran (up to the last
    # round's, which the results follow within the follower's 0.25 s)
    assert not any(done for _, done in demo_server_run.progress[:-2])
    # the lines are the server's progress.txt, which stays in its run folder
    assert (demo_server_run.run_dir / "progress.txt").read_text().splitlines() == lines
    # nothing of FLARE's reached the terminal; it is in the log
    shown, log = demo_server_run.terminal.read_text(), demo_server_run.log.read_text()
    for flare_line in ("ClientTaskWorker started to run", "End the Simulator run"):
        assert flare_line in log and flare_line not in shown, shown[:2000]
