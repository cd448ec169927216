"""``fedforest experiment --site-files``: the job's rules on the files."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedforest.cli import main

COMMON = ["--reps", "1", "--trees", "3", "--methods", "local", "--metrics", "auc", "--no-report"]


def frame(n=80, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(20, 90, n).astype(float),
            "bmi": rng.normal(27, 4, n).round(1),
            "smoker": rng.choice(["never", "former"], n),
            "y": np.arange(n) % 2,
        }
    )


def run(tmp_path, frames: dict, capsys) -> tuple[int, str]:
    paths = []
    for name, table in frames.items():
        path = tmp_path / f"{name}.csv"
        table.to_csv(path, index=False)
        paths.append(str(path))
    argv = ["experiment", "--site-files", *paths, "--target", "y", *COMMON]
    code = main([*argv, "--out", str(tmp_path / "out")])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("spelling", ["BMI", "Bmi", "bmi\u200b"])
def test_column_names_that_read_alike_across_files_are_refused(tmp_path, capsys, spelling):
    code, err = run(
        tmp_path,
        {"north": frame(), "south": frame(seed=1).rename(columns={"bmi": spelling})},
        capsys,
    )
    assert code == 1 and "south.csv" in err and "Traceback" not in err
    if "\u200b" in spelling:  # refused in its own file first, as a site refuses it
        assert 'column "bmi\\u200b" holds the invisible' in err and "U+200B" in err
        assert "correct the header (write 'bmi')" in err
    else:
        assert "column names differ only by case" in err and "north.csv" in err
    assert not (tmp_path / "out").exists()


def test_levels_that_read_alike_across_files_are_refused(tmp_path, capsys):
    upper = frame(seed=1)
    upper["smoker"] = upper["smoker"].str.upper()
    code, err = run(tmp_path, {"north": frame(), "south": upper}, capsys)
    assert code == 1 and "levels of categorical column 'smoker'" in err
    assert "'NEVER' at 'south'" in err


def test_labels_of_two_types_are_refused_not_a_type_error(tmp_path, capsys):
    words = frame(seed=1)
    words["y"] = np.where(words["y"] == 1, "yes", "no")
    code, err = run(tmp_path, {"north": frame(), "south": words}, capsys)
    assert code == 1 and "class labels have different types" in err
    assert "TypeError" not in err and "Traceback" not in err


def test_two_columns_that_read_alike_in_one_file_are_refused(tmp_path, capsys):
    code, err = run(tmp_path, {"north": frame().assign(BMI=1.0), "south": frame(seed=1)}, capsys)
    assert code == 1 and "site file" in err and "north.csv" in err and "read alike" in err


def test_one_table_twice_is_refused(tmp_path, capsys):
    first = tmp_path / "north.csv"
    frame().to_csv(first, index=False)
    os.link(first, tmp_path / "south.csv")
    argv = ["experiment", "--site-files", str(first), str(tmp_path / "south.csv"), "--target", "y"]
    assert main([*argv, *COMMON, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "hard link" in err and "one table per site" in err


def test_the_validation_option_defaults_to_the_papers_holdout(tmp_path, capsys):
    paths = []
    for name, seed in (("a", 0), ("b", 1)):
        frame(seed=seed).to_csv(tmp_path / f"{name}.csv", index=False)
        paths.append(str(tmp_path / f"{name}.csv"))
    argv = ["experiment", "--site-files", *paths, "--target", "y", "--reps", "1", "--trees", "3"]
    argv += ["--metrics", "auc", "--no-report"]
    out = tmp_path / "out"
    code = main([*argv, "--methods", "local,wmp", "--out", str(out)])  # holdout
    assert code == 0, capsys.readouterr().err
    holdout = pd.read_csv(out / "results.csv")
    assert set(holdout["method"]) == {"local", "wmp"}
    code = main([*argv, "--methods", "local,wmp", "--validation", "oob", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    oob = pd.read_csv(out / "results.csv")
    assert set(oob["method"]) == {"local", "wmp"}
    # the same test rows; the forests train on the validation rows too under oob
    assert list(oob["test_rows"]) == list(holdout["test_rows"])
    assert not np.array_equal(oob["value"], holdout["value"])
    # without a fitted method no validation rows are held out either way: the same rows
    code = main([*argv, "--methods", "local", "--validation", "oob", "--out", str(tmp_path / "o")])
    assert code == 0
    again = main([*argv, "--methods", "local", "--out", str(tmp_path / "h")])
    assert again == 0
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "o" / "results.csv"), pd.read_csv(tmp_path / "h" / "results.csv")
    )


def docs_command(marker: str) -> list[str]:
    """The arguments of the ``fedforest experiment`` command of docs/experiments.md that holds
    ``marker`` (continuation lines joined)."""
    page = Path(__file__).resolve().parents[2] / "docs" / "experiments.md"
    text = page.read_text().replace("\\\n", " ")
    [line] = [line for line in text.splitlines() if marker in line]
    words = shlex.split(line)
    assert words[:2] == ["fedforest", "experiment"]
    return words[1:]


def test_out_of_bag_validation_fits_auto_wmp_and_the_calibration(tmp_path, capsys):
    # the command docs/experiments.md shows: a bundled table, few trees, auto, wmp and the
    # calibration fitted out of bag
    argv = docs_command("--validation oob --out experiments/wine-oob")
    out = tmp_path / "oob"
    argv[argv.index("--out") + 1] = str(out)
    assert main(argv) == 0, capsys.readouterr().err
    results = pd.read_csv(out / "results.csv")
    assert set(results["method"]) == {"local", "mp", "auto", "wmp"}
    assert set(results["metric"]) == {"auprc", "auc", "mcc"}
    assert len(results) == 3 * 4 * 3 and results["value"].notna().all()
    assert (out / "calibration.csv").is_file() and (out / "report.md").is_file()
    # held out instead: the same test rows, other forests and fits
    held = tmp_path / "holdout"
    argv[argv.index("oob")] = "holdout"
    argv[argv.index("--out") + 1] = str(held)
    assert main([*argv, "--no-report"]) == 0, capsys.readouterr().err
    holdout = pd.read_csv(held / "results.csv")
    assert list(holdout["test_rows"]) == list(results["test_rows"])
    assert not np.array_equal(holdout["value"], results["value"])
    # auto's comparisons by another metric, out of bag
    argv[argv.index("holdout")] = "oob"
    argv[argv.index("--out") + 1] = str(tmp_path / "brier")
    assert main([*argv, "--no-report", "--auto-metric", "brier"]) == 0, capsys.readouterr().err
    assert pd.read_csv(tmp_path / "brier" / "results.csv")["value"].notna().all()


def test_a_survival_experiment_writes_its_table_and_report(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["experiment", "veterans", "--task", "survival", "--sites", "2", "--jaccards", "0.5"]
    argv += ["--reps", "1", "--trees", "3", "--methods", "local,mp,wmp,auto"]
    argv += ["--metrics", "cindex,uno_cindex,ibs,td_auc", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "mean cindex (veterans)" in printed and f"report: {out / 'report.md'}" in printed
    tidy = pd.read_csv(out / "results.csv")
    assert len(tidy) == 2 * 4 * 4
    assert set(tidy["metric"]) == {"cindex", "uno_cindex", "ibs", "td_auc"}
    assert set(tidy["method"]) == {"local", "mp", "wmp", "auto"}
    assert set(tidy["dataset"]) == {"veterans"} and set(tidy["n_sites"]) == {2}
    ranked = tidy[tidy["metric"] != "ibs"]["value"]
    assert ranked.between(0, 1).all()
    assert tidy[tidy["metric"] == "ibs"]["value"].between(0, 0.5).all()
    assert (tidy["events"] >= 2).all() and (tidy["events"] <= tidy["test_rows"]).all()
    assert "veterans" in (out / "report.md").read_text()


def test_a_survival_option_of_classification_is_refused_by_name(tmp_path, capsys):
    argv = ["experiment", "gbsg2", "--task", "survival", "--calibration", "sigmoid"]
    assert main([*argv, "--out", str(tmp_path / "out")]) != 0
    assert "calibration='sigmoid' (--calibration) is classification's" in capsys.readouterr().err


def test_a_survival_experiment_validates_out_of_bag(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["experiment", "gbsg2", "--task", "survival", "--sites", "2", "--jaccards", "0.5"]
    argv += ["--reps", "1", "--trees", "3", "--methods", "mp,wmp,auto", "--validation", "oob"]
    assert main([*argv, "--no-report", "--out", str(out)]) == 0
    tidy = pd.read_csv(out / "results.csv")
    assert len(tidy) == 2 * 3 * 2 and set(tidy["metric"]) == {"cindex", "ibs"}
    assert tidy["value"].notna().all()
    # 343 rows a site, 86 of them test rows (the same as under holdout)
    assert set(tidy["test_rows"]) == {86}
