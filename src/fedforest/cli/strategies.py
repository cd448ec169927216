"""``fedforest strategies``: the missing-split strategies, one line each (the registry's)."""

from __future__ import annotations

import argparse

from .. import rules


def _strategies(args: argparse.Namespace) -> int:
    width = max(6, *(len(n) for n in rules.names()))
    for name, text in rules.help_lines().items():
        print(f"{name:{width}s} {text}")
    return 0


def add_parser(sub) -> None:
    """Add ``strategies`` to the subcommands ``sub``."""
    p = sub.add_parser("strategies", help="list the missing-split strategies")
    p.set_defaults(func=_strategies)
