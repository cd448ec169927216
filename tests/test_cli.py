from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fedforest import STRATEGIES
from fedforest.cli import main


def test_strategies_lists_every_strategy(capsys):
    assert main(["strategies"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == [*STRATEGIES, "auto"]


def test_console_script_runs():
    done = subprocess.run(
        [sys.executable, "-m", "fedforest.cli", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "fedforest" in done.stdout


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out


def test_elect_prints_votes_and_mask(tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parent / "federation"))
    from test_offline import site_tables

    paths = []
    for site, frame in site_tables(4, rows=200).items():
        path = tmp_path / f"{site}.csv"
        frame.to_csv(path, index=False)
        paths.append(str(path))
    out_json = tmp_path / "election.json"
    code = main(
        [
            "elect",
            *paths,
            "--target",
            "y",
            "--selectors",
            "lasso,f_classif,none",
            "--auto-tune",
            "--tuning-rounds",
            "3",
            "--json",
            str(out_json),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "elected: " in text and "tuning history" in text
    assert "s2" in text and "-" in text  # s2 only at site a: others abstain
    import json

    saved = json.loads(out_json.read_text())
    assert saved["election"]["selected"] and len(saved["tuning"]["history"]) >= 1


def test_elect_errors_are_reported(tmp_path, capsys):
    assert main(["elect", str(tmp_path / "missing.csv"), "x.csv", "--target", "y"]) == 1
    assert "no such CSV file" in capsys.readouterr().err


def test_predict_applies_a_saved_model_to_new_rows(tmp_path, capsys, two_site_forest, table):
    import numpy as np
    import pandas as pd

    from fedforest import PooledForestClassifier, fit_imputers
    from fedforest.model.model_files import model_bundle, save_payload

    forest, _, _ = two_site_forest
    X, _ = table
    imps = fit_imputers(X[:300], ["x2", "x3", "x4", "x5"], ["x0", "x1"], random_state=0)
    std = X.std().to_dict()
    path = save_payload(
        tmp_path / "model",
        model_bundle(forest.to_payload(), imps.to_payload(), std, settings={"seed": 3}),
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


def test_experiment_command_writes_tables_plots_and_report(tmp_path, capsys):
    import pandas as pd

    out = tmp_path / "exp"
    code = main(
        [
            "experiment",
            "S-500-Mix",
            "--sites",
            "2,3",
            "--jaccards",
            "0.3,0.7",
            "--reps",
            "2",
            "--trees",
            "10",
            "--methods",
            "intersection,local,fpv,mp",
            "--metrics",
            "auprc,auc",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "mean auprc (S-500-Mix)" in printed and "report:" in printed
    tidy = pd.read_csv(out / "results.csv")
    # (2 + 3 sites) x 4 methods x 2 metrics x 2 overlaps x 2 repetitions
    assert len(tidy) == (2 + 3) * 4 * 2 * 2 * 2
    assert set(tidy["method"]) == {"intersection", "local", "fpv", "mp"}
    for name in (
        "S-500-Mix_auprc_vs_jaccard.png",
        "S-500-Mix_auprc_gain.png",
        "cd_auprc.png",
        "summary_S-500-Mix_auprc.csv",
        "report.md",
    ):
        path = out / name
        assert path.is_file() and path.stat().st_size > 0, name
    assert (out / "S-500-Mix_auprc_gain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "report.md").read_text()
    assert "S-500-Mix_auprc_vs_jaccard.png" in report and "Friedman" in report


def test_predict_reads_categorical_csv_values_as_levels_not_codes(tmp_path, capsys):
    import numpy as np
    import pandas as pd
    from sklearn.ensemble import RandomForestClassifier

    from fedforest import PooledForest
    from fedforest.model.model_files import model_bundle, save_payload

    rng = np.random.default_rng(0)
    stage = rng.choice([1, 2, 3], 300)  # levels "1", "2", "3" -> codes 0, 1, 2
    y = (stage == 3).astype(int)
    X = pd.DataFrame({"stage": stage - 1, "age": rng.normal(size=300)})
    rf = RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(
        rf, ["stage", "age"], "s1", categories={"stage": ["1", "2", "3"]}
    )
    path = save_payload(tmp_path / "m", model_bundle(forest.to_payload()))
    pd.DataFrame({"stage": [3, 1], "age": [0.0, 0.0]}).to_csv(tmp_path / "d.csv", index=False)
    assert (
        main(
            [
                "predict",
                "--model",
                str(path),
                "--data",
                str(tmp_path / "d.csv"),
                "--strategy",
                "fpv",
                "--out",
                str(tmp_path / "p.csv"),
            ]
        )
        == 0
    )
    assert pd.read_csv(tmp_path / "p.csv")["prediction"].tolist() == [1, 0]
