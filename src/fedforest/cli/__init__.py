"""The ``fedforest`` command line: one module per command.

``strategies`` (:mod:`~fedforest.cli.strategies`), ``elect``
(:mod:`~fedforest.cli.elect`), ``job build | simulate | poc | prod``
(:mod:`~fedforest.cli.job`), ``experiment`` (:mod:`~fedforest.cli.experiment`),
``predict`` (:mod:`~fedforest.cli.predict`) and ``report``
(:mod:`~fedforest.cli.report`); their option types and input
files, and the help formatter that shows every default, are in
:mod:`~fedforest.cli.options`; the console of a running job (its progress
lines, ``-q``) in :mod:`~fedforest.cli.console`. Each command module adds its
parser (``add_parser``) and runs the command it parsed.
"""

from __future__ import annotations

import argparse
import logging
import sys

from .. import __version__
from . import console, elect, experiment, job, predict, report, strategies
from .options import Parser


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``fedforest`` and of every command."""
    parser = Parser(
        prog="fedforest",
        description="Federated random forests across sites with different columns.",
    )
    parser.add_argument("--version", action="version", version=f"fedforest {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO")
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print no progress line per phase of a running job (also after the command)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (strategies, elect, job, experiment, predict, report):
        command.add_parser(sub)
    # `fedforest elect` runs the job's election in this process: its rounds are progress
    # lines too (the `job simulate | poc | prod` parsers add the switch themselves)
    console.add_quiet(sub.choices["elect"])
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``fedforest`` (the entry point); return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with console.progress_lines(quiet=args.quiet):
            return int(args.func(args) or 0)
    except (ValueError, OSError, KeyError, RuntimeError) as err:
        print(f"fedforest: error: {err}", file=sys.stderr)
        return 1
