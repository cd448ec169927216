"""Every shell command of README.md and docs/getting-started.md runs as written.

The ```bash blocks are read from the pages, and every command in them is run by a test:

* **getting-started.md**, step by step, in a folder of its own: four hospitals' CSV files
  with the headers the page lists, the YAML files exactly as the page writes them, then
  every command of the page (build, simulate, predict on new rows, report): one simulator
  run of a four-hospital job.
* **README.md** in a copy of the project: ``make demo`` (one simulator run, whose console
  must show what the README says it shows), then the README's other commands against its
  output. The make targets that start a POC or a provisioned deployment, and the
  regression and survival demos' simulator runs, are the recipes the tests named in :data:`COVERED` run
  (their ``make -n`` recipe is checked here); ``make test`` is this suite.

A command added to either page is run by the first two, or must be named in
:data:`COVERED`; otherwise :func:`test_every_command_of_the_pages_is_run` fails.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
VENV = Path(sys.executable).parent.parent
BIN = VENV / "bin"

pytestmark = pytest.mark.flare

#: Commands of README.md that another test runs (the test's node id), with the recipe
#: ``make -n`` must show for a make target.
COVERED = {
    "make demo-regression": (
        "tests/flare/test_simulator.py::test_a_regression_job_runs_in_the_simulator",
        "fedforest job simulate --config site_configs/regression --workspace "
        "workspaces/demo-regression",
    ),
    "make demo-survival": (
        "tests/flare/test_simulator.py::test_a_survival_job_runs_in_the_simulator",
        "fedforest job simulate --config site_configs/survival --workspace "
        "workspaces/demo-survival",
    ),
    "make poc": (
        "tests/flare/test_poc.py::test_poc_gives_the_simulators_results",
        "fedforest job poc --config site_configs --workspace workspaces/poc-env --out "
        "workspaces/poc",
    ),
    "make prod-local": (
        "tests/flare/test_prod.py::test_prod_on_one_machine_gives_the_simulators_results",
        "deploy/prod_local.py --project deploy/project.yml --config site_configs",
    ),
    "make test": ("tests/ (the suite itself)", "-m pytest"),
}


def shell_commands(page: Path) -> list[str]:
    """The commands of the page's ```bash and ```sh blocks: continuation lines joined,
    comments and blank lines left out."""
    commands = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", page.read_text(), flags=re.S):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(re.sub(r"\s+", " ", line))
    return commands


def yaml_files(page: Path) -> dict[str, str]:
    """The page's ```yaml blocks whose first line names their file (``# my_study/a.yaml``)."""
    files = {}
    for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S):
        first = block.splitlines()[0]
        match = re.fullmatch(r"# (\S+\.yaml)", first.strip())
        if match:
            files[match.group(1)] = block
    return files


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("MAKEFLAGS", None)
    return env


def run(command: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def needs_the_environment():
    if not (BIN / "fedforest").is_file():
        pytest.skip(f"no fedforest command in {BIN} (run the tests from the project's .venv)")


# --------------------------------------------------------------------------- getting started
def hospitals(folder: Path, rows: int = 300) -> dict[str, pd.DataFrame]:
    """The four hospitals of getting-started.md (the columns its table lists), and north's
    new patients; written to ``folder``."""
    rng = np.random.default_rng(7)

    def patients(n):
        m = rng.normal(size=n)  # the metabolic state behind the outcome
        age = rng.integers(25, 85, size=n)
        risk = 1.2 * m + 0.03 * (age - 55) + rng.normal(scale=0.7, size=n)
        return {
            "age": age,
            "bmi": np.round(27 + 3 * m + rng.normal(scale=2.5, size=n), 1),
            "glucose": np.round(100 + 18 * m + rng.normal(scale=8, size=n)),
            "insulin": np.round(12 + 4 * m + rng.normal(scale=3, size=n), 1),
            "hba1c": np.round(5.6 + 0.7 * m + rng.normal(scale=0.3, size=n), 1),
            "cholesterol": np.round(200 + 15 * m + rng.normal(scale=25, size=n)),
            "smoker": rng.choice(["never", "former", "current"], size=n, p=[0.5, 0.3, 0.2]),
            "outcome": (risk > 0.3).astype(int),
        }

    frames = {}
    north = pd.DataFrame(patients(rows))
    frames["north"] = north[["age", "bmi", "glucose", "insulin", "outcome"]]
    south = pd.DataFrame(patients(rows)).rename(columns={"glucose": "glucose_mg_dl"})
    south["outcome"] = south["outcome"].map({0: "no", 1: "yes"})
    frames["south"] = south[["age", "bmi", "glucose_mg_dl", "hba1c", "outcome"]]
    east = pd.DataFrame(patients(rows)).rename(columns={"bmi": "BMI"})
    frames["east"] = east[["age", "BMI", "glucose", "smoker", "outcome"]]
    west = pd.DataFrame(patients(rows))
    west.insert(0, "record_no", np.arange(1, rows + 1))
    frames["west"] = west[["record_no", "age", "glucose", "insulin", "cholesterol", "outcome"]]
    new = pd.DataFrame(patients(25))[["age", "bmi", "glucose", "insulin"]]
    new.insert(0, "patient_id", [f"N-{i:04d}" for i in range(len(new))])
    frames["north_new"] = new
    folder.mkdir(parents=True)
    for name, frame in frames.items():
        frame.to_csv(folder / f"{name}.csv", index=False)
    return frames


@pytest.fixture(scope="module")
def my_study(tmp_path_factory):
    """getting-started.md followed in a folder of its own: every command's result."""
    needs_the_environment()
    folder = tmp_path_factory.mktemp("my_study")
    hospitals(folder / "hospitals")
    for path, text in yaml_files(GETTING_STARTED).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    done = {}
    for command in shell_commands(GETTING_STARTED):
        done[command] = result = run(command, folder)
        assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    return folder, done


def test_the_pages_hospitals_are_the_tests(tmp_path):
    """The headers getting-started.md lists are those of the files the test writes."""
    frames = hospitals(tmp_path / "hospitals")
    listed = dict(
        re.findall(r"\| `hospitals/(\w+)\.csv` \| `([^`]+)` \|", GETTING_STARTED.read_text())
    )
    assert listed == {n: ",".join(f.columns) for n, f in frames.items() if n != "north_new"}
    assert set(yaml_files(GETTING_STARTED)) == {
        f"my_study/{n}.yaml" for n in ("north", "south", "east", "west", "job")
    }


def test_getting_started_builds_runs_predicts_and_reports(my_study):
    folder, done = my_study
    assert (folder / "jobs" / "my-study" / "meta.json").is_file()
    simulate = next(r for c, r in done.items() if c.startswith("fedforest job simulate"))
    assert "job my-study: finished" in simulate.stdout
    for site in ("north", "south", "east", "west"):
        assert f"{site} deploys" in simulate.stdout
    predictions = pd.read_csv(folder / "north_predictions.csv")
    new = pd.read_csv(folder / "hospitals" / "north_new.csv")
    assert list(predictions.columns) == [
        "patient_id",
        "predicted_outcome",
        "p_outcome=0",
        "p_outcome=1",
    ]
    assert predictions["patient_id"].tolist() == new["patient_id"].tolist()
    assert np.allclose(predictions[["p_outcome=0", "p_outcome=1"]].sum(axis=1), 1)
    report = folder / "workspaces" / "my-study-report"
    assert (report / "report.md").is_file() and (report / "strategies-by-site.png").is_file()


# --------------------------------------------------------------------------- README
#: What the README's quick start needs of the project (copied; the package is the installed
#: one, from this checkout).
PROJECT = (
    "Makefile",
    "data_prep",
    "site_configs",
    "jobs",
    "deploy",
    "requirements.txt",
    "requirements-site.txt",
    "pyproject.toml",
)


def make(target: str, cwd: Path, dry: bool = False) -> subprocess.CompletedProcess:
    """``make <target>`` with this environment as the project's (never reinstalled)."""
    stamp = VENV / ".installed"
    # --no-print-directory: no "Entering/Leaving directory" lines when the suite itself runs
    # under make (`make test`, as CI does)
    flags = ["--no-print-directory", *(["-n"] if dry else [])]
    return run(" ".join(["make", *flags, f"VENV={VENV}", f"-o {stamp}", target]), cwd, timeout=1200)


@pytest.fixture(scope="module")
def readme_demo(tmp_path_factory):
    """A copy of the project where ``make demo`` ran: (folder, its console output)."""
    needs_the_environment()
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    folder = tmp_path_factory.mktemp("readme") / "project"
    folder.mkdir()
    for name in PROJECT:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, folder / name)
    result = make("demo", folder)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return folder, result.stdout


def _masked(text: str) -> str:
    """Console text with its timings masked (``train: 3 of 3 sites replied, 1.4 s``)."""
    return re.sub(r"\d+(\.\d+)? s\b", "N s", text)


def test_make_demo_prints_what_the_readme_shows(readme_demo):
    """The README's block is docs/generate.py's excerpt of the console (``make docs-demo``
    writes it), the phases' timings aside."""
    _, shown = readme_demo
    gen = _generator()
    assert _masked(gen.demo_excerpt(shown)) == _masked(gen.readme_demo_block()), (
        "make demo no longer prints what README.md shows (run `make docs-demo`); it printed:\n"
        + shown
    )


def test_the_readmes_commands_run_on_the_demos_output(readme_demo):
    folder, _ = readme_demo
    demo = [c for c in shell_commands(README) if not c.startswith("make ")]
    assert demo, "README.md has no fedforest command"
    for command in demo:
        if command == "fedforest job simulate --config site_configs --workspace workspaces/demo":
            continue  # what make demo ran (test_every_command_of_the_pages_is_run)
        result = run(command, folder)
        assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    assert (folder / "predictions.csv").is_file()
    assert (folder / "workspaces" / "demo-report" / "report.md").is_file()


def test_the_make_targets_run_the_commands_the_covering_tests_run(readme_demo):
    folder, _ = readme_demo
    for target, (node, recipe) in COVERED.items():
        shown = make(target.removeprefix("make "), folder, dry=True)
        assert shown.returncode == 0, shown.stderr
        recipes = re.sub(r"\s+", " ", shown.stdout.replace("\\\n", " "))
        assert recipe in recipes, f"{target}: make -n shows\n{shown.stdout}"
        path, _, name = node.partition("::")
        if name:
            assert f"def {name}(" in (ROOT / path).read_text(), node
    # the regression demo's data and job, up to its simulator run (COVERED)
    assert make("demo-data-regression", folder).returncode == 0
    built = run(
        "fedforest job build --config site_configs/regression --out jobs-regression", folder
    )
    assert built.returncode == 0, built.stderr
    # the survival demo's data (GBSG2, bundled with scikit-survival) and job
    assert make("demo-data-survival", folder).returncode == 0
    built = run("fedforest job build --config site_configs/survival --out jobs-survival", folder)
    assert built.returncode == 0, built.stderr


def test_every_command_of_the_pages_is_run(readme_demo):
    folder, _ = readme_demo
    recipe = make("demo", folder, dry=True).stdout
    for command in shell_commands(README):
        if command.startswith("make "):
            assert command == "make demo" or command in COVERED, (
                f"README.md: {command!r} is run by no test (add it to COVERED or run it here)"
            )
        elif command.startswith("fedforest job simulate") or command.startswith(
            "fedforest job poc"
        ):
            assert f"{BIN}/{command}" in recipe, (
                f"README.md: {command!r} is not what make demo runs"
            )
        else:
            assert command.startswith("fedforest "), f"README.md: {command!r} is run by no test"
    for command in shell_commands(GETTING_STARTED):
        assert command.startswith("fedforest "), f"getting-started.md: {command!r}"
