"""``fedforest report`` on results.json files edited at every level.

The files are what jobs wrote (``data/job_results_v5.json``: a calibrated
classification job with its election, tuning and a site whose isotonic
calibration was skipped; ``data/regression_results_v5.json``: a regression
job; the swarm layout of ``tests/federation/test_job_results.py``). Each edit
is refused naming the file, the field and what a job writes there, before any
folder is made, or the report renders what the file says with every name
escaped. Never a traceback and never a raw warning (warnings are errors).
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import pytest

from fedforest.cli import main
from fedforest.cli import report as report_module

DATA = Path(__file__).resolve().parent / "data"
FILES = {
    "job": DATA / "job_results_v5.json",
    "reg": DATA / "regression_results_v5.json",
    "old": DATA / "demo_results.json",
}


def _swarm() -> dict:
    from federation.test_job_results import SWARM_UNVERSIONED, versioned

    return versioned(SWARM_UNVERSIONED)


@pytest.fixture(scope="module")
def originals() -> dict:
    out = {name: json.loads(path.read_text(encoding="utf-8")) for name, path in FILES.items()}
    out["swarm"] = _swarm()
    return out


def run_report(tmp_path, data, capsys, raw: str | None = None):
    """``fedforest report`` on ``data`` (or the text ``raw``): (exit code, stderr, report)."""
    path = tmp_path / "run" / "results.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(raw if raw is not None else json.dumps(data), encoding="utf-8")
    out = tmp_path / "report"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = main(["report", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    text = (out / "report.md").read_text(encoding="utf-8") if code == 0 else None
    return path, code, err, text


# ---------------------------------------------------------------------------- edits
def _set(*path, value):
    def edit(d):
        target = d
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _pop(*path):
    def edit(d):
        target = d
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


def _row(key, value, site="site-1", strategy="mp"):
    return _set("metrics", site, strategy, key, value=value)


NAN, INF = float("nan"), float("inf")

#: (id, file, edit, fragments of the refusal besides the file's path).
REFUSED = [
    ("format", "job", _set("format", value="fedforest/model"), ["'format'"]),
    ("version-99", "job", _set("version", value=99), ["version 99 is not supported"]),
    ("version-text", "job", _set("version", value="5"), ["'version'"]),
    ("version-negative", "job", _set("version", value=-1), ["'version'"]),
    ("version-huge-text", "job", _set("version", value="9" * 100_000), ["'version'"]),
    ("job-null", "job", _set("job", value=None), ["'job'"]),
    ("job-number", "job", _set("job", value=5), ["'job'"]),
    ("job-long", "job", _set("job", value="j" * 1001), ["'job'", "1 to 1000"]),
    ("job-control", "job", _set("job", value="demo\x1b[31m"), ["'job'", "control"]),
    ("status", "job", _set("status", value="done"), ["'status'", "finished, failed"]),
    ("error-number", "job", _set("error", value=5), ["'error'"]),
    ("error-huge", "job", _set("error", value="e" * 100_001), ["'error'", "100000"]),
    ("extra-field", "job", _set("notes", value="x"), ["unknown fields ['notes']"]),
    ("no-sites", "job", _pop("sites"), ["'sites' is missing"]),
    ("no-metrics", "job", _pop("metrics"), ["'metrics' is missing"]),
    ("no-privacy", "job", _pop("privacy"), ["'privacy' is missing"]),
    ("mode", "job", _set("mode", value="cloud"), ["'mode'"]),
    ("sites-text", "job", _set("sites", value="site-1"), ["'sites'"]),
    ("sites-numbers", "job", _set("sites", value=[1, 2]), ["'sites[0]'"]),
    ("sites-twice", "job", _set("sites", value=["site-1", "site-1"]), ["'sites'", "duplicates"]),
    ("dropped-list", "job", _set("dropped_sites", value=[1]), ["'dropped_sites'"]),
    ("dropped-reason", "job", _set("dropped_sites", value={"s": 5}), ["dropped_sites.s"]),
    ("classes-missing-text", "job", _set("classes_missing", value={"site-1": "x"}), ["classes_"]),
    ("classes-missing-bool", "job", _set("classes_missing", value={"site-1": [True]}), ["[0]"]),
    ("strategies-short", "job", _set("strategies", value=["mp"]), ["'metrics.site-1'"]),
    ("strategies-numbers", "job", _set("strategies", value=[1]), ["'strategies[0]'"]),
    ("metrics-list", "job", _set("metrics", value=[1, 2]), ["'metrics'"]),
    ("metrics-text", "job", _set("metrics", value="text"), ["'metrics'"]),
    ("metrics-site-list", "job", _set("metrics", "site-1", value=[]), ["'metrics.site-1'"]),
    ("metrics-row-number", "job", _set("metrics", "site-1", "mp", value=1), ["site-1"]),
    ("auc-lowest", "job", _row("auc", -1e308), ["'metrics.site-1.mp.auc'", "[0.0, 1.0]"]),
    ("auc-nan", "job", _row("auc", NAN), ["'metrics.site-1.mp.auc'", "finite"]),
    ("auc-inf", "job", _row("auc", INF), ["'metrics.site-1.mp.auc'"]),
    ("auc-text", "job", _row("auc", "0.8"), ["'metrics.site-1.mp.auc'"]),
    ("auc-bool", "job", _row("auc", True), ["'metrics.site-1.mp.auc'"]),
    ("auc-above-1", "job", _row("auc", 1.5), ["'metrics.site-1.mp.auc'"]),
    ("brier-above-2", "job", _row("brier", 3.0), ["'metrics.site-1.mp.brier'"]),
    ("log-loss-negative", "job", _row("log_loss", -0.1), ["'metrics.site-1.mp.log_loss'"]),
    ("rmse-negative", "reg", _row("rmse", -1.0), ["'metrics.site-1.mp.rmse'"]),
    ("mae-text", "reg", _row("mae", "x"), ["'metrics.site-1.mp.mae'"]),
    ("r2-above-1", "reg", _row("r2", 5.0), ["'metrics.site-1.mp.r2'"]),
    ("reg-bins", "reg", _row("bins", {"target": "y"}), ["site-1.mp"]),
    ("rows-negative", "job", _row("rows", -1), ["'metrics.site-1.mp.rows'"]),
    ("rows-text", "job", _row("rows", "30"), ["'metrics.site-1.mp.rows'"]),
    ("rows-other", "job", _row("rows", 31), ["'metrics.site-1.mp.rows'"]),
    ("trees-negative", "job", _row("mean_trees_kept", -1), ["mean_trees_kept"]),
    ("fallback-fraction", "job", _row("fallback_rows", 1.5), ["fallback_rows"]),
    ("calibration-method", "job", _row("calibration", "platt"), ["mp.calibration'"]),
    ("skipped-number", "job", _row("calibration_skipped", 5), ["calibration_skipped"]),
    ("skipped-huge", "job", _row("calibration_skipped", "s" * 1001), ["calibration_skipped"]),
    ("skipped-empty", "job", _row("calibration_skipped", ""), ["calibration_skipped"]),
    ("skipped-escape", "job", _row("calibration_skipped", "\x1b[2J"), ["calibration_skipped"]),
    ("bins-number", "job", _row("bins", 5), ["site-1.mp"]),
    ("bins-count", "job", _set("metrics", "site-1", "mp", "bins", "count", value=[1]), ["count"]),
    (
        "bins-predicted",
        "job",
        lambda d: d["metrics"]["site-1"]["mp"]["bins"]["predicted"].__setitem__(
            next(i for i, c in enumerate(d["metrics"]["site-1"]["mp"]["bins"]["count"]) if c),
            2.0,
        ),
        ["predicted["],
    ),
    ("chosen", "job", _row("chosen", "magic", strategy="auto"), ["auto.chosen'"]),
    ("runner-up", "job", _row("runner_up", 5, strategy="auto"), ["auto.runner_up'"]),
    ("validation", "job", _row("validation", [], strategy="auto"), ["auto.validation'"]),
    ("chosen-on-mp", "job", _row("chosen", "mp"), ["'auto' row only"]),
    ("guess-weight", "job", _row("guess_weight", 2.0, strategy="wmp"), ["wmp.guess_weight'"]),
    ("guess-weight-on-mp", "job", _row("guess_weight", 0.5), ["guess_weight"]),
    ("row-extra", "job", _row("speed", 1.0), ["unknown fields ['speed']"]),
    ("row-missing", "job", _pop("metrics", "site-1", "mp", "fallback_rows"), ["fallback_rows"]),
    ("events-huge", "job", _row("events", 10**9), ["'metrics.site-1.mp.events'"]),
    ("intervals", "job", _row("intervals", {"auc": [0.9, 0.1]}), ["intervals.auc"]),
    ("test-rows-negative", "job", _set("test_rows", "site-1", value=-1), ["test_rows.site-1"]),
    ("test-rows-text", "job", _set("test_rows", "site-1", value="x"), ["test_rows.site-1"]),
    ("test-events", "job", _set("test_events", "site-1", value=0), ["'test_events'"]),
    ("warnings-number", "job", _set("sample_warnings", "site-1", value=5), ["sample_warn"]),
    ("schema-number", "job", _set("schema", "features", value=1), ["'schema'", "features"]),
    ("schema-list", "job", _set("schema", value=[]), ["'schema'"]),
    ("election-stats", "job", _pop("election", "stats"), ["'election'", "'stats'"]),
    ("election-kept", "job", _set("election", "stats", "kept", value=-1), ["election.stats.kept"]),
    ("election-degree", "job", _set("election", "freedom_degree", value=2), ["freedom_degree"]),
    ("election-selected", "job", _set("election", "selected", value="x"), ["election.selected"]),
    ("election-votes", "job", _set("election", "votes", value={"a": "x"}), ["election.votes.a"]),
    ("election-aggregation", "job", _set("election", "aggregation", value="x"), ["aggregation"]),
    ("election-extra", "job", _set("election", "notes", value=1), ["'election'", "'notes'"]),
    ("tuning-history", "job", _set("tuning", "history", value="x"), ["tuning.history"]),
    ("tuning-score-nan", "job", _set("tuning", "history", 0, "score", value=NAN), ["score"]),
    ("tuning-score", "job", _set("tuning", "score", value="x"), ["tuning.score"]),
    ("tuning-kept", "job", _set("tuning", "kept", value=-1), ["tuning.kept"]),
    ("tuning-reused", "job", _set("tuning", "history", 0, "reused", value=1), ["reused"]),
    ("seconds-negative", "job", _set("phase_seconds", "schema", value=-1), ["phase_seconds"]),
    ("seconds-text", "job", _set("phase_seconds", "schema", value="x"), ["phase_seconds"]),
    ("seconds-nan", "job", _set("phase_seconds", "schema", value=NAN), ["phase_seconds"]),
    ("bytes-negative", "job", _set("payload_bytes", "site-1", "train", value=-5), ["payload_"]),
    ("bytes-number", "job", _set("payload_bytes", "site-1", value=5), ["payload_bytes"]),
    ("privacy-number", "job", _set("privacy", "site-1", value=5), ["privacy"]),
    ("privacy-leaf", "job", _set("privacy", "site-1", "min_leaf_rows", value=-1), ["min_leaf"]),
    ("privacy-share", "job", _set("privacy", "site-1", "share", value=5), ["share"]),
    ("model-trees", "job", _set("model", "trees", value=-1), ["model.trees"]),
    ("model-features", "job", _set("model", "features", value="x"), ["model.features"]),
    ("model-extra", "job", _set("model", "notes", value=1), ["'model'", "'notes'"]),
    ("model-site-models", "job", _set("model", "site_models", value=[1]), ["site_models"]),
    ("swarm-state", "swarm", _set("site_states", "site-1", value="gone"), ["site_states"]),
    ("swarm-digest", "swarm", _set("model_digest", value="xyz"), ["model_digest", "SHA-256"]),
    ("swarm-encrypted", "swarm", _set("peer_messages_encrypted", "site-1", value="yes"), ["pe"]),
    ("swarm-withheld", "swarm", _set("metrics_withheld", value="site-1"), ["metrics_withheld"]),
    ("swarm-errors", "swarm", _set("site_errors", "site-2", value=5), ["site_errors.site-2"]),
    ("swarm-seconds", "swarm", _set("phase_seconds", "site-1", "train", value=-1), ["seconds"]),
    ("old-auc", "old", _row("auc", -1e308), ["'metrics.site-1.mp.auc'"]),
    ("old-later-field", "old", _row("calibration_skipped", "x"), ["belongs to version 5"]),
]


@pytest.mark.parametrize(
    ("name", "edit", "fragments"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_a_tampered_results_file_is_refused_naming_the_file_and_field(
    originals, tmp_path, capsys, name, edit, fragments
):
    data = copy.deepcopy(originals[name])
    edit(data)
    path, code, err, _ = run_report(tmp_path, data, capsys)
    assert code == 1, err
    assert err.startswith(f"fedforest: error: {path}"), err
    assert "Traceback" not in err and len(err) < 5000, err
    assert any(word in err for word in ("allowed", "expected", "reads versions", "is missing")), err
    for fragment in fragments:
        assert fragment in err, err
    assert not (tmp_path / "report").exists()  # refused before any folder is made


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("{not json", "not JSON"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("\ufeff{}", "not JSON"),
        ('{"job": "j", "job": "k"', "not JSON"),
        ("[1, 2]", "expected a dict, got list"),
    ],
)
def test_a_file_that_is_no_results_json_is_refused_naming_it(tmp_path, capsys, raw, fragment):
    path, code, err, _ = run_report(tmp_path, None, capsys, raw=raw)
    assert code == 1 and str(path) in err and fragment in err, err
    assert "Traceback" not in err and len(err) < 5000


def test_a_results_file_too_large_is_refused_before_it_is_read(
    originals, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(report_module, "MAX_RESULTS_BYTES", 1000)
    path, code, err, _ = run_report(tmp_path, originals["job"], capsys)
    assert code == 1 and str(path) in err and "bytes; allowed: at most 1000" in err


# ------------------------------------------------------------------ what renders
HOSTILE = "<script>alert(1)</script>|**x**_`y`"


def _rename_site(d, old, new):
    d["sites"][d["sites"].index(old)] = new
    for key in ("metrics", "test_rows", "test_events", "sample_warnings", "privacy"):
        if old in (d.get(key) or {}):
            d[key][new] = d[key].pop(old)
    if old in d.get("payload_bytes", {}):
        d["payload_bytes"][new] = d["payload_bytes"].pop(old)


def _rename_strategy(d, old, new):
    d["strategies"][d["strategies"].index(old)] = new
    for per in d["metrics"].values():
        per[new] = per.pop(old)


RENDERED = [
    ("untouched", "job", lambda d: None, ["## Calibration", "Calibration skipped"]),
    (
        "untouched-regression",
        "reg",
        lambda d: None,
        ["RMSE and MAE", "A regression job predicts numbers, not risks"],
    ),
    ("unversioned", "old", lambda d: None, ["Missing:", "Deployed (`auto`): Local trees."]),
    (
        "version-4",
        "job",
        lambda d: [
            d.update(version=4),
            [r.pop("calibration_skipped") for per in d["metrics"].values() for r in per.values()],
        ],
        ["## Calibration"],
    ),
    ("site-name", "job", lambda d: _rename_site(d, "site-2", HOSTILE), ["&lt;script&gt;"]),
    ("strategy-name", "job", lambda d: _rename_strategy(d, "ss", HOSTILE), ["&lt;script&gt;"]),
    ("reg-site-name", "reg", lambda d: _rename_site(d, "site-1", HOSTILE), ["&lt;script&gt;"]),
    ("error-text", "job", _set("error", value=HOSTILE + "\n<img src=x>"), ["&lt;img src=x&gt;"]),
    ("dropped", "job", _set("dropped_sites", value={"<b>s</b>": "<b>bold</b>"}), ["&lt;b&gt;"]),
    (
        "skipped-text",
        "job",
        _row("calibration_skipped", "isotonic: <img src=x onerror=alert(1)>"),
        ["isotonic: &lt;img src=x onerror=alert(1)&gt;"],
    ),
    ("swarm", "swarm", lambda d: None, ["swarm mode"]),
]


@pytest.mark.parametrize(
    ("name", "edit", "fragments"), [c[1:] for c in RENDERED], ids=[c[0] for c in RENDERED]
)
def test_what_a_job_could_write_renders_with_every_name_escaped(
    originals, tmp_path, capsys, name, edit, fragments
):
    data = copy.deepcopy(originals[name])
    edit(data)
    path, code, err, text = run_report(tmp_path, data, capsys)
    assert code == 0, err
    assert "Traceback" not in err and "expected a dict of bins" not in err
    for tag in ("<script", "<img", "<b>"):
        assert tag not in text
    for fragment in fragments:
        assert fragment in text, text[:3000]
    if name.startswith("reg") or name == "untouched-regression":
        assert "reliability-" not in text  # no reliability diagram
