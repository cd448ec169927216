"""The benchmarks' shared harness (``benchmarks/harness.py``), on a tiny benchmark.

The tiny benchmark below is built as every ``benchmarks/bench_*.py`` is: the
harness's parser and argument types, its logging and progress lines, its
timing, the in-process job of a small config folder, and its results files.
The committed results in ``benchmarks/results`` are held by the harness's
format and render as their reports.
"""

from __future__ import annotations

import argparse
import doctest
import importlib
import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from benchmarks import harness
from data_prep.make_demo_data import make_demo_data
from fedforest.federation.offline import site_runners

ROOT = Path(__file__).resolve().parents[1]
logger = logging.getLogger("bench_tiny")


def tiny_configs(folder: Path, rows: int = 60, trees: int = 4, **job) -> Path:
    """The demo's three hospitals, small: ``rows`` per site, ``trees`` per site, no tuning."""
    data = folder / "data"
    make_demo_data(data, rows=rows, seed=1)
    configs = folder / "site_configs"
    configs.mkdir(parents=True)
    spec = yaml.safe_load((ROOT / "site_configs" / "job.yaml").read_text())
    spec["forest"]["n_estimators"] = trees
    spec["election"]["auto_tune"] = False
    spec["evaluation"]["calibration"] = "none"
    spec["job"].update(job)
    (configs / "job.yaml").write_text(yaml.safe_dump(spec))
    for site in spec["job"]["sites"]:
        cfg = yaml.safe_load((ROOT / "site_configs" / f"{site}.yaml").read_text())
        cfg["data_path"] = str(data / f"{site}.csv")
        (configs / f"{site}.yaml").write_text(yaml.safe_dump(cfg))
    return configs


def tiny_main(argv=None) -> dict:
    """A benchmark: the demo job in process, ``--reps`` times, timed."""
    parser = harness.parser("Tiny benchmark: the demo job in process.\n\nMore text.")
    parser.add_argument("--reps", type=harness.at_least(1), default=2)
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args(argv)
    harness.start(logger)
    progress = harness.Progress(logger, args.reps, "repetitions")
    runs = []
    for rep in range(args.reps):
        with harness.timed() as t:
            job = harness.run_job(args.data)
        runs.append({"rep": rep, "seconds": t.seconds, "status": job.results.status})
        progress.step(f"repetition {rep}")
    data = {"reps": args.reps, "runs": runs, "sites": list(job.config.sites)}
    text = "# Tiny\n\n" + "\n".join(f"- {r['rep']}: {r['status']}" for r in runs)
    harness.write_results(args.out, "tiny", data, text, logger)
    return data


def test_a_tiny_benchmark_writes_its_results_in_the_harness_format(tmp_path, caplog):
    configs = tiny_configs(tmp_path / "job")
    out = tmp_path / "results"
    with caplog.at_level(logging.INFO, logger="bench_tiny"):
        data = tiny_main(["--reps", "2", "--data", str(configs), "--out", str(out)])
    assert [r["status"] for r in data["runs"]] == ["finished", "finished"]
    assert sorted(p.name for p in out.iterdir()) == ["tiny.json", "tiny.md"]  # no .tmp left
    saved = harness.read_results(out / "tiny.json")
    assert saved["runs"] == data["runs"] and saved["sites"] == ["site-1", "site-2", "site-3"]
    facts = saved["machine"]
    assert facts["cores"] >= 1 and facts["python"] and facts["numpy"] == np.__version__
    assert facts["nvflare"] and facts["scikit_learn"] and "pools" in facts["threads"]
    assert (out / "tiny.md").read_text() == "# Tiny\n\n- 0: finished\n- 1: finished\n"
    lines = [r.getMessage() for r in caplog.records if r.name == "bench_tiny"]
    assert lines[0].startswith("repetition 0: 1/2 repetitions done, ") and "s left" in lines[0]
    assert lines[1].startswith("repetition 1: 2/2 repetitions done, ")
    assert "left" not in lines[1]
    assert lines[2] == f"wrote {out / 'tiny.json'} and {out / 'tiny.md'}"


class Broken:
    """A site whose every task fails."""

    def run_task(self, task, data, save_dir=None):
        raise RuntimeError("disk on fire")


def test_a_failed_job_is_an_error_naming_why(tmp_path):
    configs = tiny_configs(tmp_path / "job", min_sites=3)
    runners = site_runners(configs)
    runners["site-3"] = Broken()
    with pytest.raises(RuntimeError, match=r"the job in .* failed: .*site-3") as err:
        harness.run_job(configs, runners=runners)
    assert "disk on fire" in str(err.value)


def test_the_json_format():
    data = {
        "a": [1, 2.5, "x", None, True],
        "nested": {"rows": [[1, 2], [3, 4]], "empty": {}, "none": []},
        "nan": float("nan"),
        "numpy": {"i": np.int64(3), "f": np.float32(0.5), "b": np.bool_(True)},
        "array": np.arange(3),
        "tuple": (1, (2, 3)),
        "path": Path("a/b"),
        "inf": [math.inf, -math.inf],
    }
    text = harness.to_json(data)
    assert text.endswith("}\n")
    assert '  "a": [1, 2.5, "x", null, true],\n' in text  # plain lists on one line
    assert '    "rows": [\n      [1, 2],\n      [3, 4]\n    ],\n' in text
    assert json.loads(text) == {
        "a": [1, 2.5, "x", None, True],
        "nested": {"rows": [[1, 2], [3, 4]], "empty": {}, "none": []},
        "nan": None,
        "numpy": {"i": 3, "f": 0.5, "b": True},
        "array": [0, 1, 2],
        "tuple": [1, [2, 3]],
        "path": "a/b",
        "inf": [None, None],
    }
    with pytest.raises(TypeError, match="not JSON serialisable: object"):
        harness.to_json({"x": object()})


def test_a_machine_key_of_the_benchmark_is_kept(tmp_path):
    harness.write_results(tmp_path, "own", {"machine": "mine"}, "text")
    assert harness.read_results(tmp_path / "own.json") == {"machine": "mine"}
    assert (tmp_path / "own.md").read_text() == "text\n"


def test_the_option_conventions():
    p = harness.parser("First paragraph\nstill first.\n\nSecond.")
    assert p.description == "First paragraph\nstill first."
    assert p.parse_args([]).out == harness.RESULTS
    assert harness.parser("x", out=None).parse_args([]) == argparse.Namespace()
    assert harness.int_list("3, 10,30") == [3, 10, 30] and harness.int_list("") == []
    assert harness.float_list("0.3,0.7") == [0.3, 0.7]
    assert harness.name_list("a, b,,c") == ["a", "b", "c"]
    assert harness.at_least(2)("5") == 5
    for parse, text, message in [
        (harness.int_list, "3,x", "a comma-separated list of integers"),
        (harness.int_list, "-1", "integers >= 0 only"),
        (harness.float_list, "nan", "finite numbers only"),
        (harness.at_least(2), "1", "allowed: >= 2"),
        (harness.at_least(2), "two", "is not an integer"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse(text)
    assert harness.command("bench_job.py", ["--modes", "server"]) == (
        "python benchmarks/bench_job.py --modes server"
    )


def test_timing_and_machine_facts():
    with harness.timed() as t:
        sum(range(10_000))
    assert t.seconds >= 0 and t.cpu_seconds >= 0
    assert harness.best_time(lambda: None, 3) >= 0
    facts = harness.machine()
    assert facts["cpu_count"] >= facts["cores"] >= 1
    assert f"{facts['cores']} cores" in harness.machine_text(facts)
    assert "NVIDIA FLARE" in harness.machine_text(facts)


#: Committed results and what renders their markdown from the JSON (bench, function, args).
RENDERED = {
    "job": ("bench_job", "markdown", lambda d: [d]),
    "experiment": ("bench_experiment", "markdown", lambda d: [d]),
    "payload": ("bench_payload", "markdown", lambda d: [d]),
    "scale": ("bench_scale", "markdown", lambda d: [d]),
    "scale_seeds": ("bench_scale_seeds", "markdown", lambda d: [d]),
    "inference": ("bench_inference", "markdown", lambda d: [d]),
    "inference_regression": ("bench_inference", "markdown", lambda d: [d]),
    "strategy_ideas": ("bench_strategy_ideas", "render", lambda d: [d, d["config"]]),
    "quality": ("bench_quality", "render", lambda d: [d, d["config"]]),
    "quality_noniid_holdout": ("bench_quality", "render_noniid_holdout", lambda d: [d]),
    "hospitals": ("bench_hospitals", "markdown", lambda d: [d, d]),
    "oob_calibration": ("bench_oob_calibration", "markdown", lambda d: [d, d]),
    "privacy": ("bench_privacy", "markdown", lambda d: [d]),
}
COMMITTED = sorted(p.stem for p in (ROOT / "benchmarks" / "results").glob("*.json"))


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_results_are_held_by_the_harness_format(name):
    saved = harness.read_results(ROOT / "benchmarks" / "results" / f"{name}.json")
    assert json.loads(harness.to_json(saved)) == saved


def headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_committed_results_render_as_their_report(name):
    # the benchmark's report renders from the committed file (its wording may have moved on
    # since the file was measured; its sections are the same)
    path = ROOT / "benchmarks" / "results" / f"{name}.json"
    module, function, args = RENDERED[name]
    render = getattr(importlib.import_module(f"benchmarks.{module}"), function)
    text = render(*args(harness.read_results(path)))
    assert headings(text) == headings(path.with_suffix(".md").read_text())
    assert text.count("\n|") >= 2  # its tables


def test_shipped_sections_are_copies_of_the_job_users_edit():
    shipped = yaml.safe_load(harness.SHIPPED_JOB.read_text())
    sections = harness.shipped_sections("election", "forest")
    assert sections == {"election": shipped["election"], "forest": shipped["forest"]}
    sections["election"]["always_keep"].append("age")
    assert harness.shipped_sections("election")["election"] == shipped["election"]
    with pytest.raises(KeyError, match="no sections \\['nonsense'\\]"):
        harness.shipped_sections("election", "nonsense")


def test_a_targets_margin_names_both_sides_and_its_runs():
    text = harness.paired_margin("auto", "local", -0.0123, 0.0046, 10, "seeds")
    assert text == " (auto − local -0.012, standard error 0.005 over 10 seeds)"
    assert harness.paired_margin("deployed", "local", 0.0007, 0.001, 4, "repetitions", 4) == (
        " (deployed − local +0.0007, standard error 0.0010 over 4 repetitions)"
    )
    # one run: no standard error to give
    assert harness.paired_margin("auto", "local", 0.0, float("nan"), 1, "seeds") == (
        " (auto − local +0.000)"
    )
    note = harness.margins_note("repetition by repetition", "repetitions")
    assert "repetition by repetition, then their mean" in note
    assert note.endswith("on other repetitions.")
    # and the harness's examples
    result = doctest.testmod(harness)
    assert result.failed == 0 and result.attempted >= 5
