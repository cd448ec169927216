"""What ``fedforest predict`` says about its input: on standard error, in ``--report-json``,
and what ``--strict`` refuses.

Every list in these messages is cut to :data:`~fedforest.model.inputs.MAX_LISTED`
names (a file of 20,000 columns gets a line, not a page).
"""

from __future__ import annotations

import sys

from ..model.inputs import MAX_LISTED, names_text


def in_words(feature: str, inputs) -> str:
    """A model feature as the site calls it: ``local (the model's feature)`` when renamed."""
    name = feature if inputs is None else inputs.local_name(feature)
    return name if name == feature else f"{name} (the model's {feature})"


def split_shares(forest) -> dict[str, float]:
    """Each feature's share of the forest's splits (its internal nodes)."""
    import numpy as np

    split = forest.feature[forest.feature >= 0]
    counts = np.bincount(split, minlength=len(forest.feature_names))
    total = max(int(counts.sum()), 1)
    return {name: counts[j] / total for j, name in enumerate(forest.feature_names)}


def share_text(share: float) -> str:
    """A share of the forest's splits, as a percentage (``<1%`` for a few)."""
    if 0 < share < 0.005:
        return "<1%"
    return f"{share:.0%}"


def say(text: str) -> None:
    print(text, file=sys.stderr)


def report(args, done, ignored, forest, inputs, renames, gaps) -> None:
    """Say on standard error what was done to the file, in the site's words, and which
    features are routed as missing (``gaps``, :class:`~fedforest.federation.input_gaps.InputGaps`)."""
    site = f"site {inputs.site}" if inputs is not None else "the model"
    from_model = {k: v for k, v in done.renamed.items() if k not in renames}
    if from_model:
        pairs = [f"{k} -> {v}" for k, v in from_model.items()]
        say(f"renames from the model ({site}'s): {names_text(pairs)}")
    given = {k: v for k, v in done.renamed.items() if k in renames}
    if given:
        say(f"renames from --rename: {names_text([f'{k} -> {v}' for k, v in given.items()])}")
    if done.dropped:
        say(f"not read ({site}'s drop_columns): {names_text(done.dropped)}")
    if ignored:
        say(f"ignoring columns the model does not use: {names_text(ignored)}")
    shares = split_shares(forest)
    absent = sorted(done.absent, key=lambda f: (-shares.get(f, 0.0), f))
    for feature in absent[:MAX_LISTED]:
        share = shares.get(feature)
        where = "" if share is None else f" ({share_text(share)} of the forest's splits)"
        say(f"{in_words(feature, inputs)}: absent{where}")
    if len(absent) > MAX_LISTED:
        rest = sum(shares.get(f, 0.0) for f in absent[MAX_LISTED:])
        say(
            f"and {len(absent) - MAX_LISTED} more absent features ({share_text(rest)} of the "
            "forest's splits)"
        )
    if absent:
        verb = "is" if len(absent) == 1 else "are"
        say(
            f"{len(absent)} of the model's {len(shares)} features {verb} absent from "
            f"{args.data}: missing on every row"
        )
    for line in gaps.lines(share_text):
        say(line)


def refuse_gaps(args, gaps) -> None:
    """``--strict``: refuse a file on which some feature of the model is routed as missing."""
    problems = gaps.problems()
    if not problems:
        return
    n = len(problems)
    raise ValueError(
        f"--strict: --data {args.data}: {n} of the model's features "
        f"{'is' if n == 1 else 'are'} routed as missing: {names_text(problems)}; nothing was "
        "predicted. Allowed: every feature of the model present, with a value the model knows "
        "on every row (fix the file, rename a column with --rename local=global, or leave "
        "--strict out to predict with these values missing)"
    )


def refuse_near_misses(ignored, absent, data) -> None:
    """Refuse a column that would be ignored while its name differs from an absent feature
    of the model only by case or surrounding spaces: the feature would silently be treated
    as missing on every row."""
    wanted = {str(name).strip().casefold(): name for name in absent}
    for column in ignored:
        feature = wanted.get(str(column).strip().casefold())
        if feature is not None:
            raise ValueError(
                f"--data {data}: column {column!r} is not the model's feature {feature!r} (names "
                "must match exactly, or the feature is missing on every row); allowed: the "
                f"model's names: rename it in the file or with --rename '{column}={feature}'"
            )
