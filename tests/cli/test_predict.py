"""``fedforest predict``: a saved model applied to a CSV of new rows (more in
``test_predict_inputs``, ``test_predict_outputs``, ``test_predict_site_inputs`` and
``test_predict_deployment``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedforest.cli import main


def test_predict_applies_a_saved_model_to_new_rows(tmp_path, capsys, two_site_forest, table):
    import numpy as np
    import pandas as pd

    from fedforest import PooledForestClassifier, fit_imputers
    from fedforest.model.model_files import save_payload
    from fedforest.model.pooled_model import PooledModel, PredictionSettings

    forest, _, _ = two_site_forest
    X, _ = table
    imps = fit_imputers(X[:300], ["x2", "x3", "x4", "x5"], ["x0", "x1"], random_state=0)
    std = X.std().to_dict()
    path = save_payload(
        tmp_path / "model",
        PooledModel(forest, imps, std, settings=PredictionSettings(seed=3)).to_payload(),
    )
    # a hospital with columns x0, x1, x2 under a local name, plus an id column
    rows = X[["x0", "x1", "x2"]][500:].rename(columns={"x2": "local_x2"}).assign(pid=1)
    rows.to_csv(tmp_path / "new.csv", index=False)
    out = tmp_path / "pred.csv"
    code = main(
        [
            "predict",
            "--model",
            str(path),
            "--data",
            str(tmp_path / "new.csv"),
            "--strategy",
            "mp",
            "--rename",
            "local_x2=x2",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    assert "ignoring columns the model does not use: pid" in captured.err
    pred = pd.read_csv(out)
    expected = PooledForestClassifier(forest, strategy="mp", imputers=imps, feature_std=std)
    proba = expected.predict_proba(X[["x0", "x1", "x2"]][500:])
    assert np.allclose(pred[["p_0", "p_1"]].to_numpy(), proba)
    assert list(pred["prediction"]) == list(proba.argmax(axis=1))


def test_predict_refuses_a_file_that_is_not_a_model(tmp_path, capsys):
    bogus = tmp_path / "model.npz"
    bogus.write_bytes(b"not a model")
    data = tmp_path / "d.csv"
    data.write_text("a\n1\n")
    assert main(["predict", "--model", str(bogus), "--data", str(data)]) == 1
    assert "not a fedforest payload file" in capsys.readouterr().err


def wmp_model(folder: Path, two_site_forest, table):
    """A pooled model saved in a site's job folder, a CSV of rows lacking x3, x4 and x5, and
    what the model predicts for them with a strategy (and guess weight)."""
    from fedforest import fit_imputers
    from fedforest.model.model_files import save_payload
    from fedforest.model.pooled_model import PooledModel, PredictionSettings

    forest, _, _ = two_site_forest
    X, _ = table
    imps = fit_imputers(X[:300], ["x2", "x3", "x4", "x5"], ["x0", "x1"], random_state=0)
    std = X.std().to_dict()
    folder.mkdir()
    model = save_payload(
        folder / "pooled_model.npz",
        PooledModel(forest, imps, std, settings=PredictionSettings(seed=3)).to_payload(),
    )
    rows = X[["x0", "x1", "x2"]][500:]
    data = folder.parent / "new.csv"
    rows.to_csv(data, index=False)

    def proba(strategy: str, weight="auto"):
        from fedforest import PooledForestClassifier

        clf = PooledForestClassifier(
            forest,
            strategy=strategy,
            guess_weight=weight,
            imputers=imps,
            feature_std=std,
            random_state=3,
        )
        return clf.predict_proba(rows)

    return model, data, proba


def test_predict_with_wmp_takes_the_guess_weight_given_or_the_sites_fitted_one(
    tmp_path, capsys, two_site_forest, table
):
    import json

    import pandas as pd

    model, data, proba = wmp_model(tmp_path / "site-1", two_site_forest, table)
    predict = ["predict", "--model", str(model), "--data", str(data), "--strategy", "wmp"]
    out = tmp_path / "pred.csv"
    # given: that weight; the rows lack x3-x5, so trees guess and the weight matters
    assert main([*predict, "--guess-weight", "0.5", "--out", str(out)]) == 0
    assert "guess weight" not in capsys.readouterr().err
    got = pd.read_csv(out)[["p_0", "p_1"]].to_numpy()
    assert np.allclose(got, proba("wmp", 0.5))
    assert not np.allclose(got, proba("mp"))
    # neither given nor saved beside the model: refused, naming --guess-weight
    metrics = model.parent / "metrics.json"
    assert not metrics.exists()
    assert main([*predict, "--out", str(out), "--overwrite"]) == 1
    err = capsys.readouterr().err
    assert "--guess-weight" in err and str(metrics) in err and "Traceback" not in err
    # the site's fitted weight, from the job's metrics.json beside the model
    saved = {"site": "site-1", "strategies": {"mp": {"auprc": 0.9}, "wmp": {"guess_weight": 0.1}}}
    metrics.write_text(json.dumps(saved))
    assert main([*predict, "--out", str(out), "--overwrite"]) == 0
    assert f"guess weight 0.1 from {metrics}" in capsys.readouterr().err
    assert np.allclose(pd.read_csv(out)[["p_0", "p_1"]].to_numpy(), proba("wmp", 0.1))
    assert not np.allclose(proba("wmp", 0.1), proba("wmp", 0.5))
    # --guess-weight wins over the saved weight
    assert main([*predict, "--guess-weight", "0", "--out", str(out), "--overwrite"]) == 0
    assert "guess weight" not in capsys.readouterr().err
    assert np.allclose(pd.read_csv(out)[["p_0", "p_1"]].to_numpy(), proba("wmp", 0.0))
    # a metrics.json without a usable weight is refused as if there were none
    for bad in (
        {"strategies": {"mp": {}}},
        {"strategies": {"wmp": {"guess_weight": 1.5}}},
        {"strategies": {"wmp": {"guess_weight": "x"}}},
        {"strategies": {"wmp": {}}},
    ):
        metrics.write_text(json.dumps(bad))
        assert main([*predict, "--out", str(out), "--overwrite"]) == 1
        assert "--guess-weight" in capsys.readouterr().err, bad
    metrics.write_text("not json")
    assert main([*predict, "--out", str(out), "--overwrite"]) == 1
    assert "--guess-weight" in capsys.readouterr().err


@pytest.mark.parametrize("weight", ["1.5", "-0.1", "x", "nan"])
def test_predict_refuses_a_guess_weight_outside_zero_to_one(capsys, weight):
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "predict",
                "--model",
                "m",
                "--data",
                "d",
                "--strategy",
                "wmp",
                "--guess-weight",
                weight,
            ]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --guess-weight: " in err and "[0, 1]" in err


def test_a_survival_model_predicts_a_risk_and_survival_at_the_horizons(
    tmp_path, capsys, survival_job
):
    import numpy as np
    import pandas as pd

    from fedforest import PooledForestSurvival
    from fedforest.federation.model_input import model_input
    from fedforest.model.pooled_model import load_model

    job, folder = survival_job
    model_path = folder / "saved" / "site-2" / "pooled_model.npz"
    model = load_model(model_path)
    grid = model.forest.times
    rows = pd.read_csv(folder / "data" / "site-2.csv").head(20)
    rows.drop(columns=["days", "recurrence"]).to_csv(tmp_path / "new.csv", index=False)
    horizons = [float(grid[0]), float((grid[2] + grid[3]) / 2), float(grid[-1])]
    out = tmp_path / "pred.csv"
    args = ["predict", "--model", str(model_path), "--data", str(tmp_path / "new.csv")]
    times = ",".join(f"{t:g}" for t in horizons)
    assert main([*args, "--times", times, "--out", str(out)]) == 0
    pred = pd.read_csv(out)
    assert list(pred.columns) == ["risk", *(f"survival_at_{t:g}" for t in horizons)]
    # the deployed strategy's curves, read at the last grid time at or before each horizon
    deployed = model.deployment
    expected = PooledForestSurvival.from_model(
        model, strategy=deployed.strategy, site="site-2", guess_weight=deployed.guess_weight
    )
    new = rows.drop(columns=["days", "recurrence"])
    X = model_input(
        new, deployed.inputs, model.input_features, model.input_categories, unseen_missing=True
    ).X
    curves = expected.predict_survival_function(X, return_array=True)
    np.testing.assert_allclose(pred["risk"], expected.predict(X))
    np.testing.assert_allclose(pred[f"survival_at_{horizons[1]:g}"], curves[:, 2])
    np.testing.assert_allclose(pred[f"survival_at_{horizons[2]:g}"], curves[:, -1])
    # a horizon outside the grid is refused, naming the grid's range
    capsys.readouterr()
    beyond = f"{float(grid[-1]) + 1:g}"
    assert main([*args, "--times", beyond]) == 1
    err = capsys.readouterr().err
    assert f"--times {beyond} is outside the model's time grid [{grid[0]:g}, {grid[-1]:g}]" in err
