from __future__ import annotations

import subprocess
import sys

from fedforest import STRATEGIES
from fedforest.cli import main


def test_strategies_lists_every_strategy(capsys):
    assert main(["strategies"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == [*STRATEGIES, "auto"]


def test_console_script_runs():
    done = subprocess.run(
        [sys.executable, "-m", "fedforest.cli", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "fedforest" in done.stdout


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out


def test_elect_prints_votes_and_mask(tmp_path, capsys):
    from test_election_offline import site_tables

    paths = []
    for site, frame in site_tables(4, rows=200).items():
        path = tmp_path / f"{site}.csv"
        frame.to_csv(path, index=False)
        paths.append(str(path))
    out_json = tmp_path / "election.json"
    code = main(
        [
            "elect",
            *paths,
            "--target",
            "y",
            "--selectors",
            "lasso,f_classif,none",
            "--auto-tune",
            "--tuning-rounds",
            "3",
            "--json",
            str(out_json),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "elected: " in text and "tuning history" in text
    assert "s2" in text and "-" in text  # s2 only at site a: others abstain
    import json

    saved = json.loads(out_json.read_text())
    assert saved["election"]["selected"] and len(saved["tuning"]["history"]) >= 1


def test_elect_errors_are_reported(tmp_path, capsys):
    assert main(["elect", str(tmp_path / "missing.csv"), "x.csv", "--target", "y"]) == 1
    assert "no such CSV file" in capsys.readouterr().err
