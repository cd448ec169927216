"""The typed model (PooledModel, PredictionSettings, Deployment): payload round trips, the one
check of what a strategy needs from the model, and the committed model files."""

from __future__ import annotations

import dataclasses
import doctest
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

import fedforest.model.pooled_model
from fedforest import PayloadError, PooledForest, PooledForestClassifier, fit_imputers
from fedforest.errors import StrategyUnavailable
from fedforest.federation.evaluation import evaluate_strategies
from fedforest.model.model_files import load_payload, save_payload
from fedforest.model.pooled_model import (
    MODEL_FIELDS,
    Deployment,
    PooledModel,
    PredictionSettings,
    check_strategy,
    load_model,
)
from fedforest.model.site_inputs import SiteInputs
from fedforest.prediction.calibration import fit_calibration, training_prior

DATA = Path(__file__).resolve().parent / "data"
SITE_A = ["x0", "x1", "x2", "x3"]
SHARED = ["x0", "x1"]


def assert_same_payload(a, b, where: str = "payload") -> None:
    """Two payloads are the same: the same keys in the same order, plain values equal, every
    array of the same dtype, shape and bits."""
    assert type(a) is type(b), where
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert_same_payload(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_payload(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.fixture(scope="module")
def parts(two_site_forest, table):
    """Real parts of a site's model: the pooled forest of sites a and b, an intersection
    forest, imputers, standard deviations and a sigmoid calibrator fitted on site a's rows."""
    forest = two_site_forest[0]
    X, y = table
    rf = RandomForestClassifier(n_estimators=6, random_state=3).fit(X[SHARED][:300], y[:300])
    intersection = PooledForest.from_sklearn(rf, SHARED, owner="a")
    imputers = fit_imputers(X[:300], ["x4", "x5"], SHARED, owner="b", random_state=0)
    std = {c: float(X[c].std()) for c in ["x2", "x3", "x4", "x5"]}
    proba = PooledForestClassifier(forest, strategy="mp", random_state=0).predict_proba(
        X[SITE_A][300:400]
    )
    prior = training_prior(forest.value, forest.tree_start[:-1])
    fit = fit_calibration(proba, y[300:400], forest.classes, "sigmoid", train_prior=prior)
    inputs = SiteInputs("a", "y", renames={"x0_local": "x0"}, positive_class=1)
    return {
        "forest": forest,
        "intersection": intersection,
        "imputers": imputers,
        "feature_std": std,
        "calibrator": fit.calibrator,
        "inputs": inputs,
        "X": X,
    }


def full_model(parts, **deployment) -> PooledModel:
    """A site's model with every part, deployed as ``deployment`` says (default: mp,
    calibrated, with the site's input mapping)."""
    choice = {"strategy": "mp", "calibrator": parts["calibrator"], "inputs": parts["inputs"]}
    choice.update(deployment)
    return PooledModel(
        parts["forest"],
        parts["imputers"],
        parts["feature_std"],
        parts["intersection"],
        PredictionSettings(
            depth_threshold=2, voting="soft", seed=7, owner_weights={"a": 3.0, "b": 1.0}
        ),
        Deployment("a", **choice),
    )


# ------------------------------------------------------------------------- round trips
def test_a_model_round_trips_through_its_payload(parts):
    model = full_model(parts)
    payload = model.to_payload()
    assert list(payload) == ["format", "version", *MODEL_FIELDS]
    assert (payload["format"], payload["version"]) == ("fedforest/model", 3)
    again = PooledModel.from_payload(payload, sender="site-a")
    assert_same_payload(again.to_payload(), payload)
    assert again.settings == model.settings
    assert again.feature_std == model.feature_std
    assert again.imputers.features == model.imputers.features
    assert again.deployment.inputs == parts["inputs"]
    assert (again.deployment.site, again.deployment.strategy) == ("a", "mp")
    assert again.deployment.calibrator.method == "sigmoid"
    assert again.deployment.guess_weight is None


def test_a_model_round_trips_through_a_file_and_predicts_the_same(parts, tmp_path):
    model = full_model(parts)
    loaded = load_model(save_payload(tmp_path / "pooled_model.npz", model.to_payload()))
    assert_same_payload(loaded.to_payload(), model.to_payload())
    X = parts["X"][SITE_A][400:]
    for strategy in ("mp", "ipr", "local", "intersection"):
        a = PooledForestClassifier.from_model(model, strategy=strategy, site="a")
        b = PooledForestClassifier.from_model(loaded, strategy=strategy, site="a")
        np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_the_server_model_has_no_deployment_and_only_the_recorded_settings(parts):
    model = PooledModel(parts["forest"], settings=PredictionSettings(seed=3))
    payload = model.to_payload()
    assert payload["deployment"] is None and payload["inputs"] is None
    assert payload["imputers"] is None and payload["intersection"] is None
    assert payload["settings"] == {"seed": 3} and payload["feature_std"] == {}
    again = PooledModel.from_payload(payload)
    assert again.deployment is None and again.settings == PredictionSettings(seed=3)
    assert PredictionSettings().to_payload() == {}


def test_a_deployment_round_trips_on_its_own(parts):
    forest = parts["forest"]
    for deployment in (
        Deployment("a", "mp", parts["calibrator"], None, parts["inputs"]),
        Deployment("a", "wmp", parts["calibrator"], 0.25),  # a version 2 file: no inputs
        Deployment("a", inputs=parts["inputs"]),  # the job chose nothing
    ):
        payload = deployment.to_payload()
        assert list(payload) == ["deployment", "inputs"]
        again = Deployment.from_payload(payload, "site-a", forest=forest)
        assert_same_payload(again.to_payload(), payload)
        assert (again.site, again.strategy, again.guess_weight, again.inputs) == (
            deployment.site,
            deployment.strategy,
            deployment.guess_weight,
            deployment.inputs,
        )
    assert Deployment("a", inputs=parts["inputs"]).to_payload()["deployment"] is None
    assert Deployment.from_payload({"deployment": None, "inputs": None}, forest=forest) is None


def test_a_model_is_frozen(parts):
    model = full_model(parts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.forest = parts["intersection"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.deployment.strategy = "fpv"
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.settings.seed = 1


def test_input_features_are_the_forests_then_the_intersection_forests(parts):
    model = full_model(parts)
    assert model.input_features == list(parts["forest"].feature_names)
    assert PooledModel(parts["intersection"]).input_features == SHARED
    assert model.input_categories == {}


# -------------------------------------------------------------- what a strategy needs
def test_check_strategy_names_what_is_missing(parts):
    forest, inter = parts["forest"], parts["intersection"]
    check_strategy("intersection", forest, inter, None)
    check_strategy("local", forest, None, "b")
    check_strategy("mp", forest, None, None)
    with pytest.raises(StrategyUnavailable) as info:
        check_strategy("intersection", forest, None, "a")
    assert info.value.missing == "intersection_forest" and info.value.strategy == "intersection"
    assert (
        str(info.value)
        == 'strategy="intersection" needs intersection=<the intersection PooledForest>'
    )
    with pytest.raises(StrategyUnavailable) as info:
        check_strategy("park", forest, inter, None)
    assert (info.value.missing, info.value.site) == ("site", None)
    assert str(info.value) == "strategy='park' needs site=<this site's name>"
    with pytest.raises(StrategyUnavailable) as info:
        check_strategy("local", forest, inter, "c")
    assert info.value.owners == ["a", "b"]
    assert str(info.value) == "site='c' trained no tree of this forest; owners are ['a', 'b']"
    with pytest.raises(ValueError, match="is not one of"):
        check_strategy("magic", forest, inter, "a")


def test_a_model_refuses_a_deployment_it_cannot_run(parts):
    with pytest.raises(StrategyUnavailable, match="needs intersection="):
        dataclasses.replace(full_model(parts), intersection=None).check_strategy(
            "intersection", "a"
        )
    model = full_model(parts)
    with pytest.raises(StrategyUnavailable, match="needs intersection="):
        dataclasses.replace(model, intersection=None, deployment=Deployment("a", "intersection"))
    with pytest.raises(StrategyUnavailable, match="site='c' trained no tree"):
        dataclasses.replace(model, deployment=Deployment("c", "park"))
    model.check_strategy("park", "a")


@pytest.mark.parametrize(
    ("edit", "fragments"),
    [
        (
            lambda p: (
                p["deployment"].update(strategy="intersection"),
                p.update(intersection=None),
            ),
            [
                "field 'strategy' is 'intersection' but the model has no intersection forest",
                "expected a strategy the model can run",
            ],
        ),
        (
            lambda p: (p["deployment"].update(site="c", strategy="local"), p.update(inputs=None)),
            [
                "field 'strategy' is 'local' but site 'c' trained no tree of the forest",
                "expected a site among the forest's sites ['a', 'b']",
            ],
        ),
        (
            lambda p: p["deployment"].update(strategy="wmp"),
            ["field 'guess_weight' is null; the 'wmp' strategy needs its fitted weight"],
        ),
        (
            lambda p: p["deployment"].update(site="b"),
            ["field 'inputs.site' is 'a' but the deployment is site 'b''s"],
        ),
        (
            lambda p: p["settings"].update(owner_weights={"a": 1.0}),
            ["'settings.owner_weights' names sites ['a']", "expected the forest's sites"],
        ),
    ],
    ids=["no-intersection", "not-an-owner", "no-weight", "other-site", "weights"],
)
def test_a_payload_it_cannot_run_is_refused_naming_the_sender_and_field(parts, edit, fragments):
    payload = full_model(parts).to_payload()
    edit(payload)
    with pytest.raises(PayloadError) as info:
        PooledModel.from_payload(payload, sender="model.npz")
    message = str(info.value)
    assert message.startswith("payload from 'model.npz' refused: ")
    for fragment in fragments:
        assert fragment in message, message


def test_the_estimators_and_the_evaluation_refuse_by_the_same_check(parts):
    forest, X = parts["forest"], parts["X"][SITE_A][400:]
    with pytest.raises(StrategyUnavailable, match="needs site="):
        PooledForestClassifier(forest, strategy="local").predict_proba(X)
    with pytest.raises(StrategyUnavailable, match="needs intersection="):
        PooledForestClassifier(forest, strategy="intersection").predict_proba(X)
    model = PooledModel(forest)
    y = np.zeros(len(X), dtype=int)
    with pytest.raises(StrategyUnavailable, match="site='c' trained no tree"):
        evaluate_strategies(model, X, y, forest.classes, ["park"], site="c", resamples=0)
    # without an intersection forest that row is left unscored, the others scored
    rows = evaluate_strategies(
        model, X, y, forest.classes, ["intersection", "mp"], site="a", metrics=["accuracy"]
    )
    assert rows["intersection"]["accuracy"] is None and rows["mp"]["accuracy"] is not None


# ----------------------------------------------------------------- committed model files
@pytest.mark.parametrize("name", ["model_v1.npz", "model_v2.npz"])
def test_the_committed_model_files_still_load(name, tmp_path):
    raw = load_payload(DATA / name)
    model = load_model(DATA / name)
    assert isinstance(model, PooledModel) and isinstance(model.forest, PooledForest)
    assert model.intersection is None or isinstance(model.intersection, PooledForest)
    if raw["version"] == 1:
        assert model.deployment is None
        assert model.settings == PredictionSettings(depth_threshold=1, voting="soft", seed=0)
    else:  # version 2: the job's choice for site-a, no input mapping
        assert model.deployment.site == "site-a" and model.deployment.inputs is None
        assert model.deployment.strategy == raw["deployment"]["strategy"]
    # written again, the model is a version 3 file that loads as the same model
    again = load_model(save_payload(tmp_path / "again.npz", model.to_payload()))
    assert load_payload(tmp_path / "again.npz")["version"] == 3
    assert_same_payload(again.to_payload(), model.to_payload())


def test_the_committed_version_2_file_predicts_its_committed_predictions():
    model = load_model(DATA / "model_v2.npz")
    rows = pd.read_csv(DATA / "model_v2_rows.csv")
    expected = pd.read_csv(DATA / "model_v2_predictions.csv")
    deployed = model.deployment
    clf = PooledForestClassifier.from_model(model, strategy=deployed.strategy, site=deployed.site)
    proba = deployed.calibrator.transform(clf.predict_proba(rows))
    columns = [c for c in expected.columns if c.startswith("p_")]
    np.testing.assert_allclose(expected[columns].to_numpy(), proba, rtol=0, atol=1e-15)


def test_the_module_examples():
    result = doctest.testmod(fedforest.model.pooled_model)
    assert result.failed == 0 and result.attempted > 0
