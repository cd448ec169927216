"""``fedforest predict`` deploys what the job chose for the site that saved the model."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedforest import PooledForest, PooledForestClassifier
from fedforest.cli import main
from fedforest.federation.evaluation import evaluate_strategies
from fedforest.federation.site import deployment
from fedforest.model.model_files import load_payload, save_payload
from fedforest.model.pooled_model import PooledModel, PredictionSettings, load_model

SITE_A = ["x0", "x1", "x2", "x3"]


@pytest.fixture(scope="module")
def saved(two_site_forest, table, tmp_path_factory):
    """A site's model as a job saves it: the pooled forest, an intersection forest, the
    pooling weights and the deployment auto chose on site a's validation rows."""
    from sklearn.ensemble import RandomForestClassifier

    forest, _, _ = two_site_forest
    X, y = table
    rf = RandomForestClassifier(n_estimators=10, random_state=4).fit(X[["x0", "x1"]][:300], y[:300])
    inter = PooledForest.from_sklearn(rf, ["x0", "x1"], owner="a")
    weights = {"a": 300.0, "b": 200.0}
    settings = PredictionSettings(seed=0, owner_weights=weights)
    model = PooledModel(forest, intersection=inter, settings=settings)
    fitted: dict = {}
    evaluate_strategies(
        model,
        X[SITE_A][500:],
        y[500:],
        forest.classes,
        ["mp", "auto"],
        site="a",
        X_val=X[SITE_A][400:500],
        y_val=y[400:500],
        calibration="auto",
        models=fitted,
    )
    bundle = dataclasses.replace(model, deployment=deployment(fitted)).to_payload()
    folder = tmp_path_factory.mktemp("deployed")
    path = save_payload(folder / "pooled_model.npz", bundle)
    X[SITE_A][500:].to_csv(folder / "rows.csv", index=False)
    return path, folder / "rows.csv", fitted["auto"], X[SITE_A][500:]


def _predict(args, tmp_path, capsys):
    out = tmp_path / f"pred-{len(list(tmp_path.iterdir()))}.csv"
    assert main(["predict", *args, "--out", str(out)]) == 0
    return pd.read_csv(out), capsys.readouterr().err


def test_predict_uses_the_deployed_strategy_and_calibrator(saved, tmp_path, capsys):
    path, rows, auto, X = saved
    pred, err = _predict(["--model", str(path), "--data", str(rows)], tmp_path, capsys)
    chosen, method = auto.strategy_, auto.calibrator_.method
    assert f"strategy {chosen}, calibration {method}: chosen by the job for site a" in err
    assert np.allclose(pred[["p_0", "p_1"]].to_numpy(), auto.predict_proba(X), atol=1e-12)
    model = load_model(path)
    assert model.deployment.strategy == chosen
    assert model.settings.owner_weights == {"a": 300.0, "b": 200.0}


def test_strategy_overrides_the_deployment_uncalibrated(saved, tmp_path, capsys):
    path, rows, auto, X = saved
    other = "fpv" if auto.strategy_ != "fpv" else "mp"
    pred, err = _predict(
        ["--model", str(path), "--data", str(rows), "--strategy", other], tmp_path, capsys
    )
    assert f"strategy {other} (--strategy), uncalibrated: the job chose {auto.strategy_}" in err
    model = load_model(path)
    expected = PooledForestClassifier(
        model.forest,
        strategy=other,
        owner_weights=model.settings.owner_weights,
        random_state=0,
    ).predict_proba(X)
    assert np.allclose(pred[["p_0", "p_1"]].to_numpy(), expected, atol=1e-12)


def test_another_sites_name_is_refused(saved, tmp_path, capsys):
    path, rows, _, _ = saved
    assert main(["predict", "--model", str(path), "--data", str(rows), "--site", "b"]) == 1
    assert "was saved by site 'a'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(strategy="magic"), "deployment: field 'strategy' is 'magic'"),
        (lambda d: d["calibrator"].update(method="platt"), "calibrator.method is 'platt'"),
        (
            lambda d: d.update(strategy="wmp", guess_weight=None),
            "'wmp' strategy needs its fitted weight",
        ),
        (lambda d: d.update(guess_weight=1.5), "guess_weight"),
        (lambda d: d.update(extra=1), "extra"),
    ],
)
def test_a_tampered_deployment_is_refused_naming_the_field(saved, tmp_path, change, message):
    path, _, _, _ = saved
    payload = load_payload(path)
    bad = copy.deepcopy(payload)
    change(bad["deployment"])
    target = save_payload(tmp_path / "bad.npz", bad)
    from fedforest.errors import PayloadError

    with pytest.raises(PayloadError, match=message):
        load_model(target)


def test_a_model_without_deployment_predicts_with_mp_and_says_so(
    two_site_forest, table, tmp_path, capsys
):
    forest, _, _ = two_site_forest
    X, _ = table
    plain = PooledModel(forest, settings=PredictionSettings(seed=1)).to_payload()
    path = save_payload(tmp_path / "plain", plain)
    X[SITE_A][:40].to_csv(tmp_path / "rows.csv", index=False)
    pred, err = _predict(
        ["--model", str(path), "--data", str(tmp_path / "rows.csv")], tmp_path, capsys
    )
    assert "records no strategy chosen by a job" in err and "using mp, uncalibrated" in err
    expected = PooledForestClassifier(forest, strategy="mp", random_state=1).predict_proba(
        X[SITE_A][:40]
    )
    assert np.allclose(pred[["p_0", "p_1"]].to_numpy(), expected)


def test_a_version_2_model_predicts_as_it_did_when_it_was_written(tmp_path, capsys):
    """``tests/model/data/model_v2.npz`` holds no input mapping: its rows are read by the
    model's own names and the output is what fedforest wrote then, to the character."""
    data = Path(__file__).resolve().parents[1] / "model" / "data"
    out = tmp_path / "pred.csv"
    argv = ["predict", "--model", str(data / "model_v2.npz"), "--data"]
    assert main([*argv, str(data / "model_v2_rows.csv"), "--out", str(out)]) == 0
    assert out.read_text() == (data / "model_v2_predictions.csv").read_text()
    assert "strategy mp, calibration sigmoid: chosen by the job for site site-a" in (
        capsys.readouterr().err
    )
