"""The ``fedforest`` command line."""

from __future__ import annotations

import argparse
import logging
import sys

from . import __version__

STRATEGY_HELP = {
    "fpv": "discard a tree when the row's path meets an unavailable feature",
    "pr": "discard above depth_threshold, else go right with probability N_right/N_node",
    "mi": "compare the best imputer's prediction with the threshold (else pr)",
    "ipr": "go right with probability sigmoid((imputed - threshold) / sigma) (else pr)",
    "mp": "follow both children weighted by the ipr probabilities; never discards",
    "ss": "use the node's surrogate split on a shared feature (else pr)",
    "park": "the site's own trees plus trees using only features the site has",
    "local": "the site's own trees only",
    "auto": "score the strategies on the site's validation rows and use the best",
}


def _strategies(args: argparse.Namespace) -> int:
    for name, text in STRATEGY_HELP.items():
        print(f"{name:6s} {text}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedforest",
        description="Federated random forests across sites with different columns.",
    )
    parser.add_argument("--version", action="version", version=f"fedforest {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("strategies", help="list the missing-split strategies")
    p.set_defaults(func=_strategies)
    return parser


def main(argv: list[str] | None = None) -> int:
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
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as err:
        print(f"fedforest: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
