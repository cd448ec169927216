"""``fedforest strategies``: one line per strategy of the registry, in its order."""

from __future__ import annotations

from fedforest import rules
from fedforest.cli import main


def test_strategies_lists_every_strategy(capsys):
    assert main(["strategies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == list(rules.names())  # the registry's, in its order
    assert {"node", "wmp"} <= set(names)
    described = {line.split()[0]: line for line in lines}
    assert "class distribution" in described["node"]
    assert "validation rows" in described["wmp"]
