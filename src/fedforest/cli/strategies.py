"""``fedforest strategies``: the missing-split strategies, one line each."""

from __future__ import annotations

import argparse

STRATEGY_HELP = {
    "fpv": "discard a tree when the row's path meets an unavailable feature",
    "pr": "discard above depth_threshold, else go right with probability N_right/N_node",
    "mi": "compare the best imputer's prediction with the threshold (else pr)",
    "ipr": "go right with probability sigmoid((imputed - threshold) / sigma) (else pr)",
    "mp": "follow both children weighted by the ipr probabilities; never discards",
    "ss": "use the node's surrogate split on a shared feature (else pr)",
    "node": "stop at the node: its own class distribution is the tree's prediction",
    "wmp": "mp, a tree that guesses weighted less (weight fitted on validation rows)",
    "park": "the site's own trees plus trees using only features the site has",
    "local": "the site's own trees only",
    "auto": "score the strategies on the site's validation rows and use the best",
}


def _strategies(args: argparse.Namespace) -> int:
    for name, text in STRATEGY_HELP.items():
        print(f"{name:6s} {text}")
    return 0


def add_parser(sub) -> None:
    """Add ``strategies`` to the subcommands ``sub``."""
    p = sub.add_parser("strategies", help="list the missing-split strategies")
    p.set_defaults(func=_strategies)
