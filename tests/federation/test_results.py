"""report.md and the command line's table: every site and strategy name stays whole."""

from __future__ import annotations

import json

from fedforest.federation.job_results import JobResults
from fedforest.federation.results import (
    render_report,
    results_table,
    text_table,
    write_brief_results,
    write_results_files,
)

from .test_job_results import CURRENT_ROW, SERVER_UNVERSIONED, SWARM_UNVERSIONED, versioned

LONG = ["hungarian", "switzerland", "university-hospital-of-long-name"]


def long_names() -> JobResults:
    """Three sites with names of 9, 11 and 32 characters, and a 30-character strategy."""
    strategy = "a-strategy-with-a-long-name-xy"
    metrics = {
        site: {"mp": {**CURRENT_ROW, "auprc": 0.5 + i / 10}, strategy: CURRENT_ROW}
        for i, site in enumerate(LONG)
    }
    metrics["switzerland"][strategy] = {**CURRENT_ROW, "auprc": None}
    return JobResults(
        job="long",
        sites=LONG,
        strategies=["mp", strategy],
        metrics=metrics,
        test_rows=dict.fromkeys(LONG, 75),
        dropped_sites={"lost-site": "train: OSError: disk full"},
        phase_seconds={"schema": 1.25, "train": 3.5},
    )


def test_the_table_lines_up_names_of_any_length():
    lines = results_table(long_names()).splitlines()
    assert lines[:2] == ["job long: finished", "dropped lost-site: train: OSError: disk full"]
    start = lines.index("AUPRC on each site's test rows") + 1
    table = lines[start : start + 3]
    assert lines[start + 3] == "test rows: " + "; ".join(f"{s} 75 test rows" for s in sorted(LONG))
    header, mp, long_row = table
    assert header.split() == ["strategy", *sorted(LONG), "mean"]
    assert "hungarianswitzerland" not in header
    # every cell ends where its column's header ends
    values = {"hungarian": "0.500", "switzerland": "0.600", LONG[2]: "0.700", "mean": "0.600"}
    for name, value in values.items():
        end = header.index(name) + len(name)
        assert mp[:end].endswith(" " + value), (name, mp)
        assert long_row[end : end + 1] in ("", " ")
        assert long_row[:end].rstrip() == long_row[:end]
    assert mp.split() == ["mp", "0.500", "0.600", "0.700", "0.600"]  # sorted site order
    assert long_row.split() == ["a-strategy-with-a-long-name-xy", "0.810", "-", "0.810", "0.810"]
    assert lines[-1] == "phase seconds: schema 1.2, train 3.5"


def test_the_table_keeps_its_look_for_short_names():
    results = JobResults.from_dict(SERVER_UNVERSIONED)
    lines = results_table(results).splitlines()
    assert lines[3] == "strategy" + " " * 6 + "    site-1    site-2      mean"
    assert lines[4] == "mp" + " " * 12 + "     0.810     0.810     0.810"


def test_text_table_widths_come_from_the_longest_cell():
    rows = [["x", "a", "bbbbbbbbbbbbbbb"], ["longer-label", "1", "2"]]
    assert text_table(rows) == [
        "x" + " " * 13 + " " * 9 + "a" + "  bbbbbbbbbbbbbbb",
        "longer-label  " + " " * 9 + "1" + " " * 16 + "2",
    ]


def test_the_swarm_table_gives_each_sites_timings():
    lines = results_table(SWARM_UNVERSIONED).splitlines()
    assert lines[-1] == "phase seconds at site-1: schema 0.5, train 1.0"
    assert "error: phase train: only 1 site(s) left" in lines


def test_the_report_keeps_long_names_whole(tmp_path):
    report = render_report(long_names())
    for site in LONG:
        assert f"### {site} (75 test rows)" in report
    assert "| a-strategy-with-a-long-name-xy | 0.810 |" in report
    assert "| a-strategy-with-a-long-name-xy | – |" in report  # switzerland's missing AUPRC
    rows = [line for line in report.splitlines() if line.startswith("| Marginal prediction |")]
    assert [line.count("|") for line in rows] == [8, 8, 8, 6]  # three sites, then the mean
    swarm = render_report(SWARM_UNVERSIONED)
    assert "| site-2 | failed: OSError: disk full | – |" in swarm
    assert "Messages between sites: `site-1` not encrypted end to end, `site-2` unknown." in swarm


def test_the_files_and_the_brief_files(tmp_path):
    results = long_names()
    write_results_files(tmp_path / "full", results)
    saved = json.loads((tmp_path / "full" / "results.json").read_text())
    assert JobResults.from_dict(saved) == results
    assert (tmp_path / "full" / "report.md").read_text() == render_report(results)
    write_results_files(tmp_path / "from-dict", results.to_dict())  # a dict is read first
    assert (tmp_path / "from-dict" / "results.json").read_text() == json.dumps(
        saved, indent=2
    ) + "\n"
    failed = JobResults(job="t", status="failed", error="boom", dropped_sites={"a": "x"})
    write_brief_results(tmp_path / "brief", failed)
    assert json.loads((tmp_path / "brief" / "results.json").read_text()) == failed.brief_dict()
    assert (tmp_path / "brief" / "report.md").read_text() == (
        "# fedforest job `t`: failed\n\n**Error:** boom\n"
    )


def test_a_skipped_calibration_reaches_the_table_and_the_report():
    data = json.loads(json.dumps(versioned(SERVER_UNVERSIONED)))  # rows no longer shared
    why = "isotonic: it needs 10 validation rows of every class; class counts {'0': 15, '1': 9}"
    for row in data["metrics"]["site-1"].values():
        row["calibration_skipped"] = why
    data["metrics"]["site-2"]["mp"]["calibration_skipped"] = "sigmoid: <b>reverses</b>"
    head = {"format": "fedforest/results", "version": 5}
    results = JobResults.from_dict(data)
    lines = results_table(results).splitlines()
    assert f"calibration skipped at site-1 (every strategy): {why}" in lines
    assert "calibration skipped at site-2 (mp): sigmoid: <b>reverses</b>" in lines
    report = render_report(results)
    assert f"> **Calibration skipped** (every strategy): {why}." in report
    assert "> **Calibration skipped** (Marginal prediction): sigmoid: &lt;b&gt;reverses" in report
    assert "<b>" not in report
    # a version 4 file says nothing of it
    older = JobResults.from_dict({**head, "version": 4, **SERVER_UNVERSIONED})
    assert "calibration skipped" not in results_table(older)
