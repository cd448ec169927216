"""``fedforest report``: report.md and figures from a job's results.json, old and new."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

from fedforest.cli import main
from fedforest.cli.report import REPORT_COMMAND
from fedforest.federation.job_results import RESULTS_FORMAT, RESULTS_VERSION
from fedforest.metrics import calibration_bins, score_all
from fedforest.outputs import MARKER

#: The demo job's results.json as fedforest wrote it before calibration (no format/version).
DEMO = Path(__file__).resolve().parent / "data" / "demo_results.json"
PNG = b"\x89PNG\r\n\x1a\n"
CALIBRATED = ("brier", "log_loss", "ece")


def links(report: Path) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report.read_text(encoding="utf-8"))


def assert_png(path: Path) -> None:
    assert path.is_file(), path
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == PNG, path


def with_calibration(data: dict) -> dict:
    """The demo results with the rows a calibrating job writes: scores, method, bins, choice."""
    data = copy.deepcopy(data)
    rng = np.random.default_rng(3)
    methods = ("none", "prior", "sigmoid", "isotonic")
    for s, per in enumerate(data["metrics"].values()):
        risk = rng.uniform(0, 1, 250)
        y = (rng.uniform(0, 1, 250) < risk).astype(int)
        for k, row in enumerate(per.values()):
            p = np.clip(0.5 + (0.6 + 0.1 * k) * (risk - 0.5) + rng.normal(0, 0.05, 250), 0, 1)
            proba = np.c_[1 - p, p]
            row.update(score_all(y, proba, [0, 1], CALIBRATED))
            row["calibration"] = methods[(s + k) % 4]
            row["bins"] = calibration_bins(y, proba, [0, 1])
        per["auto"]["chosen_calibration"] = per["auto"]["calibration"]
        per["auto"]["runner_up"] = "mp" if s else None
        per["auto"]["validation"] = {"mp": 0.4812, per["auto"].get("chosen", "mp"): 0.47}
    data = {"format": RESULTS_FORMAT, "version": RESULTS_VERSION, **data}  # a current file
    return json.loads(json.dumps(data))  # plain JSON, as the job writes it


@pytest.fixture()
def old_results(tmp_path) -> Path:
    path = tmp_path / "run" / "results.json"
    path.parent.mkdir()
    path.write_text(DEMO.read_text())
    return path


@pytest.fixture()
def new_results(tmp_path) -> Path:
    path = tmp_path / "run" / "results.json"
    path.parent.mkdir()
    path.write_text(json.dumps(with_calibration(json.loads(DEMO.read_text())), indent=2))
    return path


def test_results_with_calibration_get_diagrams_tables_and_the_chart(new_results, capsys):
    assert main(["report", str(new_results)]) == 0
    out = new_results.parent / "report"
    assert capsys.readouterr().out.strip() == f"report: {out / 'report.md'}"
    report = out / "report.md"
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# fedforest job `fedforest-demo`: finished")  # render_report's text
    assert "## Calibration" in text and "Missing:" not in text
    expected = {f"reliability-site-{i}.png" for i in (1, 2, 3)} | {"strategies-by-site.png"}
    assert set(links(report)) == expected
    for name in expected:
        assert_png(out / name)
    assert "| strategy | calibration | Brier | log-loss | ECE |" in text
    # strategies spelled out; the Brier score with its interval when the rows carry one
    assert re.search(
        r"\| Auto \(each site's choice\) → Local trees \| \w+ \| [^|]+ \| \S+ \| \S+ \|",
        text,
    )
    assert "Runner-up: Marginal prediction (validation score 0.4812)" in text
    assert "No runner-up" in text  # site-1's auto had a single candidate
    site_1 = text.split("## Calibration")[1].split("### site-1")[1].split("###")[0]
    assert site_1.count("**") >= 2 * 3  # the best of each score is in bold (ties too)
    assert "No Brier" not in text
    assert (
        (out / MARKER).read_text().startswith(f"fedforest output folder, made by: {REPORT_COMMAND}")
    )


def test_old_results_without_calibration_get_the_chart_and_say_what_is_missing(
    old_results, tmp_path, capsys
):
    out = tmp_path / "figures"
    assert main(["report", str(old_results), "--out", str(out)]) == 0
    assert str(out / "report.md") in capsys.readouterr().out
    report = out / "report.md"
    text = report.read_text(encoding="utf-8")
    assert links(report) == ["strategies-by-site.png"]
    assert_png(out / "strategies-by-site.png")
    assert not list(out.glob("reliability-*.png"))
    assert "the calibration bins: no reliability diagrams" in text
    assert "the calibration metrics (Brier score, log-loss, ECE)" in text
    assert "Deployed (`auto`): Local trees." in text  # what the old file does say
    assert "No Brier score in these results: the chart shows AUC only." in text
    assert "### Mean over sites" in text  # the job's own report comes first


def test_a_second_run_replaces_its_own_folder(new_results, capsys):
    assert main(["report", str(new_results)]) == 0
    assert main(["report", str(new_results)]) == 0
    assert len(list((new_results.parent / "report").glob("*.png"))) == 4


def test_a_folder_with_a_users_file_is_refused_and_left_alone(new_results, capsys):
    out = new_results.parent / "report"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["report", str(new_results)]) == 1
    err = capsys.readouterr().err
    assert f"refusing to write into {out}" in err and "notes.txt" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    # the same in a folder `fedforest report` made, once a user's file is added to it
    assert main(["report", str(new_results), "--out", str(out.parent / "r2")]) == 0
    (out.parent / "r2" / "mine.csv").write_text("x")
    assert main(["report", str(new_results), "--out", str(out.parent / "r2")]) == 1
    assert "mine.csv" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not a fedforest results.json: not JSON"),
        (json.dumps([1, 2]), "expected a dict"),
        (json.dumps({"jobs": "x"}), "unknown fields ['jobs']"),
        (json.dumps({"format": "fedforest/results", "version": 99, "job": "x"}), "version 99"),
    ],
)
def test_a_bad_results_file_is_refused_naming_it(tmp_path, capsys, content, message):
    path = tmp_path / "results.json"
    path.write_text(content)
    assert main(["report", str(path)]) == 1
    err = capsys.readouterr().err
    assert str(path) in err and message in err
    assert not (tmp_path / "report").exists()  # refused before any folder is made


def test_a_missing_file_is_refused_naming_it(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.json")]) == 1
    assert f"no such results file: {tmp_path / 'nope.json'}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "where", "message"),
    [
        (lambda p: p["mp"]["bins"]["observed"].__setitem__(0, 7), ".mp': bins", "'observed[0]'"),
        (lambda p: p["mp"].update(brier="low"), ".mp.brier'", "is 'low'"),
        (lambda p: p["auto"].update(runner_up=5), ".auto.runner_up'", "is 5"),
    ],
)
def test_malformed_rows_are_refused_naming_the_file_site_and_strategy(
    new_results, capsys, change, where, message
):
    data = json.loads(new_results.read_text())
    change(data["metrics"]["site-2"])
    new_results.write_text(json.dumps(data))
    assert main(["report", str(new_results)]) == 1
    err = capsys.readouterr().err
    assert f"{new_results}: field 'metrics.site-2{where}" in err and message in err
    assert not (new_results.parent / "report").exists()  # refused before any folder is made


def test_a_failed_job_gets_its_report_and_no_figures(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"job": "j", "status": "failed", "error": "too few sites"}))
    assert main(["report", str(path)]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "too few sites" in text and "no per-site metrics" in text
    assert not list((tmp_path / "report").glob("*.png"))


# --------------------------------------------------------------------------- real jobs
def _in_process_job(folder: Path, task: str, rows: int) -> Path:
    """The demo (or regression demo) job run in this process (JobDriver, the sites as
    runners); the path of the results.json the server wrote, untouched."""
    import sys

    import yaml

    from fedforest.federation.config import JobConfig, SiteConfig
    from fedforest.federation.driver import InProcessExchange, JobDriver
    from fedforest.federation.server import JobServer
    from fedforest.federation.site import SiteRunner

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "data_prep"))
    from make_demo_data import make_demo_data

    make_demo_data(folder / "data", rows=rows, seed=0, task=task)
    shipped = root / "site_configs" / ("regression" if task == "regression" else "")
    configs = folder / "site_configs"
    configs.mkdir()
    job = yaml.safe_load((shipped / "job.yaml").read_text())
    job["forest"]["n_estimators"] = 6
    job["election"]["enabled"] = False
    (configs / "job.yaml").write_text(yaml.safe_dump(job))
    for site in job["job"]["sites"]:
        cfg = yaml.safe_load((shipped / f"{site}.yaml").read_text())
        cfg["data_path"] = str(folder / "data" / f"{site}.csv")
        (configs / f"{site}.yaml").write_text(yaml.safe_dump(cfg))
    config = JobConfig.load(configs / "job.yaml")
    runners = {
        s: SiteRunner(
            SiteConfig.load(configs / f"{s}.yaml", task=config.task, validation=config.validation),
            config.seed,
        ).load(job=config)
        for s in config.sites
    }
    run_dir = folder / "run"
    driver = JobDriver(JobServer(config), InProcessExchange(runners), run_dir=run_dir)
    assert driver.run().finished
    return run_dir / "results.json"


@pytest.fixture(scope="module")
def small_job(tmp_path_factory) -> Path:
    """The demo job with 120 rows a site: about 30 test rows each, too few."""
    return _in_process_job(tmp_path_factory.mktemp("small_job"), "classification", 120)


@pytest.fixture(scope="module")
def regression_job(tmp_path_factory) -> Path:
    return _in_process_job(tmp_path_factory.mktemp("regression_job"), "regression", 160)


def test_a_small_jobs_results_carry_counts_intervals_and_warnings(small_job, capsys):
    data = json.loads(small_job.read_text())
    assert data["version"] == 9
    assert data["validation"] == dict.fromkeys(data["metrics"], "holdout")
    assert set(data["sample_warnings"]) == set(data["sites"])  # about 30 test rows each
    for site in data["sites"]:
        rows, events = data["test_rows"][site], data["test_events"][site]
        assert rows < 50 and 0 < events < rows
        assert f"{rows} test rows (fewer than 50)" in data["sample_warnings"][site]
        for strategy, row in data["metrics"][site].items():
            assert row["events"] == events
            for metric, (lo, hi) in (row["intervals"] or {}).items():
                assert lo <= row[metric] <= hi, (site, strategy, metric)
    # the job's own report.md warns and shows the counts and the intervals
    job_md = (small_job.parent / "report.md").read_text()
    assert "## Sites with too few test rows or events" in job_md
    site = data["sites"][0]
    assert (
        f"### {site} ({data['test_rows'][site]} test rows, {data['test_events'][site]} events)"
        in (job_md)
    )
    assert "> **Warning:** unreliable metrics" in job_md
    assert re.search(r"\| Marginal prediction \| \d\.\d{3} \(\d\.\d{3}–\d\.\d{3}\) \|", job_md)
    # fedforest report: the same warnings on stderr and in report.md, axes naming the outcome
    assert main(["report", str(small_job)]) == 0
    err = capsys.readouterr().err
    assert all(f"warning: {s}: unreliable metrics" in err for s in data["sites"])
    text = (small_job.parent / "report" / "report.md").read_text()
    assert text.count("> **Warning:** unreliable metrics") >= 2 * len(data["sites"])
    assert "Colour is scaled within each site" in text
    for name in links(small_job.parent / "report" / "report.md"):
        assert_png(small_job.parent / "report" / name)


def test_a_small_sites_skipped_calibration_reaches_the_results_and_the_report(small_job, capsys):
    data = json.loads(small_job.read_text())
    skipped = {
        site: {row["calibration_skipped"] for row in per.values()}
        for site, per in data["metrics"].items()
    }
    # 24 validation rows a site: too few of a class for isotonic, which auto then skips
    noted = [site for site, texts in skipped.items() if any(texts)]
    assert noted, skipped
    for site in noted:
        assert any(
            "isotonic: it needs 10 validation rows of every class" in t for t in skipped[site] if t
        )
    job_md = (small_job.parent / "report.md").read_text()
    assert "> **Calibration skipped**" in job_md and "isotonic: it needs 10" in job_md
    assert main(["report", str(small_job)]) == 0
    text = (small_job.parent / "report" / "report.md").read_text()
    assert "> **Calibration skipped**" in text


def test_an_untouched_regression_results_json_gets_its_report(regression_job, capsys):
    data = json.loads(regression_job.read_text())
    assert all(row["bins"] is None for per in data["metrics"].values() for row in per.values())
    assert main(["report", str(regression_job)]) == 0
    out = regression_job.parent / "report"
    text = (out / "report.md").read_text()
    assert "A regression job predicts numbers, not risks" in text
    assert links(out / "report.md") == ["strategies-by-site.png"]
    assert_png(out / "strategies-by-site.png")
    assert "RMSE and MAE by strategy and site" in text
    row = data["metrics"]["site-1"]["mp"]
    assert row["events"] is None and set(row["intervals"]) == {"rmse", "mae"}
    assert re.search(r"\| Marginal prediction \| \d+\.\d{3} \(\d+\.\d{3}–\d+\.\d{3}\) \|", text)


def test_names_holding_html_or_markdown_are_escaped(new_results, capsys):
    data = json.loads(new_results.read_text())
    hostile = "<script>alert(1)</script>|**x**_`y`"
    data["sites"][data["sites"].index("site-2")] = hostile
    for key in ("metrics", "test_rows", "privacy", "payload_bytes"):
        data[key][hostile] = data[key].pop("site-2")
    data["strategies"].append("my|<b>strategy</b>")
    for per in data["metrics"].values():
        per["my|<b>strategy</b>"] = per["mp"]
    data["dropped_sites"] = {"<img src=x>": "train: <b>bold</b> | broken"}
    new_results.write_text(json.dumps(data))
    assert main(["report", str(new_results)]) == 0
    text = (new_results.parent / "report" / "report.md").read_text()
    assert "<script>" not in text and "<b>" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\|\\*\\*x\\*\\*\\_\\`y\\`" in text
    assert "my\\|&lt;b&gt;strategy&lt;/b&gt;" in text
    # every table row still has its columns: no name adds a cell
    for table in re.findall(r"(?:^\|.*\|$\n?)+", text, flags=re.M):
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in table.strip().splitlines()}
        assert len(widths) == 1, table
