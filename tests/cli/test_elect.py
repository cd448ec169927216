"""``fedforest elect``: one table per site, and the job's rules on the tables."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from fedforest.cli import main


def write(path, n=80, seed=0, **changes):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.integers(20, 90, n).astype(float),
            "bmi": rng.normal(27, 4, n).round(1),
            "y": np.arange(n) % 2,
        }
    )
    for old, new in changes.items():
        frame = frame.rename(columns={old: new})
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("how", ["hard link", "symbolic link", "copy"])
def test_two_paths_to_one_table_are_refused_naming_both(tmp_path, capsys, how):
    first = write(tmp_path / "north.csv")
    write(tmp_path / "east.csv", seed=2)
    second = tmp_path / "south.csv"
    if how == "hard link":
        os.link(first, second)
    elif how == "symbolic link":
        second.symlink_to(first)
    else:
        second.write_bytes(first.read_bytes())
    code = main(["elect", str(first), str(tmp_path / "east.csv"), str(second), "--target", "y"])
    err = capsys.readouterr().err
    assert code == 1
    assert str(first) in err and str(second) in err and "one table per site" in err
    assert "Traceback" not in err


def test_columns_that_read_alike_in_one_table_or_across_tables_are_refused(tmp_path, capsys):
    one = write(tmp_path / "north.csv")
    other = write(tmp_path / "south.csv", seed=1, bmi="BMI")
    assert main(["elect", str(one), str(other), "--target", "y"]) == 1
    err = capsys.readouterr().err
    assert "column names differ only by case" in err and "'BMI' at 'south'" in err
    both = tmp_path / "west.csv"
    pd.read_csv(one).assign(BMI=1.0).to_csv(both, index=False)
    assert main(["elect", str(both), str(one), "--target", "y"]) == 1
    err = capsys.readouterr().err
    assert "column 'bmi' and column 'BMI' have names that read alike" in err


def test_json_is_written_by_the_output_guard(tmp_path, capsys):
    one, other = write(tmp_path / "north.csv"), write(tmp_path / "south.csv", seed=1)
    argv = ["elect", str(one), str(other), "--target", "y", "--selector", "f_classif"]
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere" / "x.json")
    assert main([*argv, "--json", str(dangling)]) == 1
    assert "is a link to" in capsys.readouterr().err and not dangling.exists()
    locked = tmp_path / "locked.json"
    locked.write_text("{}")
    locked.chmod(0o444)
    assert main([*argv, "--json", str(locked), "--overwrite"]) == 1  # its mode says read-only
    assert "is read-only" in capsys.readouterr().err and locked.read_text() == "{}"
    linked = tmp_path / "linked.json"
    linked.symlink_to(one)
    assert main([*argv, "--json", str(linked), "--overwrite"]) == 1
    assert "is the input file" in capsys.readouterr().err
    out = tmp_path / "election.json"
    assert main([*argv, "--json", str(out)]) == 0
    assert '"election"' in out.read_text() and f"written: {out}" in capsys.readouterr().out


def test_refusals_name_the_table_file(tmp_path, capsys):
    one = write(tmp_path / "north.csv")
    mixed = pd.read_csv(write(tmp_path / "x.csv", seed=1)).astype({"bmi": object})
    mixed.loc[4, "bmi"] = "True"
    mixed.to_csv(tmp_path / "south.csv", index=False)
    argv = ["elect", str(one), str(tmp_path / "south.csv"), "--target", "y"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"site table {tmp_path / 'south.csv'}: column 'bmi' holds numbers but also 1" in err
    assert "(line 6)" in err and "'True' is a boolean, not a number" in err
    words = pd.read_csv(one).assign(bmi=["True", "False"] * 40)
    words.to_csv(tmp_path / "south.csv", index=False)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"site tables {one} (site 'north'), {tmp_path / 'south.csv'} (site 'south')" in err
    assert "its values at 'south': 'False', 'True'" in err and "is a boolean" in err


def test_a_target_that_reads_like_a_column_is_named(tmp_path, capsys):
    one, other = write(tmp_path / "north.csv"), write(tmp_path / "south.csv", seed=1)
    assert main(["elect", str(one), str(other), "--target", "Y"]) == 1
    err = capsys.readouterr().err
    assert "--target 'Y' is not a column" in err and "the column 'y' reads like it" in err


@pytest.mark.parametrize("validation", ["oob", "holdout"])
def test_the_tuning_scores_what_validation_names(tmp_path, capsys, validation):
    from fedforest.federation.offline import run_election

    paths = [write(tmp_path / f"{s}.csv", n=120, seed=i) for i, s in enumerate(("north", "south"))]
    argv = ["elect", *map(str, paths), "--target", "y", "--selector", "f_classif", "--auto-tune"]
    out = tmp_path / "election.json"
    assert (
        main([*argv, "--tuning-rounds", "2", "--validation", validation, "--json", str(out)]) == 0
    )
    text = capsys.readouterr().out
    where = "training rows out of bag" if validation == "oob" else "validation rows"
    assert f"auprc (higher is better), scored on each site's {where}):" in text
    tables = {p.stem: pd.read_csv(p) for p in paths}
    same = run_election(tables, "y", "f_classif", auto_tune=True, tuning_rounds=2,
                        validation=validation)  # fmt: skip
    saved = json.loads(out.read_text())
    assert saved["validation"] == validation
    assert [h.score for h in same.tuning.history] == [
        h["score"] for h in saved["tuning"]["history"]
    ]


def test_an_unknown_validation_mode_is_refused(tmp_path, capsys):
    one, other = write(tmp_path / "north.csv"), write(tmp_path / "south.csv", seed=1)
    with pytest.raises(SystemExit):
        main(["elect", str(one), str(other), "--target", "y", "--validation", "bootstrap"])
    assert "argument --validation: invalid choice: 'bootstrap'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def survival_tables(tmp_path_factory):
    """Two hospitals of GBSG2 (time to recurrence), each lacking one column."""
    from sksurv.datasets import load_gbsg2

    folder = tmp_path_factory.mktemp("survival_elect")
    X, y = load_gbsg2()
    frame = X.copy()
    for column in ("horTh", "menostat", "tgrade"):
        frame[column] = frame[column].cat.codes
    frame["days"], frame["recurrence"] = y["time"], y["cens"].astype(int)
    north, south = folder / "north.csv", folder / "south.csv"
    frame.iloc[:340].drop(columns=["pnodes"]).to_csv(north, index=False)
    frame.iloc[340:].drop(columns=["progrec"]).to_csv(south, index=False)
    return str(north), str(south)


def test_a_survival_election_votes_with_survival_selectors_and_tunes_by_ibs(
    survival_tables, tmp_path, capsys
):
    out = tmp_path / "election.json"
    argv = ["elect", *survival_tables, "--task", "survival", "--time", "days"]
    argv += ["--event", "recurrence", "--selectors", "coxnet,cox_univariate", "--auto-tune"]
    argv += ["--tuning-rounds", "2", "--categorical", "horTh,menostat,tgrade", "-q"]
    assert main([*argv, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ibs (lower is better), scored on each site's training rows out of bag" in text
    saved = json.loads(out.read_text())
    assert saved["task"] == "survival" and saved["metric"] == "ibs"
    history = saved["tuning"]["history"]
    assert len(history) >= 2 and all(0 < h["score"] < 1 for h in history)  # Brier scores
    features = set(saved["election"]["votes"])
    assert {"days", "recurrence"}.isdisjoint(features) and {"pnodes", "progrec"} <= features
    # the same election in process
    from fedforest.federation.offline import run_election

    tables = {
        name: pd.read_csv(path)
        for name, path in zip(("north", "south"), survival_tables, strict=True)
    }
    again = run_election(
        tables,
        None,
        {"north": "coxnet", "south": "cox_univariate"},
        categorical=["horTh", "menostat", "tgrade"],
        auto_tune=True,
        tuning_rounds=2,
        task="survival",
        time="days",
        event="recurrence",
    )
    assert again.election.selected == saved["election"]["selected"] and again.metric == "ibs"
    assert main([*argv, "--metric", "cindex"]) == 0
    assert "cindex (higher is better)" in capsys.readouterr().out


def test_a_regression_election_tunes_by_rmse(tmp_path, capsys):
    rng = np.random.default_rng(0)
    paths = []
    for name in ("east", "west"):
        frame = pd.DataFrame(rng.normal(size=(120, 3)), columns=["a", "b", "c"])
        frame["y"] = 2 * frame["a"] + rng.normal(size=120)
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        paths.append(str(tmp_path / f"{name}.csv"))
    argv = ["elect", *paths, "--task", "regression", "--target", "y", "--auto-tune", "-q"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "rmse (lower is better)" in text and "elected: a" in text


@pytest.mark.parametrize(
    "options, message",
    [
        (["--target", "days"], "--target 'days' with --task survival; allowed: name the outcome"),
        (["--time", "days"], "--task survival needs --event"),
        ([], "--task survival needs --time and --event"),
        (["--time", "days", "--event", "days"], "--time and --event both name 'days'"),
        (["--time", "day", "--event", "recurrence"], "--time 'day' is not a column of"),
        (
            ["--time", "days", "--event", "recurrence", "--metric", "auprc"],
            "--metric 'auprc' does not score a survival model; allowed for --task survival: ibs",
        ),
        (
            ["--time", "days", "--event", "recurrence", "--categorical", "recurrence"],
            "--categorical names the event column 'recurrence' (--event)",
        ),
        (
            ["--time", "days", "--event", "recurrence", "--selector", "lasso"],
            "key 'selector' is 'lasso'; allowed: one of random_forest, coxnet, cox_univariate",
        ),
    ],
)
def test_a_survival_election_refuses_what_it_cannot_use(survival_tables, capsys, options, message):
    assert main(["elect", *survival_tables, "--task", "survival", *options]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_survival_options_are_refused_for_another_task(tmp_path, capsys):
    one, other = write(tmp_path / "north.csv"), write(tmp_path / "south.csv", seed=1)
    assert main(["elect", one.as_posix(), other.as_posix(), "--time", "age"]) == 1
    assert "--time with --task classification; allowed: --time and --event with --task " in (
        capsys.readouterr().err
    )
    assert main(["elect", one.as_posix(), other.as_posix()]) == 1
    assert "--task classification needs --target" in capsys.readouterr().err


def test_tuning_scores_every_feature_unless_told_not_to(tmp_path, capsys):
    paths = [write(tmp_path / f"{s}.csv", n=120, seed=i) for i, s in enumerate(("north", "south"))]
    argv = ["elect", *map(str, paths), "--target", "y", "--selector", "f_classif", "--auto-tune"]
    assert main([*argv, "--tuning-rounds", "2"]) == 0
    history = capsys.readouterr().out.split("tuning history")[1]
    assert "\n   every  " in history  # the second row: every feature
    assert main([*argv, "--tuning-rounds", "2", "--no-tune-every-feature"]) == 0
    assert "every" not in capsys.readouterr().out.split("tuning history")[1]


def test_the_table_says_when_tuning_kept_every_feature():
    from types import SimpleNamespace

    from fedforest.cli.elect import format_election
    from fedforest.election.ballot import Ballot, SiteVote
    from fedforest.election.tuning import hill_climb

    votes = [SiteVote(s, ["age", "bmi"], [True, False], [0.9, 0.1], 50) for s in ("a", "b")]
    tuning = hill_climb(Ballot(votes), len, rounds=2, every_feature=True)
    out = SimpleNamespace(votes=votes, election=tuning.election, tuning=tuning, metric="auprc")
    text = format_election(out, "oob")
    assert "bmi" in text.split("kept (every feature)")[0].splitlines()[-1]
    assert "kept 2 with every feature (tuning scored it best)" in text
    assert "   every     2  2.0000" in text
