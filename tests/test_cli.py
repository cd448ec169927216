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
