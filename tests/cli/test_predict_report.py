"""``fedforest predict`` says what it did, and names its output in the site's words."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from fedforest import PooledForest, PooledForestClassifier, PooledForestRegressor
from fedforest.cli import main
from fedforest.model.model_files import save_payload
from fedforest.model.pooled_model import Deployment, PooledModel, PredictionSettings
from fedforest.model.site_inputs import SiteInputs

COLUMNS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=COLUMNS)
    return X, (X["a"] + X["b"] > 0).astype(int)


def _run(tmp_path, capsys, model, data, *extra):
    out = tmp_path / f"pred-{len(list(tmp_path.iterdir()))}.csv"
    args = ["predict", "--model", str(model), "--data", str(data), *extra, "--out", str(out)]
    assert main(args) == 0
    return pd.read_csv(out), capsys.readouterr().err


def test_absent_features_are_named_with_their_share_of_the_splits(rows, tmp_path, capsys):
    X, y = rows
    rf = RandomForestClassifier(n_estimators=8, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, COLUMNS, "s1")
    model = save_payload(
        tmp_path / "m", PooledModel(forest, settings=PredictionSettings(seed=0)).to_payload()
    )
    data = tmp_path / "rows.csv"
    X[["a"]].assign(**{f"extra_{i}": 1 for i in range(22)}).to_csv(data, index=False)
    pred, err = _run(tmp_path, capsys, model, data)
    internal = forest.feature[forest.feature >= 0]
    for j, name in enumerate(COLUMNS[1:], start=1):
        share = (internal == j).mean()
        assert f"\n{name}: absent ({share:.0%} of the forest's splits)" in err
    assert "\na: absent" not in err
    assert "2 of the model's 3 features are absent from" in err
    extra = ", ".join(f"extra_{i}" for i in range(20))
    assert f"ignoring columns the model does not use: {extra} and 2 more" in err
    # a model without an input mapping: the output as before
    assert list(pred.columns) == ["prediction", "p_0", "p_1"]
    expected = PooledForestClassifier(forest, strategy="mp", random_state=0).predict_proba(X[["a"]])
    assert np.array_equal(pred[["p_0", "p_1"]].to_numpy(), expected)


def test_a_regression_model_names_its_target_in_the_sites_words(rows, tmp_path, capsys):
    X, _ = rows
    rf = RandomForestRegressor(n_estimators=5, random_state=0).fit(X, 3 * X["a"])
    forest = PooledForest.from_sklearn(rf, COLUMNS, "s1")
    inputs = SiteInputs("s1", "days", renames={"stay": "days", "a_local": "a"})
    deployed = Deployment(inputs.site, inputs=inputs)
    bundle = PooledModel(forest, settings=PredictionSettings(seed=0), deployment=deployed)
    bundle = bundle.to_payload()
    model = save_payload(tmp_path / "m", bundle)
    data = tmp_path / "rows.csv"
    X.rename(columns={"a": "a_local"}).to_csv(data, index=False)
    pred, err = _run(tmp_path, capsys, model, data, "--id", "c")
    assert list(pred.columns) == ["c", "predicted_stay"]
    expected = PooledForestRegressor(forest, strategy="mp", random_state=0).predict(X)
    assert np.array_equal(pred["predicted_stay"].to_numpy(), expected)
    assert "renames from the model (site s1's): a_local -> a" in err
    assert "absent" not in err


def test_an_id_column_named_like_the_output_is_refused(rows, tmp_path, capsys):
    X, y = rows
    rf = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    model = save_payload(
        tmp_path / "m", PooledModel(PooledForest.from_sklearn(rf, COLUMNS, "s1")).to_payload()
    )
    data = tmp_path / "rows.csv"
    X.assign(prediction="x").to_csv(data, index=False)
    argv = ["predict", "--model", str(model), "--data", str(data), "--id", "prediction"]
    assert main(argv) == 1
    assert "--id 'prediction': the output already has a column of that name" in (
        capsys.readouterr().err
    )
    assert main([*argv[:-1], "a", "--id", "a"]) == 1
    assert "--id 'a' is given twice" in capsys.readouterr().err
