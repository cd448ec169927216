"""``fedforest report`` on a tampered results.json: a message naming the file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedforest.cli import main

DEMO = Path(__file__).resolve().parent / "data" / "demo_results.json"


@pytest.mark.parametrize("metrics", [[1, 2], "text", 3])
def test_report_refuses_metrics_that_are_not_a_mapping_naming_the_file(tmp_path, capsys, metrics):
    data = json.loads(DEMO.read_text(encoding="utf-8"))
    data["metrics"] = metrics
    results = tmp_path / "results.json"
    results.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "report"
    try:
        code = main(["report", str(results), "--out", str(out)])
    except TypeError as err:  # the traceback a user would see
        pytest.fail(f"a traceback instead of a message: {err!r}")
    err = capsys.readouterr().err
    assert code == 1
    assert str(results) in err and "metrics" in err
    assert "Traceback" not in err
    assert not out.exists()
