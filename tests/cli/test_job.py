"""``fedforest job``: build, simulate and the results it prints (without running FLARE)."""

from __future__ import annotations

import sys
from pathlib import Path

from fedforest.cli import main

ROOT = Path(__file__).resolve().parents[2]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes (to show a refused command changed nothing)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def fake_job(folder: Path) -> Path:
    """A job folder as far as `job simulate` reads it before starting the simulator."""
    import json

    folder.mkdir(parents=True)
    deploy = {"app_server": ["server"], "app_s1": ["s1"], "app_s2": ["s2"]}
    (folder / "meta.json").write_text(json.dumps({"name": folder.name, "deploy_map": deploy}))
    return folder


def test_simulate_never_clears_a_folder_fedforest_did_not_make(tmp_path, capsys):
    job = fake_job(tmp_path / "jobs" / "j")
    # what the old command deleted: any folder with a server/ folder in it
    ws = tmp_path / "my results"
    (ws / "server").mkdir(parents=True)
    (ws / "server" / "analysis.ipynb").write_text("{}")
    (ws / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    assert main(["job", "simulate", str(job), "--workspace", str(ws)]) == 1
    err = capsys.readouterr().err
    assert f"refusing to write into {ws}" in err and "fedforest did not make it" in err
    # a log of the user's next to a new workspace
    (tmp_path / "run.log").write_text("my log")
    assert main(["job", "simulate", str(job), "--workspace", str(tmp_path / "run")]) == 1
    assert "run.log exists and fedforest did not write it" in capsys.readouterr().err
    assert snapshot(tmp_path) == {**before, "run.log": b"my log"}
    assert not (tmp_path / "run").exists()


def demo_configs(folder: Path) -> Path:
    """Small demo data and the shipped site_configs pointing at it."""
    import yaml

    sys.path.insert(0, str(ROOT / "data_prep"))
    from make_demo_data import make_demo_data

    make_demo_data(folder / "data", rows=60, seed=0)
    configs = folder / "site_configs"
    configs.mkdir()
    (configs / "job.yaml").write_text((ROOT / "site_configs" / "job.yaml").read_text())
    for site in ("site-1", "site-2", "site-3"):
        cfg = yaml.safe_load((ROOT / "site_configs" / f"{site}.yaml").read_text())
        cfg["data_path"] = str(folder / "data" / f"{site}.csv")
        (configs / f"{site}.yaml").write_text(yaml.safe_dump(cfg))
    return configs


def test_job_build_rebuilds_its_own_job_but_never_a_users_folder(tmp_path, capsys):
    import json

    from fedforest.outputs import MARKER

    configs = demo_configs(tmp_path)
    name = "fedforest-demo"
    build = ["job", "build", "--config", str(configs), "--out", str(tmp_path / "jobs")]
    # a user's own FLARE job of the same name: FLARE's export_job would replace it
    users = tmp_path / "jobs" / name
    users.mkdir(parents=True)
    (users / "meta.json").write_text(json.dumps({"name": name, "deploy_map": {}}))
    (users / "README.txt").write_text("my job")
    before = snapshot(tmp_path / "jobs")
    assert main(build) == 1
    err = capsys.readouterr().err
    assert f"refusing to write into {users}" in err and MARKER in err
    assert snapshot(tmp_path / "jobs") == before
    # a new folder, then a rebuild (what `make demo` does every time)
    users.rename(tmp_path / "kept")
    assert main(build) == 0 and main(build) == 0
    job = tmp_path / "jobs" / name
    assert json.loads((job / "meta.json").read_text())["name"] == name
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == [name]  # no staging left
    # a file of the user's put into the built job: the rebuild is refused, the file kept
    (job / "my_notes.txt").write_text("keep me")
    before = snapshot(job)
    assert main(build) == 1
    assert "my_notes.txt" in capsys.readouterr().err
    assert snapshot(job) == before


def test_a_failed_job_prints_only_the_paths_it_wrote(tmp_path, capsys):
    import json

    from fedforest.cli.job import _show_results
    from fedforest.federation.job_results import JobResults

    run_dir = tmp_path / "ws" / "job" / "server" / "simulate_job"
    run_dir.mkdir(parents=True)
    failed = JobResults(job="job", status="failed", error="fewer than min_sites=3")
    (run_dir / "results.json").write_text(json.dumps(failed.to_dict()))
    log = tmp_path / "ws.log"
    log.write_text("flare")
    assert _show_results(run_dir / "results.json", log, []) == 1
    out = capsys.readouterr().out
    assert f"results: {run_dir / 'results.json'}" in out and f"FLARE's output: {log}" in out
    assert "report:" not in out and "pooled_model" not in out and "site models" not in out
    (run_dir / "report.md").write_text("# report")
    model = tmp_path / "ws" / "job" / "site-1" / "simulate_job" / "pooled_model.npz"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"x")
    (run_dir / "results.json").write_text(json.dumps(JobResults(job="job").to_dict()))
    assert _show_results(run_dir / "results.json", log, [model]) == 0
    out = capsys.readouterr().out
    assert f"report: {run_dir / 'report.md'}" in out and str(model) in out
    assert "FLARE's output" not in out
