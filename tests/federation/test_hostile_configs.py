"""``fedforest job build`` on job and site YAML files edited at every key.

Each case edits the shipped demo configuration (``site_configs/``, its data
made by ``data_prep/make_demo_data.py``): a value at 0, negative, tiny,
huge, NaN, infinite, a boolean, text or a list where a number goes, names
outside their grammar, files that are not UTF-8 YAML. What the job would
refuse once it runs is refused when it is built, naming the file, the key,
the value and what is allowed; never a traceback, never a raw warning
(warnings are errors), never scikit-learn's own message. What a job accepts
builds, with a privacy warning only where a value loosens the policy.
"""

from __future__ import annotations

import copy
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from fedforest.cli import main
from fedforest.flare.job import load_configs

ROOT = Path(__file__).resolve().parents[2]
SITES = ("site-1", "site-2", "site-3")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The shipped configs and data (200 rows a site) of both tasks: {task: (job, sites)}."""
    sys.path.insert(0, str(ROOT / "data_prep"))
    from make_demo_data import make_demo_data

    out = {}
    for task, folder in (("classification", ""), ("regression", "regression")):
        data = tmp_path_factory.mktemp(f"data_{task}")
        make_demo_data(data, rows=200, seed=0, task=task)
        shipped = ROOT / "site_configs" / folder
        job = yaml.safe_load((shipped / "job.yaml").read_text())
        sites = {}
        for site in SITES:
            sites[site] = yaml.safe_load((shipped / f"{site}.yaml").read_text())
            sites[site]["data_path"] = str(data / f"{site}.csv")
        out[task] = (job, sites)
    return out


def write(folder: Path, job, sites, raw: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.yaml").write_text(yaml.safe_dump(job))
    for site, config in sites.items():
        (folder / f"{site}.yaml").write_text(yaml.safe_dump(config))
    for name, data in (raw or {}).items():
        (folder / name).write_bytes(data)
    return folder


def build(tmp_path, capsys, folder: Path) -> tuple[int, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = main(["job", "build", "--config", str(folder), "--out", str(tmp_path / "jobs")])
    return code, capsys.readouterr().err


# --------------------------------------------------------------------- the edits
def J(*path, value):
    def edit(job, sites):
        target = job
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value

    return edit


def S(*path, value, site="site-1"):
    def edit(job, sites):
        target = sites[site]
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value

    return edit


def both(*edits):
    def edit(job, sites):
        for e in edits:
            e(job, sites)

    return edit


NAN, INF = float("nan"), float("inf")

#: (id, task, edit, file, fragments: the key and what is allowed).
REFUSED = [
    (
        "seed-negative",
        "c",
        J("job", "seed", value=-1),
        "job",
        ["'job.seed' is -1", "[0, 4294967295]"],
    ),
    ("seed-huge", "c", J("job", "seed", value=2**32), "job", ["'job.seed'"]),
    ("seed-fraction", "c", J("job", "seed", value=1.5), "job", ["'job.seed' is 1.5"]),
    ("seed-bool", "c", J("job", "seed", value=True), "job", ["'job.seed' is True"]),
    ("seed-text", "c", J("job", "seed", value="x"), "job", ["'job.seed' is 'x'"]),
    ("seed-list", "c", J("job", "seed", value=[1]), "job", ["'job.seed' is [1]"]),
    ("seed-nan", "c", J("job", "seed", value=NAN), "job", ["'job.seed' is nan"]),
    ("min-sites-0", "c", J("job", "min_sites", value=0), "job", ["'job.min_sites'", "[1, 3]"]),
    ("min-sites-4", "c", J("job", "min_sites", value=4), "job", ["'job.min_sites'"]),
    ("timeout-negative", "c", J("job", "timeouts", "schema", value=-1), "job", ["timeouts.schema"]),
    ("timeout-inf", "c", J("job", "timeouts", "train", value=INF), "job", ["timeouts.train"]),
    ("timeout-huge", "c", J("job", "timeouts", "vote", value=1e308), "job", ["timeouts.vote"]),
    ("timeout-text", "c", J("job", "timeouts", "evaluate", value="1h"), "job", ["timeouts.eval"]),
    ("wait-negative", "c", J("job", "wait_after_min", value=-1), "job", ["'job.wait_after_min'"]),
    ("name-path", "c", J("job", "name", value="../x"), "job", ["'job.name'", "letters"]),
    ("name-html", "c", J("job", "name", value="<b>x</b>"), "job", ["'job.name'"]),
    ("name-reserved", "c", J("job", "name", value="server"), "job", ["'job.name'"]),
    ("sites-one", "c", J("job", "sites", value=["site-1"]), "job", ["'job.sites'", "two"]),
    ("sites-path", "c", J("job", "sites", value=["site-1", "../x"]), "job", ["'job.sites'"]),
    ("depth-negative", "c", J("evaluation", "depth_threshold", value=-1), "job", ["depth_thr"]),
    ("depth-huge", "c", J("evaluation", "depth_threshold", value=2**40), "job", ["50000000"]),
    ("depth-fraction", "c", J("evaluation", "depth_threshold", value=1.5), "job", ["depth_thr"]),
    ("trees-per-site-0", "c", J("evaluation", "trees_per_site", value=0), "job", ["trees_per"]),
    ("trees-per-site-bool", "c", J("evaluation", "trees_per_site", value=True), "job", ["trees"]),
    ("strategies-none", "c", J("evaluation", "strategies", value=[]), "job", ["strategies"]),
    ("strategy-magic", "c", J("evaluation", "strategies", value=["magic"]), "job", ["magic"]),
    ("metric-speed", "c", J("evaluation", "metrics", value=["speed"]), "job", ["'speed'"]),
    ("calibration-platt", "c", J("evaluation", "calibration", value="platt"), "job", ["platt"]),
    ("trees-0", "c", J("forest", "n_estimators", value=0), "job", ["n_estimators", "[1, 10000]"]),
    ("trees-many", "c", J("forest", "n_estimators", value=10_001), "job", ["n_estimators"]),
    ("trees-huge", "c", J("forest", "n_estimators", value=1e308), "job", ["n_estimators"]),
    ("max-depth-0", "c", J("forest", "max_depth", value=0), "job", ["'forest.max_depth'"]),
    ("leaf-0", "c", J("forest", "min_samples_leaf", value=0), "job", ["min_samples_leaf"]),
    ("leaf-many", "c", J("forest", "min_samples_leaf", value=10**6), "job", ["min_samples_leaf"]),
    ("max-features-0", "c", J("forest", "max_features", value=0), "job", ["max_features"]),
    ("max-features-1.5", "c", J("forest", "max_features", value=1.5), "job", ["max_features"]),
    ("max-features-many", "c", J("forest", "max_features", value=100), "job", ["at most"]),
    ("max-features-bool", "c", J("forest", "max_features", value=True), "job", ["max_features"]),
    ("agreement-2", "c", J("surrogates", "min_agreement", value=2), "job", ["min_agreement"]),
    ("agreement-nan", "c", J("surrogates", "min_agreement", value=NAN), "job", ["min_agreement"]),
    ("surrogate-rows-0", "c", J("surrogates", "min_rows", value=0), "job", ["min_rows"]),
    ("freedom-negative", "c", J("election", "freedom_degree", value=-0.1), "job", ["freedom"]),
    ("freedom-above-1", "c", J("election", "freedom_degree", value=1.1), "job", ["freedom"]),
    ("rounds-0", "c", J("election", "tuning_rounds", value=0), "job", ["tuning_rounds"]),
    ("rounds-101", "c", J("election", "tuning_rounds", value=101), "job", ["tuning_rounds"]),
    ("tolerance-negative", "c", J("election", "tolerance", value=-1), "job", ["tolerance"]),
    ("tolerance-nan", "c", J("election", "tolerance", value=NAN), "job", ["tolerance"]),
    ("keep-ghost", "c", J("election", "always_keep", value=["ghost"]), "job", ["always_keep"]),
    ("enabled-text", "c", J("election", "enabled", value="yes"), "job", ["election.enabled"]),
    ("unknown-key", "c", J("forest", "n_trees", value=5), "job", ["'forest.n_trees'", "known"]),
    (
        "reg-isotonic",
        "r",
        J("evaluation", "calibration", value="isotonic"),
        "job",
        ["evaluation.calibration", "regression"],
    ),
    ("reg-auc", "r", J("evaluation", "metrics", value=["auc"]), "job", ["evaluation.metrics"]),
    # a site's YAML
    ("val-0", "c", S("validation_fraction", value=0), "site-1", ["'validation_fraction' is 0"]),
    ("val-1", "c", S("validation_fraction", value=1), "site-1", ["validation_fraction", "(0, 1)"]),
    ("val-negative", "c", S("validation_fraction", value=-0.1), "site-1", ["validation_fract"]),
    ("val-nan", "c", S("validation_fraction", value=NAN), "site-1", ["validation_fraction"]),
    ("val-text", "c", S("validation_fraction", value="20%"), "site-1", ["validation_fraction"]),
    (
        "val-tiny",
        "c",
        both(S("validation", value="holdout"), S("validation_fraction", value=1e-320)),
        "site-1",
        ["validation_fraction"],
    ),
    (
        "val-0.001",
        "c",
        both(S("validation", value="holdout"), S("validation_fraction", value=0.001)),
        "site-1",
        ["validation row"],
    ),
    (
        "validation-mode",
        "c",
        J("evaluation", "validation", value="cross"),
        "job",
        ["'evaluation.validation' is 'cross'", "oob, holdout"],
    ),
    ("site-validation-mode", "c", S("validation", value=True), "site-1", ["'validation' is"]),
    (
        "val-isotonic",
        "c",
        both(
            J("evaluation", "calibration", value="isotonic"),
            S("validation_fraction", value=0.05),
            S("validation", value="holdout"),
        ),
        "job",
        ["'evaluation.calibration' is 'isotonic'", "10 validation rows of every class"],
    ),
    (
        "val-sigmoid-site",
        "c",
        both(
            S("calibration", value="sigmoid"),
            S("validation_fraction", value=0.01),
            S("validation", value="holdout"),
        ),
        "site-1",
        ["'calibration' is 'sigmoid'", "validation rows of every class"],
    ),
    ("val-plus-test", "c", S("validation_fraction", value=0.7), "site-1", ["10% of rows"]),
    ("test-0", "c", S("test_fraction", value=0), "site-1", ["'test_fraction' is 0"]),
    ("test-1", "c", S("test_fraction", value=1.0), "site-1", ["'test_fraction'"]),
    ("test-0.001", "c", S("test_fraction", value=0.001), "site-1", ["test row"]),
    ("noise-tiny", "c", S("privacy", "count_noise_epsilon", value=1e-320), "site-1", ["1e-06"]),
    ("noise-huge", "c", S("privacy", "count_noise_epsilon", value=1e7), "site-1", ["count_noise"]),
    ("noise-0", "c", S("privacy", "count_noise_epsilon", value=0), "site-1", ["count_noise"]),
    ("noise-nan", "c", S("privacy", "count_noise_epsilon", value=NAN), "site-1", ["count_noise"]),
    ("noise-text", "c", S("privacy", "count_noise_epsilon", value="1"), "site-1", ["count_noise"]),
    ("dp-epsilon-tiny", "c", S("privacy", "dp_epsilon", value=1e-320), "site-1", ["dp_epsilon"]),
    ("dp-epsilon-negative", "c", S("privacy", "dp_epsilon", value=-1), "site-1", ["dp_epsilon"]),
    ("dp-trees-0", "c", S("privacy", "dp_trees", value=0), "site-1", ["dp_trees"]),
    ("dp-depth-17", "c", S("privacy", "dp_max_depth", value=17), "site-1", ["dp_max_depth"]),
    ("leaf-rows-0", "c", S("privacy", "min_leaf_rows", value=0), "site-1", ["min_leaf_rows"]),
    ("leaf-rows-many", "c", S("privacy", "min_leaf_rows", value=10**6), "site-1", ["at most"]),
    ("leaf-rows-fraction", "c", S("privacy", "min_leaf_rows", value=1.5), "site-1", ["min_leaf"]),
    ("level-rows-negative", "c", S("privacy", "min_level_rows", value=-1), "site-1", ["min_level"]),
    ("sample-fraction-0", "c", S("privacy", "tree_sample_fraction", value=0), "site-1", ["(0, 1]"]),
    (
        "sample-fraction-big",
        "c",
        S("privacy", "tree_sample_fraction", value=1.5),
        "site-1",
        ["tre"],
    ),
    ("privacy-unknown", "c", S("privacy", "epsilon", value=1), "site-1", ["epsilon"]),
    ("selector", "c", S("selector", value="magic"), "site-1", ["'selector' is 'magic'"]),
    ("lasso-c-tiny", "c", S("selector_params", "C", value=1e-320), "site-1", ["selector_params.C"]),
    ("lasso-c-huge", "c", S("selector_params", "C", value=1e308), "site-1", ["[1e-10, 1e+10]"]),
    ("lasso-c-nan", "c", S("selector_params", "C", value=NAN), "site-1", ["selector_params.C"]),
    (
        "net-c-tiny",
        "c",
        both(S("selector", value="elastic_net"), S("selector_params", "C", value=1e-300)),
        "site-1",
        ["selector_params.C"],
    ),
    (
        "forest-trees-huge",
        "c",
        both(
            S("selector", value="random_forest"), S("selector_params", "n_estimators", value=10**9)
        ),
        "site-1",
        ["selector_params.n_estimators", "[1, 10000]"],
    ),
    ("selector-param-unknown", "c", S("selector_params", "gamma", value=1), "site-1", ["gamma"]),
    ("site-path", "c", S("site", value="../x"), "site-1", ["'site'"]),
    ("site-other", "c", S("site", value="site-2"), "site-1", ["'site' is 'site-2'", "file name"]),
    ("site-calibration", "c", S("calibration", value="platt"), "site-1", ["'calibration'"]),
    ("report-metrics", "c", S("report_metrics", value="yes"), "site-1", ["report_metrics"]),
    ("target-missing", "c", S("target", value="ghost"), "site-1", ["ghost"]),
    ("renames-merge", "c", S("renames", value={"age": "x", "bmi": "x"}), "site-1", ["renames"]),
    ("site-unknown-key", "c", S("seed", value=1), "site-1", ["'seed'", "known keys"]),
    ("reg-label-map", "r", S("label_map", value={"a": "b"}), "site-1", ["label_map"]),
    ("reg-site-calibration", "r", S("calibration", value="sigmoid"), "site-1", ["calibration"]),
]


@pytest.mark.parametrize(
    ("task", "edit", "where", "fragments"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_a_value_the_job_would_refuse_is_refused_at_build(
    demo, tmp_path, capsys, task, edit, where, fragments
):
    job, sites = copy.deepcopy(demo["classification" if task == "c" else "regression"])
    edit(job, sites)
    folder = write(tmp_path / "site_configs", job, sites)
    code, err = build(tmp_path, capsys, folder)
    assert code == 1, err
    assert err.startswith(f"fedforest: error: {folder / where}.yaml"), err
    assert "allowed" in err and "Traceback" not in err, err
    assert "should be greater or equal" not in err and "test_size" not in err  # scikit-learn's
    assert len(err) < 3000, err
    for fragment in fragments:
        assert fragment in err, err
    assert not (tmp_path / "jobs").exists()


# ---------------------------------------------------------------- YAML files
SEED = "job:\n  name: demo\n  sites: [site-1, site-2, site-3]\n  seed: {}\n"
BOMB = "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p.strip() else ', '.join(['x'] * 9)}]\n"
    for p, c in zip(" abcdefgh", "abcdefghi", strict=True)
)
YAML = [
    ("utf-16", SEED.format(0).encode("utf-16"), ["UTF-16", "UTF-8"]),
    ("utf-16-no-bom", SEED.format(0).encode("utf-16-le"), ["NUL byte", "UTF-8"]),
    ("latin-1", (SEED.format(0) + "# café\n").encode("latin-1"), ["line 5", "not UTF-8"]),
    ("seed-5000-digits", SEED.format("9" * 5000).encode(), ["'job.seed'", "5000 digits"]),
    ("seed-base-60", SEED.format("1:30").encode(), ["'job.seed'", "base-60"]),
    ("nesting-5000", ("x: " + "[" * 5000 + "]" * 5000 + "\n").encode(), ["nested more than 64"]),
    ("merge-key", b"b: &b {n_estimators: 3}\nforest:\n  <<: *b\n", ["merge key", "'forest.<<'"]),
    ("alias-bomb", BOMB.encode(), ["aliases", "1000000 values"]),
    ("alias-self", b"forest: &f [*f]\n", ["refers to the block that holds it"]),
    ("tab", b"job:\n\tseed: 1\n", ["line 2, column 1", "tab"]),
    ("duplicate-key", (SEED.format(0) + "  seed: 1\n").encode(), ["'job.seed' appears twice"]),
    ("not-yaml", b"job: [1, 2\n", ["not valid YAML"]),
    ("huge-name", SEED.replace("demo", "n" * 500_000).format(0).encode(), ["'job.name'"]),
    ("top-level-list", b"- job\n", ["(top level)"]),
]


@pytest.mark.parametrize(("raw", "fragments"), [c[1:] for c in YAML], ids=[c[0] for c in YAML])
def test_a_job_yaml_that_is_no_plain_utf8_yaml_is_refused_naming_the_file(
    demo, tmp_path, capsys, raw, fragments
):
    job, sites = copy.deepcopy(demo["classification"])
    folder = write(tmp_path / "site_configs", job, sites, raw={"job.yaml": raw})
    code, err = build(tmp_path, capsys, folder)
    assert code == 1 and err.startswith(f"fedforest: error: {folder / 'job.yaml'}"), err
    assert "allowed" in err and "Traceback" not in err and len(err) < 3000, err
    for fragment in fragments:
        assert fragment in err, err


SITE = "site: site-2\ndata_path: site-2.csv\ntarget: outcome\n"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("site: site-2\nsite: site-2\n", "'site' appears twice"),
        (SITE + "validation_fraction: 1:30\n", "base-60"),
        (SITE + "privacy:\n\tmin_leaf_rows: 5\n", "tab"),
        (SITE + "label_map: {a: 1, a: 2}\n", "'label_map.a' appears twice"),
    ],
)
def test_a_site_yaml_that_is_no_plain_yaml_is_refused_naming_it(
    demo, tmp_path, capsys, raw, fragment
):
    job, sites = copy.deepcopy(demo["classification"])
    folder = write(tmp_path / "site_configs", job, sites, raw={"site-2.yaml": raw.encode()})
    code, err = build(tmp_path, capsys, folder)
    assert code == 1 and err.startswith(f"fedforest: error: {folder / 'site-2.yaml'}"), err
    assert fragment in err and "Traceback" not in err, err


# --------------------------------------------------------------- what builds
LOOSER = "tell more about who was in its training rows"
ACCEPTED = [
    ("untouched", "c", lambda job, sites: None, None),
    ("strict-sample-fraction", "c", S("privacy", "tree_sample_fraction", value=0.0001), None),
    ("loose-sample-fraction", "c", S("privacy", "tree_sample_fraction", value=0.9), "above"),
    ("strict-leaf-rows", "c", S("privacy", "min_leaf_rows", value=20), None),
    ("loose-leaf-rows", "c", S("privacy", "min_leaf_rows", value=2), "below"),
    ("noise-at-bounds", "c", S("privacy", "count_noise_epsilon", value=1e-6), None),
    ("tiny-fraction-features", "c", J("forest", "max_features", value=1e-320), None),
    ("depth-at-bound", "c", J("evaluation", "depth_threshold", value=50_000_000), None),
    ("timeouts-off", "c", J("job", "timeouts", value=dict.fromkeys(("schema", "train"), 0)), None),
    ("regression", "r", lambda job, sites: None, None),
]


def _scaled_targets(sites, factor: float, folder: Path) -> None:
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    for site, config in sites.items():
        table = pd.read_csv(config["data_path"])
        table[config["target"]] = table[config["target"]] * factor
        path = folder / f"{site}.csv"
        table.to_csv(path, index=False)
        config["data_path"] = str(path)


@pytest.mark.parametrize(
    ("task", "edit", "looser"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED]
)
def test_what_a_job_accepts_builds_warning_only_where_a_value_loosens_the_policy(
    demo, tmp_path, caplog, task, edit, looser
):
    job, sites = copy.deepcopy(demo["classification" if task == "c" else "regression"])
    edit(job, sites)
    folder = write(tmp_path / "site_configs", job, sites)
    with caplog.at_level(logging.WARNING), warnings.catch_warnings():
        warnings.simplefilter("error")
        load_configs(folder)  # what `job build` checks before it writes the job
    said = [r.getMessage() for r in caplog.records if LOOSER in r.getMessage()]
    if looser is None:
        assert said == []
    else:
        assert len(said) == 1 and f"{looser} the default" in said[0], said


@pytest.mark.parametrize("factor", [1e30, 1e-30])
def test_a_regression_target_of_any_magnitude_builds_without_a_raw_warning(demo, tmp_path, factor):
    job, sites = copy.deepcopy(demo["regression"])
    _scaled_targets(sites, factor, tmp_path / "data")
    folder = write(tmp_path / "site_configs", job, sites)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_configs(folder)


def test_a_regression_target_beyond_float32_is_refused_naming_the_file(demo, tmp_path, capsys):
    job, sites = copy.deepcopy(demo["regression"])
    _scaled_targets(sites, 1e39, tmp_path / "data")
    folder = write(tmp_path / "site_configs", job, sites)
    code, err = build(tmp_path, capsys, folder)
    assert code == 1 and "site-1.yaml" in err and "float32" in err and "allowed" in err, err


def test_the_demo_configuration_builds(demo, tmp_path):
    job, sites = copy.deepcopy(demo["classification"])
    folder = write(tmp_path / "site_configs", job, sites)
    # the command in a process of its own, as a user runs it: FLARE's export parses the
    # shipped sources with ast, which this worker's earlier hostile cases must not affect
    command = [sys.executable, "-m", "fedforest.cli", "job", "build", "--config", str(folder)]
    done = subprocess.run(
        [*command, "--out", str(tmp_path / "jobs")], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "jobs" / job["job"]["name"] / "meta.json").is_file()
