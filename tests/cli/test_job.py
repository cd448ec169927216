"""``fedforest job`` (cli/job.py): its subcommands, their refusals and the results they print,
without running FLARE (the runs are in tests/flare/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fedforest.cli import build_parser, main
from fedforest.cli.job import POC_WORKSPACE, format_results

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


def test_the_poc_workspace_is_under_the_project_and_make_poc_can_move_it():
    args = build_parser().parse_args(["job", "poc"])
    assert args.workspace == POC_WORKSPACE == "workspaces/poc-env"
    makefile = (ROOT / "Makefile").read_text()
    assert f"POC_WORKSPACE ?= {POC_WORKSPACE}" in makefile
    assert "/tmp" not in makefile.split("\npoc:")[1].split("\n\n")[0]
    for extra, folder in (([], POC_WORKSPACE), (["POC_WORKSPACE=/data/poc env"], "/data/poc env")):
        done = subprocess.run(
            ["make", "-n", "-o", ".venv/.installed", "-o", "demo-data", "poc", *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        (line,) = [x for x in done.stdout.splitlines() if "fedforest job poc" in x]
        assert f"--workspace {folder} --out workspaces/poc" in line


def test_the_subcommands_and_their_defaults():
    parser = build_parser()
    build = parser.parse_args(["job", "build"])
    assert (build.config, build.out, build.no_custom, build.skip_data_checks) == (
        "site_configs",
        "jobs",
        False,
        False,
    )
    simulate = parser.parse_args(["job", "simulate", "jobs/fedforest-demo"])
    assert simulate.job == "jobs/fedforest-demo" and simulate.workspace == "workspaces/simulator"
    prod = parser.parse_args(["job", "prod", "--startup-kit", "kit", "--timeout", "60"])
    assert prod.timeout == 60.0 and prod.out == "workspaces/prod" and prod.job is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["job", "poc", "--timeout", "0"], "--timeout: '0' is out of range; allowed: a number > 0"),
        (["job", "prod", "--timeout", "1e999"], "--timeout: '1e999' is not a finite number"),
        (["job", "prod"], "the following arguments are required: --startup-kit"),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_job_inside_a_folder_the_command_clears_is_refused_before_anything(tmp_path, capsys):
    ws = tmp_path / "ws"
    job = fake_job(ws / "jobs" / "j")
    before = snapshot(tmp_path)
    assert main(["job", "simulate", str(job), "--workspace", str(ws)]) == 1
    assert f"the job {job} is inside the workspace {ws}, which the simulator clears" in (
        capsys.readouterr().err
    )
    argv = ["job", "poc", str(job), "--workspace", str(tmp_path / "poc"), "--out", str(ws)]
    assert main(argv) == 1
    assert f"the job {job} is inside {ws}, which this command clears" in capsys.readouterr().err
    argv = ["job", "prod", str(job), "--startup-kit", str(tmp_path), "--out", str(ws)]
    assert main(argv) == 1
    assert f"the job {job} is inside {ws}, which this command clears" in capsys.readouterr().err
    assert snapshot(tmp_path) == before


def test_prod_names_a_folder_that_is_no_admins_startup_kit(tmp_path, capsys):
    configs = demo_configs(tmp_path)
    kit = tmp_path / "kit"
    kit.mkdir()
    argv = ["job", "prod", "--config", str(configs), "--startup-kit", str(kit)]
    argv += ["--out", str(tmp_path / "out")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"startup kit {kit} has no startup/fed_admin.json" in err
    assert not (tmp_path / "out").exists()


def test_a_build_without_custom_code_says_what_each_site_needs(tmp_path, capsys):
    configs = demo_configs(tmp_path)
    out = tmp_path / "jobs"
    assert main(["job", "build", "--config", str(configs), "--out", str(out), "--no-custom"]) == 0
    printed = capsys.readouterr().out
    assert f"job written to {out / 'fedforest-demo'}" in printed
    assert "no code in custom/: every site needs fedforest installed" in printed
    assert not list((out / "fedforest-demo").rglob("custom/fedforest"))


def test_the_results_table_of_a_finished_job(tmp_path, capsys):
    results = json.loads((ROOT / "tests" / "cli" / "data" / "demo_results.json").read_text())
    table = format_results(results)
    for site in results["metrics"]:
        assert site in table
    assert all(strategy in table for strategy in results["strategies"])
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    from fedforest.cli.job import _show_results

    assert results["status"] == "finished" and _show_results(path, None) == 0
    out = capsys.readouterr().out
    assert table in out and f"results: {path}" in out and "FLARE's output" not in out
