from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from fedforest.cli import main


def test_console_script_runs():
    done = subprocess.run(
        [sys.executable, "-m", "fedforest.cli", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "fedforest" in done.stdout


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out


def test_elect_prints_votes_and_mask(tmp_path, capsys):
    from federation.test_offline import site_tables

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
    from fedforest.model.model_files import save_payload
    from fedforest.model.pooled_model import PooledModel

    rng = np.random.default_rng(0)
    stage = rng.choice([1, 2, 3], 300)  # levels "1", "2", "3" -> codes 0, 1, 2
    y = (stage == 3).astype(int)
    X = pd.DataFrame({"stage": stage - 1, "age": rng.normal(size=300)})
    rf = RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(
        rf, ["stage", "age"], "s1", categories={"stage": ["1", "2", "3"]}
    )
    path = save_payload(tmp_path / "m", PooledModel(forest).to_payload())
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


# ------------------------------------------------ hardening: nothing of a user's is overwritten

ROOT = Path(__file__).resolve().parents[1]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes (to show a refused command changed nothing)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def small_model(tmp_path: Path) -> tuple[Path, Path]:
    """A saved pooled model over columns a, b and a CSV of new rows for it."""
    import numpy as np
    import pandas as pd
    from sklearn.ensemble import RandomForestClassifier

    from fedforest import PooledForest
    from fedforest.model.model_files import save_payload
    from fedforest.model.pooled_model import PooledModel

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200)})
    y = (X["a"] > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, ["a", "b"], "s1")
    model = save_payload(tmp_path / "model", PooledModel(forest).to_payload())
    data = tmp_path / "new.csv"
    X.head(20).rename(columns={"a": "local_a"}).to_csv(data, index=False)
    return model, data


def test_predict_refuses_to_overwrite_its_input_or_an_existing_file(tmp_path, capsys):
    model, data = small_model(tmp_path)
    before = data.read_bytes()
    predict = ["predict", "--model", str(model), "--data", str(data), "--rename", "local_a=a"]
    # the input itself, named another way: refused even with --overwrite
    (tmp_path / "sub").mkdir()
    same = tmp_path / "sub" / ".." / "new.csv"
    assert main([*predict, "--out", str(same), "--overwrite"]) == 1
    err = capsys.readouterr().err
    assert "fedforest: error: --out" in err and "is the input file" in err
    assert data.read_bytes() == before
    # an existing file: refused without --overwrite, replaced with it
    out = tmp_path / "pred.csv"
    out.write_text("my notes\n")
    assert main([*predict, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"--out {out} exists" in err and "--overwrite" in err
    assert out.read_text() == "my notes\n"
    assert main([*predict, "--out", str(out), "--overwrite"]) == 0
    assert out.read_text().startswith("prediction,p_0,p_1")
    # a folder that does not exist is named
    missing = tmp_path / "no such folder" / "pred.csv"
    assert main([*predict, "--out", str(missing)]) == 1
    assert f"the folder {missing.parent} does not exist" in capsys.readouterr().err
    assert not missing.parent.exists()


def test_predict_knows_its_input_by_identity_not_by_name(tmp_path, capsys):
    import os

    model, data = small_model(tmp_path)
    before = data.read_bytes()
    predict = ["predict", "--model", str(model), "--data", str(data), "--rename", "local_a=a"]
    # a hard link to the input (and to the model) is the input under another name
    for name, source in (("linked.csv", data), ("linked-model.npz", model)):
        link = tmp_path / name
        os.link(source, link)
        assert main([*predict, "--out", str(link), "--overwrite"]) == 1
        err = capsys.readouterr().err
        assert f"--out {link} is the input file" in err and "another name of it" in err
    # a symbolic link to the input, too
    (tmp_path / "sym.csv").symlink_to(data)
    assert main([*predict, "--out", str(tmp_path / "sym.csv"), "--overwrite"]) == 1
    assert "is the input file" in capsys.readouterr().err
    assert data.read_bytes() == before
    # replacing a file that has another name leaves the other name's content alone
    kept = tmp_path / "kept.csv"
    kept.write_text("my notes\n")
    os.link(kept, tmp_path / "old.csv")
    assert main([*predict, "--out", str(tmp_path / "old.csv"), "--overwrite"]) == 0
    assert kept.read_text() == "my notes\n"
    assert (tmp_path / "old.csv").read_text().startswith("prediction,p_0,p_1")
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_a_folder_that_would_remove_an_input_of_its_command_is_refused(tmp_path):
    from fedforest.outputs import OutputError, check_dir, claim_dir, record_dir

    out = claim_dir(tmp_path / "out", "fedforest report")
    (out / "figures").mkdir()
    (out / "figures" / "results.json").write_text("{}")
    (out / "table.csv").write_text("a\n")
    record_dir(out, "fedforest report")
    for given in (out / "figures" / "results.json", out / "table.csv"):
        with pytest.raises(OutputError, match=f"its input {given} is there"):
            check_dir(out, "fedforest report", inputs=[given])
    with pytest.raises(OutputError, match="it is the input"):
        check_dir(out, "fedforest report", inputs=[out])
    check_dir(out, "fedforest report", inputs=[tmp_path])  # a folder that holds it is fine
    import os

    os.link(out / "table.csv", tmp_path / "mine.csv")  # the user's name for a file in it
    with pytest.raises(OutputError, match="would replace .*table.csv"):
        claim_dir(out, "fedforest report", inputs=[tmp_path / "mine.csv"])
    assert (out / "table.csv").exists()
    claim_dir(out, "fedforest report", inputs=[tmp_path / "elsewhere.json"])
    assert not (out / "table.csv").exists()
    assert (tmp_path / "mine.csv").read_text() == "a\n"


def test_elect_json_refuses_an_existing_file_and_its_inputs(tmp_path, capsys):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    paths = []
    for site in ("a", "b"):
        X = pd.DataFrame(rng.normal(size=(60, 3)), columns=["x", "y1", f"p_{site}"])
        path = tmp_path / f"{site}.csv"
        X.assign(t=(X["x"] > 0).astype(int)).to_csv(path, index=False)
        paths.append(str(path))
    before = snapshot(tmp_path)
    elect = ["elect", *paths, "--target", "t", "--selector", "none"]
    assert main([*elect, "--json", paths[0], "--overwrite"]) == 1
    assert "is the input file" in capsys.readouterr().err
    import os

    os.link(paths[1], tmp_path / "b-linked.csv")
    assert main([*elect, "--json", str(tmp_path / "b-linked.csv"), "--overwrite"]) == 1
    assert "is the input file" in capsys.readouterr().err
    (tmp_path / "b-linked.csv").unlink()
    kept = tmp_path / "election.json"
    kept.write_text("{}")
    assert main([*elect, "--json", str(kept)]) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert snapshot(tmp_path) == {**before, "election.json": b"{}"}
    assert main([*elect, "--json", str(kept), "--overwrite"]) == 0
    assert "election" in kept.read_text()


@pytest.mark.parametrize(
    "argv, option, message",
    [
        (["--sites", "1"], "--sites", "allowed: an integer >= 2"),
        (["--sites", "2,three"], "--sites", "'three' is not an integer"),
        (["--sites", "2,2"], "--sites", "repeats 2"),
        (["--jaccards", "nan"], "--jaccards", "not a finite number"),
        (["--jaccards", "0"], "--jaccards", "allowed: a number in (0, 1]"),
        (["--jaccards", "1.5"], "--jaccards", "out of range"),
        (["--jaccards", "lots"], "--jaccards", "'lots' is not a number"),
        (["--reps", "0"], "--reps", "allowed: an integer >= 1"),
        (["--trees", "0"], "--trees", "allowed: an integer in [1, 10000]"),
        (["--n-jobs", "0"], "--n-jobs", "allowed: an integer >= 1"),
        (["--depth-threshold", "-1"], "--depth-threshold", "allowed: an integer >= 0"),
        (["--methods", "mp,magic"], "--methods", "'magic' is not allowed"),
        (["--methods", "wmp,bogus"], "--methods", "'bogus' is not allowed"),
        (["--methods", "wmp,auto,wmp"], "--methods", "repeats wmp"),
        (["--validation-fraction", "0"], "--validation-fraction", "allowed: a number in (0, 0.65]"),
        (["--validation-fraction", "0.9"], "--validation-fraction", "out of range"),
        (["--validation-fraction", "x"], "--validation-fraction", "'x' is not a number"),
        (["--metrics", ","], "--metrics", "holds no metrics"),
    ],
)
def test_experiment_options_are_refused_by_name(tmp_path, capsys, argv, option, message):
    out = tmp_path / "exp"
    with pytest.raises(SystemExit) as exit_:
        main(["experiment", "S-500-Mix", *argv, "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: " in err and message in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, option, message",
    [
        (["predict", "--model", "m", "--data", "d", "--rename", "x"], "--rename", "local=global"),
        (["predict", "--model", "m", "--data", "d", "--rename", "=b"], "--rename", "local=global"),
        (["predict", "--model", "m", "--data", "d", "--rename", "a="], "--rename", "local=global"),
        (
            ["predict", "--model", "m", "--data", "d", "--rename", "a=x,b=x"],
            "--rename",
            "several columns are renamed to 'x'",
        ),
        (["predict", "--model", "m", "--data", "d", "--seed", "-1"], "--seed", "out of range"),
        (
            ["elect", "a.csv", "--target", "y", "--freedom-degree", "2"],
            "--freedom-degree",
            "[0, 1]",
        ),
        (
            ["elect", "a.csv", "--target", "y", "--tuning-rounds", "0"],
            "--tuning-rounds",
            "[1, 100]",
        ),
        (["elect", "a.csv", "--target", "y", "--tolerance", "-1"], "--tolerance", ">= 0"),
        (["elect", "a.csv", "--target", "y", "--selectors", "lasso,magic"], "--selectors", "magic"),
        (["job", "poc", "j", "--timeout", "0"], "--timeout", "a number > 0"),
    ],
)
def test_other_options_are_refused_by_name(capsys, argv, option, message):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: " in err and message in err


def test_options_that_do_not_fit_the_data_are_refused(tmp_path, capsys):
    model, data = small_model(tmp_path)
    predict = ["predict", "--model", str(model), "--data"]
    # a rename of a column the file lacks; a rename onto a column the file has
    assert main([*predict, str(data), "--rename", "glucose=a"]) == 1
    assert "--rename: 'glucose' is not a column of" in capsys.readouterr().err
    assert main([*predict, str(data), "--rename", "local_a=b"]) == 1
    assert "already has a column 'b'" in capsys.readouterr().err
    # missing, unreadable and empty CSV files
    assert main([*predict, str(tmp_path / "nope.csv")]) == 1
    assert "--data: no such CSV file" in capsys.readouterr().err
    (tmp_path / "bad.csv").write_bytes(b"\xff\xfe\x00garbage\x00\n\x00")
    assert main([*predict, str(tmp_path / "bad.csv")]) == 1
    assert "which are not UTF-8 text" in capsys.readouterr().err
    (tmp_path / "empty.csv").write_text("a,b\n")
    assert main([*predict, str(tmp_path / "empty.csv")]) == 1
    assert "has no data rows" in capsys.readouterr().err
    assert main([*predict, str(data), "--strategy", "park"]) == 1
    assert "--strategy park needs --site" in capsys.readouterr().err

    # experiment: a categorical column or a target the CSV lacks; options for CSVs on a synthetic
    import pandas as pd

    csv = tmp_path / "cohort.csv"
    pd.DataFrame({"x": range(40), "z": range(40), "y": [0, 1] * 20}).to_csv(csv, index=False)
    exp = ["experiment", str(csv), "--sites", "2", "--reps", "1", "--trees", "5"]
    out = tmp_path / "exp"
    assert main([*exp, "--target", "y", "--categorical", "nope", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "(--categorical) 'nope'" in err and "columns: x, z, y" in err
    assert main([*exp, "--target", "outcome", "--out", str(out)]) == 1
    assert "(--target) 'outcome' is not a column" in capsys.readouterr().err
    assert main(["experiment", "S-500-Mix", "--categorical", "nope", "--out", str(out)]) == 1
    assert "apply to CSV datasets" in capsys.readouterr().err
    assert not out.exists()
    # elect: --target missing from one file
    other = tmp_path / "other.csv"
    pd.DataFrame({"x": range(40), "outcome": [0, 1] * 20}).to_csv(other, index=False)
    assert main(["elect", str(csv), str(other), "--target", "y"]) == 1
    assert f"--target 'y' is not a column of {other}" in capsys.readouterr().err


def test_experiment_refuses_degenerate_data_before_running(tmp_path, capsys):
    import pandas as pd

    one_class = tmp_path / "one.csv"
    pd.DataFrame({"x": range(50), "z": range(50), "y": [1] * 50}).to_csv(one_class, index=False)
    out = tmp_path / "exp"
    common = ["--target", "y", "--reps", "1", "--trees", "5", "--out", str(out)]
    assert main(["experiment", str(one_class), "--sites", "2", *common]) == 1
    err = capsys.readouterr().err
    assert "dataset one: the target has a single class (1: 50 rows)" in err
    tiny = tmp_path / "tiny.csv"
    pd.DataFrame({"x": range(8), "z": range(8), "y": [0, 1] * 4}).to_csv(tiny, index=False)
    assert main(["experiment", str(tiny), "--sites", "3", *common]) == 1
    err = capsys.readouterr().err
    assert "dataset tiny: 8 rows, class counts {0: 4, 1: 4}" in err
    assert "3 sites need at least 12 rows of every class" in err
    assert not out.exists()  # refused before anything was written


def test_the_simulator_workspace_guard(tmp_path):
    from fedforest.flare.job import LOG_HEADER, SIMULATE_COMMAND, check_workspace
    from fedforest.outputs import OutputError, claim_dir, record_dir

    ws, log = tmp_path / "ws", tmp_path / "ws.log"
    check_workspace(ws, log)  # new: fine
    claim_dir(ws, SIMULATE_COMMAND)
    (ws / "server").mkdir()
    (ws / "server" / "log.txt").write_text("run")
    record_dir(ws, SIMULATE_COMMAND)  # what simulate() does after the run
    log.write_text(LOG_HEADER + "\nsimulator output\n")
    check_workspace(ws, log)  # a previous run and its log: fine
    with pytest.raises(OutputError, match="inside the workspace"):
        check_workspace(ws, ws / "sim.log")
    (ws / "server" / "mine.csv").write_text("1")
    with pytest.raises(OutputError, match=r"did not write there \(server/mine.csv\)"):
        check_workspace(ws, log)


def test_experiment_out_folder_rule(tmp_path, capsys):
    import pandas as pd

    run = [
        "experiment",
        "S-500-Num",
        "--sites",
        "2",
        "--jaccards",
        "0.5",
        "--reps",
        "1",
        "--trees",
        "5",
        "--methods",
        "local,mp",
        "--metrics",
        "auprc",
        "--no-report",
    ]
    users = tmp_path / "analysis"
    users.mkdir()
    (users / "results.csv").write_text("my results\n")
    assert main([*run, "--out", str(users)]) == 1
    assert f"refusing to write into {users}" in capsys.readouterr().err
    assert (users / "results.csv").read_text() == "my results\n"
    out = tmp_path / "exp"
    assert main([*run, "--out", str(out)]) == 0
    first = pd.read_csv(out / "results.csv")
    assert main([*run, "--out", str(out)]) == 0  # its own folder: cleared and written again
    assert pd.read_csv(out / "results.csv").equals(first)
    (out / "extra.txt").write_text("mine")
    assert main([*run, "--out", str(out)]) == 1
    assert "extra.txt" in capsys.readouterr().err
    assert (out / "extra.txt").read_text() == "mine"


def test_output_folder_rules(tmp_path):
    from fedforest.outputs import (
        MARKER,
        OutputError,
        check_dir,
        claim_dir,
        record_dir,
        remove_dir,
    )

    folder = tmp_path / "out"
    assert claim_dir(folder, "cmd a") == folder and (folder / MARKER).is_file()
    (folder / "sub").mkdir()
    (folder / "sub" / "f.txt").write_text("x")
    (folder / "top.csv").write_text("y")
    record_dir(folder, "cmd a")
    assert check_dir(folder, "cmd a") == {"sub/", "sub/f.txt", "top.csv"}
    with pytest.raises(OutputError, match="made by `cmd a`, not by `cmd b`"):
        claim_dir(folder, "cmd b")
    claim_dir(folder, "cmd a")  # clears what it listed
    assert sorted(p.name for p in folder.iterdir()) == [MARKER]
    # a tampered marker cannot reach outside the folder
    outside = tmp_path / "precious.txt"
    outside.write_text("keep")
    text = (folder / MARKER).read_text() + "../precious.txt\n"
    (folder / MARKER).write_text(text)
    with pytest.raises(OutputError, match="not a path inside the folder"):
        claim_dir(folder, "cmd a")
    assert outside.read_text() == "keep"
    (folder / MARKER).write_text("something else\n")
    with pytest.raises(OutputError, match="was not written by fedforest"):
        claim_dir(folder, "cmd a")
    # a file, a link to a folder and an empty folder
    with pytest.raises(OutputError, match="is not a folder"):
        claim_dir(outside, "cmd a")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(OutputError, match="is not a folder"):
        claim_dir(link, "cmd a")
    empty = tmp_path / "empty"
    empty.mkdir()
    claim_dir(empty, "cmd a")
    remove_dir(empty, "cmd a")
    assert not empty.exists()


# ------------------------------------------------ node, wmp and auto in experiments and predict


def test_experiment_scores_wmp_and_auto_on_validation_rows(tmp_path, capsys):
    import pandas as pd

    from fedforest.experiments.runner import load_table, run_repetition

    def run(fraction: str) -> pd.DataFrame:
        out = tmp_path / f"exp-{fraction}"
        argv = ["experiment", "wine", "--sites", "3", "--jaccards", "0.7", "--reps", "1"]
        argv += ["--trees", "5", "--methods", "mp,node,wmp,auto", "--metrics", "auprc"]
        argv += ["--validation-fraction", fraction, "--no-report", "--out", str(out)]
        assert main(argv) == 0
        assert "mean auprc (wine)" in capsys.readouterr().out
        return pd.read_csv(out / "results.csv")

    tidy = run("0.3")
    assert set(tidy["method"]) == {"mp", "node", "wmp", "auto"}
    assert len(tidy) == 3 * 4 and tidy["value"].between(0, 1).all()
    for method in ("wmp", "auto"):
        assert sorted(tidy[tidy.method == method]["site"]) == ["site-1", "site-2", "site-3"]
    # exactly the runner's repetition with that validation fraction
    rows = run_repetition(
        load_table("wine"),
        3,
        0.7,
        0,
        ["mp", "node", "wmp", "auto"],
        ["auprc"],
        n_estimators=5,
        validation_fraction=0.3,
    )
    expected = pd.DataFrame(rows).set_index(["site", "method"])["value"]
    got = tidy.set_index(["site", "method"])["value"]
    assert got.sort_index().to_numpy() == pytest.approx(expected.sort_index().to_numpy())
    # another fraction: other training rows, other forests
    other = run("0.5").set_index(["site", "method"])["value"].sort_index()
    assert not np.allclose(other.to_numpy(), got.sort_index().to_numpy())


# ------------------------------------------------ experiment: non-iid rows and natural sites


def test_experiment_partitions_and_site_files(tmp_path, capsys):
    import pandas as pd

    common = ["--reps", "1", "--trees", "3", "--methods", "local,mp", "--metrics", "auc"]
    out = tmp_path / "skew"
    argv = ["experiment", "breast_cancer", "--sites", "3", "--jaccards", "0.5", *common]
    assert (
        main(
            [
                *argv,
                "--partition",
                "dirichlet",
                "--alphas",
                "0.3,1",
                "--no-report",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    tidy = pd.read_csv(out / "results.csv")
    assert set(tidy["dataset"]) == {"breast_cancer@dirichlet-0.3", "breast_cancer@dirichlet-1"}
    capsys.readouterr()
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(120, 3)), columns=["a", "b", "c"])
    frame["y"] = (frame["a"] + frame["b"] + rng.normal(size=120) > 0).astype(int)
    files = []
    for k, cols in enumerate((["a", "b"], ["b", "c"])):
        path = tmp_path / f"site{k}.csv"
        frame.iloc[k * 60 : (k + 1) * 60][[*cols, "y"]].to_csv(path, index=False)
        files.append(str(path))
    out = tmp_path / "natural"
    site_argv = ["experiment", "--site-files", *files, "--target", "y", *common]
    assert main([*site_argv, "--name", "cohort", "--no-report", "--out", str(out)]) == 0
    tidy = pd.read_csv(out / "results.csv")
    assert set(tidy["dataset"]) == {"cohort"} and set(tidy["site"]) == {"site0", "site1"}
    assert set(tidy["n_sites"]) == {2} and set(tidy["jaccard"]) == {0.333}
    capsys.readouterr()
    refused = [
        ([*site_argv, "--sites", "3"], "--sites do not apply to --site-files"),
        ([*site_argv, "--partition", "quantity", "--alphas", "1"], "--partition, --alphas do"),
        (["experiment", "wine", *site_argv[1:]], "datasets (wine) do not apply"),
        ([*argv, "--partition", "quantity"], "needs its Dirichlet concentrations: --alphas"),
        ([*argv, "--alphas", "0.5"], "--alphas applies to --partition dirichlet or quantity"),
        (["experiment", *common], "name at least one dataset, or give --site-files"),
        ([*argv, "--name", "x"], "--name names the data of --site-files"),
    ]
    for bad, message in refused:
        assert main([*bad, "--out", str(tmp_path / "refused")]) == 1, bad
        assert message in capsys.readouterr().err, bad
    assert not (tmp_path / "refused").exists()
    for bad, option, message in [
        (["--partition", "label"], "--partition", "'label' is not allowed"),
        (["--alphas", "0"], "--alphas", "out of range"),
        (["--alphas", "1,1"], "--alphas", "repeats 1"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main([*argv, *bad])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {option}: " in err and message in err


def test_experiment_calibration_pooling_weights_and_auto_metric(tmp_path, capsys):
    import pandas as pd

    out = tmp_path / "calibrated"
    argv = ["experiment", "breast_cancer", "--sites", "3", "--jaccards", "0.5", "--reps", "1"]
    argv += ["--trees", "3", "--methods", "local,mp,auto", "--metrics", "auc,brier"]
    extra = ["--calibration", "sigmoid", "--pooling-weights", "rows", "--auto-metric", "auc"]
    assert main([*argv, *extra, "--no-report", "--out", str(out)]) == 0
    assert set(pd.read_csv(out / "results.csv")["metric"]) == {"auc", "brier"}
    bins = pd.read_csv(out / "calibration.csv")
    assert set(bins["method"]) == {"local", "mp", "auto"} and (bins["count"] > 0).all()
    capsys.readouterr()
    for bad, option, message in [
        (["--calibration", "platt"], "--calibration", "'platt' is not allowed"),
        (["--pooling-weights", "size"], "--pooling-weights", "'size' is not allowed"),
        (["--auto-metric", "f1"], "--auto-metric", "'f1' is not allowed"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main([*argv, *bad, "--out", str(tmp_path / "refused")])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {option}: " in err and message in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "a,b,b\n0.1,1,2\n0.2,3,4\n",
            "column 'b' appears 2 times in the header (fields 2, 3); pandas would silently read "
            "the second as 'b.1'; allowed: distinct column names",
        ),
        (
            "a;b\n0.1;1\n0.2;3\n",
            "the header is a single column 'a;b': the fields seem separated by ';' (semicolons: "
            "2 fields on each of the first 3 lines); allowed: a comma-separated file",
        ),
        ("a,b\n1e39,1\n0.2,3\n", "column 'a' holds 1e+39 (row 1), whose magnitude overflows"),
        ("a,b\n0.1,1\n-inf,3\n", "column 'a' holds -inf (row 2), whose magnitude overflows"),
        ("a,b\n0.1,1,7\n0.2,3\n", "line 2 has 3 field(s) but the header has 2"),
    ],
)
def test_predict_refuses_rows_the_job_would_refuse_and_says_why(tmp_path, capsys, text, message):
    model, _ = small_model(tmp_path)
    data = tmp_path / "rows.csv"
    data.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the message is the only thing said: no raw warning
        assert main(["predict", "--model", str(model), "--data", str(data)]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "Warning" not in err and "Traceback" not in err


@pytest.mark.parametrize("header", ["A,b", " a ,b", "a,B "])
def test_predict_refuses_a_column_that_only_looks_like_a_feature(tmp_path, capsys, header):
    model, _ = small_model(tmp_path)
    data = tmp_path / "rows.csv"
    data.write_text(f"{header}\n0.1,1\n")
    assert main(["predict", "--model", str(model), "--data", str(data)]) == 1
    err = capsys.readouterr().err
    column = next(c for c in header.split(",") if c not in ("a", "b"))
    feature = column.strip().lower()
    assert f"column {column!r} reads like the model's feature {feature!r} but is not it" in err
    assert f"correct the header of {data} (write {feature!r})" in err
    if column == column.strip():  # a name --rename can spell
        assert f"--rename {column}={feature}" in err


def test_predict_writes_no_device_and_follows_a_link_to_a_file(tmp_path, capsys):
    model, data = small_model(tmp_path)
    predict = ["predict", "--model", str(model), "--data", str(data), "--rename", "local_a=a"]
    (tmp_path / "null").symlink_to("/dev/null")
    assert main([*predict, "--out", str(tmp_path / "null"), "--overwrite"]) == 1
    assert "is not a regular file" in capsys.readouterr().err
    assert (tmp_path / "null").is_symlink()
    (tmp_path / "real.csv").write_text("old\n")
    (tmp_path / "link.csv").symlink_to(tmp_path / "real.csv")
    assert main([*predict, "--out", str(tmp_path / "link.csv"), "--overwrite"]) == 0
    assert (tmp_path / "link.csv").is_symlink()
    assert (tmp_path / "real.csv").read_text().startswith("prediction,")


# ------------------------------------------------ experiment: regression targets


def test_experiment_regression_on_diabetes_writes_one_row_per_site_method_and_metric(
    tmp_path, capsys
):
    import pandas as pd

    from fedforest.experiments.runner import TIDY_COLUMNS

    out = tmp_path / "reg"
    argv = ["experiment", "diabetes", "--task", "regression", "--sites", "3", "--jaccards", "0.5"]
    argv += ["--reps", "1", "--trees", "5", "--methods", "local,mp,wmp,intersection"]
    assert main([*argv, "--metrics", "rmse", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "mean rmse (diabetes)" in printed and "report:" in printed
    tidy = pd.read_csv(out / "results.csv")
    assert list(tidy.columns) == TIDY_COLUMNS
    assert len(tidy) == 3 * 4  # sites x methods (one metric, one repetition)
    assert set(tidy["method"]) == {"local", "mp", "wmp", "intersection"}
    assert set(tidy["site"]) == {"site-1", "site-2", "site-3"}
    assert set(tidy["metric"]) == {"rmse"} and set(tidy["dataset"]) == {"diabetes"}
    assert set(tidy["n_sites"]) == {3} and set(tidy["jaccard"]) == {0.5} and set(tidy["rep"]) == {0}
    assert tidy.groupby(["site", "method"]).size().eq(1).all()
    assert tidy["value"].between(30, 120).all()  # RMSE in the target's units (sd 77)
    assert not (out / "calibration.csv").exists()
    report = (out / "report.md").read_text()
    assert "## RMSE" in report and "Lower is better for RMSE" in report and "Friedman" in report
    for name in ("cd_rmse.png", "diabetes_rmse_vs_jaccard.png", "summary_diabetes_rmse.csv"):
        assert (out / name).is_file(), name
    # the default metric of --task regression is rmse; mae and r2 on request
    out2 = tmp_path / "reg2"
    assert main([*argv, "--no-report", "--out", str(out2)]) == 0
    assert set(pd.read_csv(out2 / "results.csv")["metric"]) == {"rmse"}
    out3 = tmp_path / "reg3"
    assert main([*argv, "--metrics", "mae,r2", "--no-report", "--out", str(out3)]) == 0
    assert set(pd.read_csv(out3 / "results.csv")["metric"]) == {"mae", "r2"}


def test_experiment_regression_refusals_name_the_task(tmp_path, capsys):
    import pandas as pd

    out = tmp_path / "refused"
    common = ["--sites", "2", "--jaccards", "0.5", "--reps", "1", "--trees", "3"]
    reg = ["experiment", "diabetes", "--task", "regression", *common]
    refused = [
        (
            [*reg, "--metrics", "rmse,auc"],
            "metrics ['auc'] (--metrics) are classification metrics; --task regression scores "
            "rmse, mae, r2",
        ),
        (
            ["experiment", "wine", *common, "--metrics", "rmse"],
            "metrics ['rmse'] (--metrics) are regression metrics; --task classification scores",
        ),
        ([*reg, "--calibration", "sigmoid"], "under --task regression the forests predict numbers"),
        ([*reg, "--auto-metric", "auc"], "auto and wmp choose by validation RMSE"),
        ([*reg, "--voting", "hard"], "the trees' predictions are averaged"),
        (
            [*reg, "--partition", "dirichlet", "--alphas", "0.5"],
            "a regression target has no classes: under --task regression use partition jaccard",
        ),
        (
            ["experiment", "diabetes", *common],
            "dataset diabetes: a regression dataset (its target is a number, 214 distinct values "
            "in 442 rows), not one of class labels; run it with --task regression",
        ),
        (
            ["experiment", "wine", "--task", "regression", *common],
            "dataset wine: a classification dataset (3 classes), not one of numbers; --task "
            "regression needs a numeric target: F-500-Num, F-500-Mix, diabetes or a CSV file",
        ),
    ]
    for bad, message in refused:
        assert main([*bad, "--out", str(out)]) == 1, bad
        assert message in capsys.readouterr().err, bad
    assert not out.exists()
    with pytest.raises(SystemExit) as exit_:
        main([*reg, "--task", "ranking", "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert (
        "argument --task: 'ranking' is not allowed; allowed: classification, regression, survival"
        in err
    )
    # a CSV measurement: refused as a class label naming --task regression, run with it
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(80, 3)), columns=["a", "b", "c"])
    frame["los"] = np.round(2 + frame["a"] - frame["b"] + rng.normal(size=80), 2)
    csv = tmp_path / "stay.csv"
    frame.to_csv(csv, index=False)
    exp = ["experiment", str(csv), "--target", "los", *common, "--methods", "local,mp"]
    assert main([*exp, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "dataset stay: the target holds non-integer numbers such as" in err
    assert "For a measurement use --task regression (metrics rmse, mae, r2)" in err
    assert not out.exists()
    assert main([*exp, "--task", "regression", "--no-report", "--out", str(out)]) == 0
    tidy = pd.read_csv(out / "results.csv")
    assert len(tidy) == 2 * 2 and set(tidy["metric"]) == {"rmse"}


# --------------------------------------------------------------------------- help and console
def all_parsers(parser, path=("fedforest",)):
    """Every parser of the command line with its command words."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from all_parsers(sub, (*path, name))


def test_every_help_shows_every_default(capsys):
    import argparse

    from fedforest.cli import build_parser

    seen = set()
    for path, parser in all_parsers(build_parser()):
        seen.add(" ".join(path))
        for action in parser._actions:
            if action.default in (None, False, argparse.SUPPRESS) or action.required:
                continue
            if not action.option_strings and action.nargs not in ("?", "*"):
                continue
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            # the option's own lines of the help: its text and default (the next option's
            # lines start with "-")
            text = parser.format_help()
            name = action.option_strings[0] if action.option_strings else action.dest
            block = text[text.index(f"  {name}") :].split("\n  -")[0]
            assert "default" in block, (path, action.dest, block)
    assert {"fedforest job build", "fedforest job poc", "fedforest predict"} <= seen
    assert {"fedforest experiment", "fedforest report", "fedforest elect"} <= seen
    # through the command line, as a user asks
    for argv, shown in (
        (["job", "build", "--help"], "(default: site_configs)"),
        (["job", "poc", "--help"], "(default: workspaces/poc-env)"),
        (["job", "simulate", "--help"], "(default: workspaces/simulator)"),
        (["job", "poc", "--help"], "(default: 900"),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        assert shown in " ".join(capsys.readouterr().out.split()), argv
    # a switch that is off and an option without a default show no "(default: ...)"
    with pytest.raises(SystemExit):
        main(["job", "build", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: False)" not in out and "(default: None)" not in out


def test_elect_shows_its_progress_lines_unless_quiet(tmp_path, capsys):
    from federation.test_offline import site_tables

    paths = []
    for site, frame in site_tables(3, rows=120).items():
        path = tmp_path / f"{site}.csv"
        frame.to_csv(path, index=False)
        paths.append(str(path))
    argv = ["elect", *paths, "--target", "y", "--auto-tune", "--tuning-rounds", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    import re

    assert re.search(r"^schema: 3 of 3 sites replied, \d+\.\d s$", out, re.M), out
    assert re.search(r"^election tuning round 1: 3 of 3 sites replied", out, re.M), out
    assert "elected: " in out
    for quiet in (["-q", *argv], [*argv[:1], "--quiet", *argv[1:]]):
        assert main(quiet) == 0
        out = capsys.readouterr().out
        assert "sites replied" not in out and "elected: " in out


def test_report_and_the_next_run_work_in_either_order(tmp_path, capsys):
    """The report of a run's results.json goes beside the run's folder, so the run that next
    writes that folder (make demo) does not refuse it."""
    from fedforest.cli.report import default_out
    from fedforest.flare.job import SIMULATE_COMMAND, check_workspace
    from fedforest.outputs import claim_dir, record_dir

    demo = (ROOT / "tests" / "cli" / "data" / "demo_results.json").read_text()
    ws = tmp_path / "workspaces" / "demo"
    claim_dir(ws, SIMULATE_COMMAND)
    run_dir = ws / "fedforest-demo" / "server" / "simulate_job"
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text(demo)
    record_dir(ws, SIMULATE_COMMAND)
    assert main(["report", str(run_dir / "results.json")]) == 0
    report = tmp_path / "workspaces" / "demo-report" / "report.md"
    assert f"report: {report}" in capsys.readouterr().out and report.is_file()
    check_workspace(ws, tmp_path / "workspaces" / "demo.log")  # the next run is not refused
    assert main(["report", str(run_dir / "results.json")]) == 0  # and again after it
    # a path given relative to the current folder stays relative
    relative = Path("workspaces/demo/fedforest-demo/server/simulate_job/results.json")
    cwd = Path.cwd()
    try:
        import os

        os.chdir(tmp_path)
        assert default_out(relative) == Path("workspaces/demo-report")
    finally:
        os.chdir(cwd)
    # a results.json that no run of fedforest wrote: report/ beside it, as before
    loose = tmp_path / "mine" / "results.json"
    loose.parent.mkdir()
    loose.write_text(demo)
    assert default_out(loose) == loose.parent / "report"
