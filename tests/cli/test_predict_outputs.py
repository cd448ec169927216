"""``fedforest predict`` never writes over a file it reads, and names what it cannot write."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest
from fedforest.cli import main
from fedforest.model.model_files import save_payload
from fedforest.model.pooled_model import PooledModel

COLUMNS = ["a", "b"]


@pytest.fixture
def job_folder(tmp_path):
    """A run folder as a job leaves it: the model, and metrics.json with wmp's fitted weight."""
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(120, 2)), columns=COLUMNS)
    rf = RandomForestClassifier(n_estimators=4, random_state=0).fit(X, (X["a"] > 0).astype(int))
    forest = PooledForest.from_sklearn(rf, COLUMNS, "site-1")
    folder = tmp_path / "run"
    model = save_payload(folder / "pooled_model.npz", PooledModel(forest).to_payload())
    metrics = folder / "metrics.json"
    metrics.write_text(json.dumps({"strategies": {"wmp": {"guess_weight": 0.25}}}))
    data = tmp_path / "rows.csv"
    X.iloc[:5].to_csv(data, index=False)
    return model, metrics, data


def predict(model, data, *extra) -> list[str]:
    return ["predict", "--model", str(model), "--data", str(data), *extra]


@pytest.mark.parametrize("strategy", [["--strategy", "wmp"], []])
@pytest.mark.parametrize("option", ["--out", "--report-json"])
def test_the_models_companions_are_inputs_whatever_overwrite_says(
    job_folder, capsys, strategy, option
):
    model, metrics, data = job_folder
    before = metrics.read_bytes()
    assert main(predict(model, data, *strategy, option, str(metrics), "--overwrite")) == 1
    err = capsys.readouterr().err
    assert f"{option} {metrics} is the input file {metrics}" in err
    assert metrics.read_bytes() == before


@pytest.mark.parametrize("which", ["data", "model"])
def test_the_report_is_never_an_input(job_folder, capsys, which):
    model, _, data = job_folder
    target = {"data": data, "model": model}[which]
    before = target.read_bytes()
    assert main(predict(model, data, "--report-json", str(target), "--overwrite")) == 1
    assert "is the input file" in capsys.readouterr().err
    assert target.read_bytes() == before


def test_a_link_to_a_companion_is_refused_as_the_companion(job_folder, tmp_path, capsys):
    model, metrics, data = job_folder
    link = tmp_path / "link.json"
    link.symlink_to(metrics)
    assert main(predict(model, data, "--out", str(link), "--overwrite")) == 1
    assert f"--out {link} is the input file {metrics}" in capsys.readouterr().err


def test_out_and_report_json_must_be_two_files(job_folder, tmp_path, capsys):
    model, _, data = job_folder
    same = tmp_path / "both.csv"
    assert main(predict(model, data, "--out", str(same), "--report-json", str(same))) == 1
    assert (
        f"--report-json {same} is the --out file {same}; give two names" in capsys.readouterr().err
    )
    assert not same.exists()


def test_both_outputs_are_written_side_by_side(job_folder, tmp_path, capsys):
    model, _, data = job_folder
    out, report = tmp_path / "pred.csv", tmp_path / "report.json"
    assert main(predict(model, data, "--out", str(out), "--report-json", str(report))) == 0
    assert len(pd.read_csv(out)) == 5
    assert json.loads(report.read_text())["rows"] == 5
    # again: both exist now, refused without --overwrite, replaced with it
    assert main(predict(model, data, "--out", str(out), "--report-json", str(report))) == 1
    assert "exists; refusing to overwrite it (pass --overwrite" in capsys.readouterr().err
    assert (
        main(predict(model, data, "--out", str(out), "--report-json", str(report), "--overwrite"))
        == 0
    )


def test_a_dangling_link_names_the_link_and_its_target(job_folder, tmp_path, capsys):
    model, _, data = job_folder
    link = tmp_path / "dangling.csv"
    link.symlink_to(tmp_path / "nowhere" / "x.csv")
    for option in ("--out", "--report-json"):
        assert main(predict(model, data, option, str(link), "--overwrite")) == 1
        err = capsys.readouterr().err
        assert (
            f"{option} {link} is a link to {tmp_path / 'nowhere' / 'x.csv'}, which does not exist"
            in err
        )
        assert ".tmp" not in err
    assert link.is_symlink() and not link.exists()


def test_a_read_only_target_is_refused_and_kept(job_folder, tmp_path, capsys):
    model, _, data = job_folder
    kept = tmp_path / "kept.csv"
    kept.write_text("mine\n")
    kept.chmod(0o444)
    assert main(predict(model, data, "--out", str(kept), "--overwrite")) == 1
    err = capsys.readouterr().err
    assert f"--out {kept} is read-only" in err and f"chmod u+w {kept}" in err
    assert kept.read_text() == "mine\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any folder")
def test_a_folder_without_write_permission_is_named(job_folder, tmp_path, capsys):
    model, _, data = job_folder
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        assert main(predict(model, data, "--out", str(locked / "p.csv"))) == 1
        assert f"cannot write in the folder {locked}" in capsys.readouterr().err
    finally:
        locked.chmod(0o755)


def test_a_write_that_fails_names_the_file_not_a_temporary_one(job_folder, tmp_path, capsys):
    """A file size limit (as a full disk) stops the write: the message names --out, and
    nothing is left behind."""
    import resource
    import signal

    model, _, data = job_folder
    out = tmp_path / "pred.csv"
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, limit[1]))
    try:
        code = main(predict(model, data, "--out", str(out)))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
        signal.signal(signal.SIGXFSZ, handler)
    err = capsys.readouterr().err
    assert code == 1
    assert f"--out {out}: cannot write it (File too large); nothing was changed" in err
    assert ".tmp" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv", "run"]


@pytest.mark.parametrize(
    ("kind", "said"),
    [("fifo", "is a named pipe (FIFO), not a file"), ("folder", "is a folder, not a file")],
)
def test_data_that_is_not_a_file_is_named_for_what_it_is(job_folder, tmp_path, capsys, kind, said):
    model, _, _ = job_folder
    data = tmp_path / "rows-in"
    if kind == "fifo":
        os.mkfifo(data)
    else:
        data.mkdir()
    assert main(predict(model, data)) == 1
    err = capsys.readouterr().err
    assert f"--data: {data} {said}; give a CSV file" in err
    assert "no such CSV file" not in err


def test_a_folder_as_model_is_named_for_what_it_is(job_folder, tmp_path, capsys):
    _, _, data = job_folder
    assert main(predict(tmp_path, data)) == 1
    assert f"--model: {tmp_path} is a folder, not a file" in capsys.readouterr().err


def test_a_dangling_link_as_data_is_named(job_folder, tmp_path, capsys):
    model, _, _ = job_folder
    link = tmp_path / "gone.csv"
    link.symlink_to(tmp_path / "gone-target.csv")
    assert main(predict(model, link)) == 1
    assert f"--data: {link} is a link to {tmp_path / 'gone-target.csv'}, which does not exist" in (
        capsys.readouterr().err
    )
