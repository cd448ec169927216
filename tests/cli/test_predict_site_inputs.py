"""What a hospital deploys is what it trained: its own file through ``fedforest predict``.

A real in-process job (the demo hospitals, real scikit-learn forests) in which
site-2 renames a column, maps its text labels onto the job's classes, has a
text categorical column with a level its privacy policy hides, and an
identifier it never reads. The job's evaluation of site-2's test rows is
recorded as it happens (the real ``predict_proba`` of the job's classifiers,
called through), and site-2's own CSV through ``fedforest predict --model``,
with no option, must give those very numbers for those rows, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from federation.test_site import make_job
from fedforest.cli import main
from fedforest.federation.driver import InProcessExchange, JobDriver
from fedforest.federation.server import JobServer
from fedforest.model.model_files import load_payload, save_payload
from fedforest.model.pooled_model import load_model
from fedforest.prediction.classifier import PooledForestClassifier

SITE = "site-2"


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """The job run; site-2's saved model, its CSV and the evaluation's probabilities."""
    folder = tmp_path_factory.mktemp("site_inputs")
    changes = {
        SITE: {
            "drop_columns": ["pid"],
            "label_map": {"no": 0, "yes": 1},
            "privacy": {"min_level_rows": 5},
        }
    }
    config, runners = make_job(
        folder,
        rows=160,
        n_estimators=6,
        site_changes=changes,
        election={"always_keep": ["smoker"]},  # a text categorical among the features
    )
    csv = folder / "data" / f"{SITE}.csv"
    frame = pd.read_csv(csv)
    frame["outcome"] = frame["outcome"].map({0: "no", 1: "yes"})
    frame.loc[[3, 40], "smoker"] = "occasionally"  # rarer than min_level_rows: hidden
    frame.insert(0, "pid", [f"{i:05d}" for i in range(len(frame))])  # leading zeros
    frame.to_csv(csv, index=False)
    for runner in runners.values():
        runner.load()
    seen: dict = {}
    real = PooledForestClassifier.predict_proba

    def recording(self, X, **kwargs):
        proba = real(self, X, **kwargs)
        if self.site == SITE:  # the evaluation scores each strategy's test rows once
            seen[self.strategy] = (X.index.to_numpy().copy(), proba.copy())
        return proba

    run_dir = folder / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PooledForestClassifier, "predict_proba", recording)
        exchange = InProcessExchange(runners, save_root=run_dir)
        results = JobDriver(JobServer(config), exchange, run_dir=run_dir).run()
    assert results.finished, results.error
    return run_dir / SITE / "pooled_model.npz", csv, seen, runners[SITE]


def _predict(tmp_path, capsys, *args):
    out = tmp_path / f"pred-{len(list(tmp_path.iterdir()))}.csv"
    assert main(["predict", *args, "--out", str(out)]) == 0
    return pd.read_csv(out, dtype=object), capsys.readouterr().err


def test_the_saved_model_carries_the_sites_input_mapping(deployed):
    path, _, _, runner = deployed
    inputs = load_model(path).deployment.inputs
    assert inputs.site == SITE and inputs.target == "outcome"
    assert inputs.renames == {"glucose_mg_dl": "glucose"}
    assert inputs.drop_columns == ("pid",)
    assert inputs.label_map == (("no", 0), ("yes", 1))
    assert inputs.hidden_levels == {"smoker": ("occasionally",)}
    assert inputs.positive_class == 1
    assert inputs.hidden_levels == {k: tuple(v) for k, v in runner.hidden.items()}
    assert load_payload(path)["version"] == 3
    forest = load_model(path).forest  # the text categorical is a feature, "(other)" a level
    assert "smoker" in forest.feature_names and "(other)" in forest.categories["smoker"]


def test_the_sites_own_file_gives_the_evaluations_predictions_bit_for_bit(
    deployed, tmp_path, capsys
):
    path, csv, seen, runner = deployed
    pred, err = _predict(tmp_path, capsys, "--model", str(path), "--data", str(csv))
    rows, expected = seen["auto"]
    assert np.array_equal(rows, runner.X_test.index.to_numpy())
    got = pred[["p_outcome=no", "p_outcome=yes"]].astype(float).to_numpy()[rows]
    assert got.tobytes() == expected.tobytes()  # every bit
    # the prediction in the site's own labels, its header naming the target
    assert list(pred.columns) == ["predicted_outcome", "p_outcome=no", "p_outcome=yes"]
    assert set(pred["predicted_outcome"]) <= {"no", "yes"}
    labels = np.where(expected.argmax(axis=1) == 1, "yes", "no")
    assert pred["predicted_outcome"].to_numpy()[rows].tolist() == labels.tolist()
    # what was done, in the site's words
    assert f"renames from the model (site {SITE}'s): glucose_mg_dl -> glucose" in err
    assert f"not read (site {SITE}'s drop_columns): pid" in err
    assert "ignoring columns the model does not use: " in err and "outcome" in err
    forest = load_model(path).forest
    own = set(runner.X_test.columns)
    for feature in forest.feature_names:  # the others' features are absent, named
        assert (f"\n{feature}: absent (" in err) == (feature not in own), feature


def test_a_missing_renamed_column_is_named_in_the_sites_words_with_its_share(
    deployed, tmp_path, capsys
):
    path, csv, _, _ = deployed
    rows = pd.read_csv(csv).drop(columns=["glucose_mg_dl"])
    rows.to_csv(tmp_path / "no_glucose.csv", index=False)
    forest = load_model(path).forest
    j = forest.feature_names.index("glucose")
    share = (forest.feature == j).sum() / (forest.feature >= 0).sum()
    _, err = _predict(
        tmp_path, capsys, "--model", str(path), "--data", str(tmp_path / "no_glucose.csv")
    )
    assert (
        f"glucose_mg_dl (the model's glucose): absent ({share:.0%} of the forest's splits)" in err
    )


def test_rename_extends_the_models_renames_and_wins_for_the_same_column(deployed, tmp_path, capsys):
    path, csv, seen, _ = deployed
    rows = pd.read_csv(csv)
    rows["glu"] = rows["glucose_mg_dl"]
    rows["glucose_mg_dl"] = 0.0  # another measurement now: --rename takes it elsewhere
    rows.to_csv(tmp_path / "glu.csv", index=False)
    data = str(tmp_path / "glu.csv")
    renames = "glucose_mg_dl=glucose_before,glu=glucose"
    pred, err = _predict(
        tmp_path, capsys, "--model", str(path), "--data", data, "--rename", renames
    )
    assert "renames from --rename: glucose_mg_dl -> glucose_before, glu -> glucose" in err
    assert "renames from the model" not in err
    assert "ignoring columns the model does not use: glucose_mg_dl, " in err  # its own name
    index, expected = seen["auto"]
    got = pred[["p_outcome=no", "p_outcome=yes"]].astype(float).to_numpy()[index]
    assert got.tobytes() == expected.tobytes()


def test_id_columns_come_first_unchanged(deployed, tmp_path, capsys):
    path, csv, _, _ = deployed
    pred, _ = _predict(
        tmp_path, capsys, "--model", str(path), "--data", str(csv), "--id", "pid", "--id", "age"
    )
    raw = pd.read_csv(csv, dtype=str)
    assert list(pred.columns[:2]) == ["pid", "age"]
    assert pred["pid"].tolist() == raw["pid"].tolist()  # "00007" stays "00007"
    assert pred["pid"].iloc[7] == "00007"
    assert pred["age"].tolist() == raw["age"].tolist()


def test_an_unknown_id_column_is_refused_naming_the_file_and_its_columns(deployed, capsys):
    path, csv, _, _ = deployed
    assert main(["predict", "--model", str(path), "--data", str(csv), "--id", "patient"]) == 1
    err = capsys.readouterr().err
    assert f"--id 'patient' is not a column of {csv}; its columns: pid, age" in err


def test_a_file_with_no_model_feature_is_named_with_what_it_has(deployed, tmp_path, capsys):
    path, csv, _, _ = deployed
    rows = pd.read_csv(csv)[["pid", "outcome"]]
    rows.to_csv(tmp_path / "ids.csv", index=False)
    data = tmp_path / "ids.csv"
    assert main(["predict", "--model", str(path), "--data", str(data)]) == 1
    err = capsys.readouterr().err
    assert f"--data {data} has none of the model's features: it has pid, outcome" in err
    assert "the model expects some of" in err and "glucose_mg_dl (the model's glucose)" in err
    assert "X has no columns" not in err


def test_an_edited_mapping_is_refused_naming_the_file_and_field(deployed, tmp_path):
    from fedforest.errors import PayloadError

    path, _, _, _ = deployed
    payload = load_payload(path)
    for field, value, message in [
        ("renames", {"a": "glucose", "b": "glucose"}, "maps several columns onto"),
        ("label_map", [["no", 7]], "is not a class of the forest"),
        ("label_map", [["no", 0], ["no", 1]], "a second time"),
        ("positive_class", 0, "the forest's second class"),
        ("target", "glucose", "a feature of the forest"),
        ("site", "site-9", "inputs.site"),
        ("hidden_levels", {"smoker": "occasionally"}, "hidden_levels.smoker"),
        ("drop_columns", ["glucose_mg_dl"], "which 'renames' renames"),
        ("extra", 1, "unknown fields"),
    ]:
        bad = {**payload, "inputs": {**payload["inputs"], field: value}}
        target = save_payload(tmp_path / f"bad-{field}.npz", bad)
        with pytest.raises(PayloadError, match=message) as err:
            load_model(target)
        assert str(target) in str(err.value), field
