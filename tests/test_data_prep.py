"""The data_prep scripts refuse bad arguments and never write over a user's files.

One run of each script goes through a real subprocess (exit status and
message); the other cases call the scripts' ``main`` in-process, which exits
the same way (``SystemExit`` with status 2 and the message on stderr).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import HEART_FILES
from data_prep.heart_disease import CATEGORICAL, COLUMNS, WHOLE
from data_prep.jaccard_split import main as split_main
from data_prep.make_demo_data import main as demo_main
from data_prep.make_synthetic import main as synthetic_main

ROOT = Path(__file__).resolve().parents[1]


def script(name: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "data_prep" / name), *map(str, args)],
        capture_output=True,
        text=True,
    )


def refused(capsys, main, *args) -> str:
    """Run a script's main in-process; it must exit with status 2. Returns stderr."""
    with pytest.raises(SystemExit) as exit_:
        main([str(a) for a in args])
    assert exit_.value.code == 2
    return capsys.readouterr().err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def table(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(rows, 6)), columns=[f"x{i}" for i in range(6)])
    return frame.assign(y=[i % 2 for i in range(rows)])


# ------------------------------------------------------------------ jaccard_split.py


def test_jaccard_split_refuses_sites_the_job_would_refuse(tmp_path, capsys):
    out = tmp_path / "split"
    small = tmp_path / "small.csv"
    table(25).to_csv(small, index=False)
    argv = ["--target", "y", "--sites", "3", "--jaccard", "0.5", "--out", out]
    done = script("jaccard_split.py", small, *argv)
    assert done.returncode == 2
    assert "would get 8 rows (25 rows over 3 sites)" in done.stderr
    assert "a site needs at least 10 rows" in done.stderr and "at least 30 rows" in done.stderr
    # a class too rare to reach every site
    rare = tmp_path / "rare.csv"
    table(60).assign(y=[1] * 2 + [0] * 58).to_csv(rare, index=False)
    err = refused(capsys, split_main, rare, *argv)
    assert "would get rows of a single class" in err and "{0: 58, 1: 2}" in err
    # one class only
    single = tmp_path / "single.csv"
    table(60).assign(y=1).to_csv(single, index=False)
    err = refused(capsys, split_main, single, *argv)
    assert "single class" in err and "{1: 60}" in err
    # every site gets both classes, but one row of the rarer class cannot be in its
    # training, validation and test rows at once (300 rows, 3 positives, 3 sites)
    few = tmp_path / "few.csv"
    table(300).assign(y=[1] * 3 + [0] * 297).to_csv(few, index=False)
    err = refused(capsys, split_main, few, *argv)
    assert (
        "site-1 would get 100 rows (300 rows over 3 sites) with class counts {0: 99, 1: 1}" in err
    )
    assert "class 1 (1 row) gets" in err and "a class needs at least 6 rows" in err
    assert "The whole table has {0: 297, 1: 3}" in err
    assert not out.exists()  # refused before anything was written


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sites", "1"], "argument --sites: 1 is out of range"),
        (["--sites", "two"], "argument --sites: 'two' is not an integer"),
        (["--jaccard", "nan"], "argument --jaccard: 'nan' is out of range"),
        (["--jaccard", "0"], "argument --jaccard"),
        (["--seed", "-3"], "argument --seed"),
        (["--target", "nope"], "target 'nope' is not a column"),
        (["--categorical", "nope"], "categorical columns ['nope']"),
    ],
)
def test_jaccard_split_arguments(tmp_path, capsys, args, message):
    src = tmp_path / "t.csv"
    table(100).to_csv(src, index=False)
    base = {"--target": "y", "--sites": "2", "--jaccard": "0.5", "--out": str(tmp_path / "o")}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    err = refused(capsys, split_main, src, *[x for kv in base.items() for x in kv])
    assert message in err
    assert not (tmp_path / "o").exists()


def test_jaccard_split_input_files(tmp_path, capsys):
    argv = ["--target", "y", "--sites", "2", "--jaccard", "0.5", "--out", tmp_path / "o"]
    err = refused(capsys, split_main, tmp_path / "missing.csv", *argv)
    assert "missing.csv: no such file" in err
    (tmp_path / "empty.csv").write_text("x0,y\n")
    assert "no data rows" in refused(capsys, split_main, tmp_path / "empty.csv", *argv)
    (tmp_path / "nan.csv").write_text("x0,y\n" + "1,0\n2,\n" * 30)
    assert "missing in 30 rows" in refused(capsys, split_main, tmp_path / "nan.csv", *argv)


def test_jaccard_split_out_folder(tmp_path, capsys):
    src = tmp_path / "t.csv"
    table(100).to_csv(src, index=False)
    argv = [src, "--target", "y", "--jaccard", "0.5", "--sites"]
    users = tmp_path / "project"
    users.mkdir()
    (users / "site-1.csv").write_text("my data\n")
    before = snapshot(tmp_path)
    err = refused(capsys, split_main, *argv, 2, "--out", users)
    assert f"refusing to write into {users}" in err and "site-1.csv" in err
    assert snapshot(tmp_path) == before
    out = tmp_path / "split"
    split_main([str(a) for a in [*argv, 3, "--out", out]])
    assert (out / "site-3.csv").is_file()
    split_main([str(a) for a in [*argv, 2, "--out", out]])  # its own folder, fewer sites
    assert not (out / "site-3.csv").exists() and not (out / "site_configs/site-3.yaml").exists()
    (out / "site_configs" / "notes.md").write_text("mine")
    err = refused(capsys, split_main, *argv, 2, "--out", out)
    assert "site_configs/notes.md" in err
    assert (out / "site_configs" / "notes.md").read_text() == "mine"


# ------------------------------------------------------------------ make_synthetic.py


def test_make_synthetic_never_overwrites_without_overwrite(tmp_path, capsys):
    out = tmp_path / "s.csv"
    out.write_text("my table\n")
    done = script("make_synthetic.py", "--dataset", "S-500-Num", "--out", out)
    assert done.returncode == 2 and f"--out {out} exists" in done.stderr
    assert "--overwrite" in done.stderr and out.read_text() == "my table\n"
    synthetic_main(["--dataset", "S-500-Num", "--out", str(out), "--overwrite"])
    assert len(pd.read_csv(out)) == 500
    err = refused(capsys, synthetic_main, "--dataset", "S-500-Num", "--out", tmp_path)
    assert "is a folder" in err
    err = refused(capsys, synthetic_main, "--dataset", "S-500-Num", "--out", out, "--seed", -1)
    assert "argument --seed" in err


# ------------------------------------------------------------------ make_demo_data.py


def test_make_demo_data_arguments_and_out_folder(tmp_path, capsys):
    done = script("make_demo_data.py", "--out", tmp_path / "demo", "--rows", "5")
    assert done.returncode == 2
    assert "argument --rows: 5 is out of range; allowed: >= 10" in done.stderr
    for args, message in ((["--rows", "many"], "argument --rows"), (["--seed", -1], "--seed")):
        assert message in refused(capsys, demo_main, "--out", tmp_path / "demo", *args)
    assert not (tmp_path / "demo").exists()
    users = tmp_path / "hospital"
    users.mkdir()
    (users / "site-1.csv").write_text("real patients\n")
    err = refused(capsys, demo_main, "--out", users, "--rows", 20)
    assert f"refusing to write into {users}" in err
    assert (users / "site-1.csv").read_text() == "real patients\n"
    demo = tmp_path / "demo"
    demo_main(["--out", str(demo), "--rows", "20"])
    demo_main(["--out", str(demo), "--rows", "30"])  # again, into its own folder
    assert len(pd.read_csv(demo / "site-1.csv")) == 30


def test_make_survival_data_deals_gbsg2_to_three_hospitals_the_job_loads(tmp_path, capsys):
    from data_prep.make_survival_data import SITE_COLUMNS
    from data_prep.make_survival_data import main as survival_main
    from fedforest.federation.config import JobConfig, SiteConfig
    from fedforest.federation.tables import read_table

    pytest.importorskip("sksurv")
    assert "--seed" in refused(capsys, survival_main, "--out", tmp_path / "s", "--seed", -1)
    out = tmp_path / "survival"
    survival_main(["--out", str(out)])
    frames = {site: pd.read_csv(out / f"{site}.csv") for site in SITE_COLUMNS}
    assert sum(len(f) for f in frames.values()) == 686  # every GBSG2 patient, once
    job = JobConfig.load(ROOT / "site_configs" / "survival" / "job.yaml")
    for site, frame in frames.items():
        assert list(frame.columns) == [*SITE_COLUMNS[site], "days", "recurrence"]
        assert set(frame["recurrence"]) == {0, 1} and (frame["days"] > 0).all()
        config = SiteConfig.from_dict(
            {"site": site, "data_path": str(out / f"{site}.csv"), "time": "days",
             "event": "recurrence"},
            f"{site}.yaml", task=job.task,
        )  # fmt: skip
        assert "days" in read_table(config).columns


# ------------------------------------------------------------------ heart_disease.py


def test_heart_disease_writes_four_hospitals_the_job_loads(heart_disease_files, tmp_path):
    from fedforest.federation.config import JobConfig, SiteConfig
    from fedforest.federation.tables import read_table

    out = tmp_path / "heart"
    done = script("heart_disease.py", "--source", heart_disease_files, "--out", out)
    assert done.returncode == 0, done.stderr
    assert (
        "hungary: 48 patients" in done.stdout and "columns dropped: slope, ca, thal" in done.stdout
    )
    job = JobConfig.load(out / "site_configs" / "job.yaml")
    assert job.sites == ["cleveland", "hungary", "switzerland", "va"]
    assert job.strategies == ["local", "mp", "intersection", "auto"] and job.calibration == "auto"
    source = {s: heart_disease_files / f for s, (f, _, _) in HEART_FILES.items()}
    lacks = {
        "cleveland": [],
        "hungary": ["slope", "ca", "thal"],
        "switzerland": ["chol", "fbs", "ca"],  # chol: 0 everywhere, i.e. never measured
        "va": ["slope", "ca", "thal"],
    }
    for site in job.sites:
        config = SiteConfig.load(out / "site_configs" / f"{site}.yaml")
        table = read_table(config)
        raw = pd.read_csv(source[site], header=None, na_values=["?", "NaN"])
        assert list(table.columns) == [c for c in COLUMNS[:-1] if c not in lacks[site]] + [
            "disease"
        ]
        # disease = num > 0, row by row
        assert table["disease"].tolist() == (raw[13] > 0).astype(int).tolist()
        assert config.categorical == [c for c in CATEGORICAL if c in table.columns]
        # whole numbers and codes written as the integers they are (the levels the job reads)
        written = pd.read_csv(out / f"{site}.csv", dtype=str)
        whole = [c for c in written.columns if c in WHOLE]
        assert not written[whole].apply(lambda col: col.str.contains(".", regex=False)).any().any()
        assert set(table["cp"].astype(int)) <= {1, 2, 3, 4}
    cleveland = pd.read_csv(out / "cleveland.csv")
    raw = pd.read_csv(source["cleveland"], header=None)
    assert cleveland["age"].tolist() == raw[0].astype(int).tolist()
    hungary = pd.read_csv(out / "hungary.csv")
    assert np.isnan(hungary["chol"][1]) and hungary["chol"].notna().sum() == 47
    # again into its own folder: its files replaced
    assert script("heart_disease.py", "--source", heart_disease_files, "--out", out).returncode == 0


def test_heart_disease_refuses_what_is_not_the_uci_files(heart_disease_files, tmp_path, capsys):
    from data_prep.heart_disease import main as heart_main

    out = tmp_path / "out"
    err = refused(capsys, heart_main, "--source", tmp_path / "none", "--out", out)
    assert "no such folder" in err
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "processed.cleveland.data").write_text("63,1,1,145,233,1,2,150,0,2.3,3,0,6,0\n")
    err = refused(capsys, heart_main, "--source", partial, "--out", out)
    assert "lacks processed.hungarian.data, processed.switzerland.data, processed.va.data" in err

    def broken(line: str, at: int = 3) -> str:
        folder = tmp_path / f"broken{abs(hash(line))}"
        shutil.copytree(heart_disease_files, folder)
        path = folder / "processed.va.data"
        lines = path.read_text().splitlines()
        lines[at - 1] = line
        path.write_text("\n".join(lines) + "\n")
        return refused(capsys, heart_main, "--source", folder, "--out", out)

    err = broken("63,1,1,145,233,1,2,150,0,2.3,3,0,6")
    assert "processed.va.data, line 3: 13 comma-separated values, expected 14" in err
    err = broken("63,1,1,145,high,1,2,150,0,2.3,3,0,6,0")
    assert "line 3, column 'chol': 'high' is not a number" in err
    err = broken("63,1,5,145,233,1,2,150,0,2.3,3,0,6,0")
    assert "column 'cp': '5' is not a code of cp; allowed: 1, 2, 3, 4" in err
    err = broken("63,1,1,145,233,1,2,150,0,2.3,3,0,6,?")
    assert "column 'num': the diagnosis is missing" in err
    err = broken("63,1,1,145,233,1,2,150,0,inf,3,0,6,0")
    assert "column 'oldpeak': 'inf' is not a finite number" in err
    assert not out.exists()
    users = tmp_path / "hospital"
    users.mkdir()
    (users / "va.csv").write_text("real patients\n")
    err = refused(capsys, heart_main, "--source", heart_disease_files, "--out", users)
    assert f"refusing to write into {users}" in err
    assert (users / "va.csv").read_text() == "real patients\n"


def test_heart_disease_site_table_rules():
    from data_prep.heart_disease import site_table

    frame = pd.DataFrame(
        [[60, 1, 4, 140, 0, 0, 1, 120, 1, 1.0, np.nan, np.nan, 7, 3]] * 3
        + [[50, 0, 2, 130, 250, 0, 0, 160, 0, 0.0, 2, np.nan, np.nan, 0]] * 2,
        columns=list(COLUMNS),
    )
    table, dropped = site_table(frame)
    # chol: 0 is missing, so 3 of 5 rows; slope 3 of 5; ca 5 of 5; thal 2 of 5 (kept)
    assert dropped == ["chol", "slope", "ca"]
    assert table["disease"].tolist() == [1, 1, 1, 0, 0]
    assert str(table["thal"].dtype) == "Int64" and table["thal"].isna().sum() == 2
