"""What ``fedforest predict`` says about its input: on standard error, in ``--report-json``,
and what ``--strict`` refuses.

Every list in these messages is cut to :data:`~fedforest.model.inputs.MAX_LISTED`
names (a file of 20,000 columns gets a line, not a page).
"""

from __future__ import annotations

import sys

from ..columns import how_names_differ, look_alike_groups, match_look_alikes, shell_word, spelled
from ..model.inputs import MAX_LISTED, names_text
from ..validation import listing


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


def refuse_near_misses(ignored, absent, data, inputs=None) -> None:
    """Refuse a column that would be ignored while it reads like an absent feature of the
    model (:func:`~fedforest.columns.match_look_alikes`: case, spaces, invisible
    characters, Unicode form): the feature would silently be missing on every row.

    A site refuses such a name in its own file, and two sites' names that read alike
    (:mod:`~fedforest.federation.site_rules`, the schema), so ``predict`` refuses it too,
    with the fix: the header corrected, or ``--rename`` with the column's exact spelling
    (shell-escaped). ``absent`` are global names; the file is matched against the names
    the site uses (its renames, ``inputs``).
    """
    expected = {in_words(f, inputs).split(" (the model's ")[0]: f for f in absent}
    found = match_look_alikes(list(expected), ignored)
    if not found:
        return
    column, name = next(iter(found.items()))
    feature = expected[name]
    what = f"the model's feature {spelled(feature)}" + (
        f" (the site's {spelled(name)})" if name != feature else ""
    )
    rename = (
        f", or --rename {shell_word(f'{column}={feature}')}"
        if column == column.strip(" \t")
        else ""
    )
    more = f" ({len(found) - 1} more such column(s))" if len(found) > 1 else ""
    raise ValueError(
        f"--data {data}: column {spelled(column)} reads like {what} but is not it: it "
        f"{how_names_differ(column, name)}, and names must match exactly, or the feature is "
        f"missing on every row{more}; allowed: the model's names: correct the header of "
        f"{data} (write {spelled(name)}){rename}"
    )


def refuse_look_alike_columns(columns, read, data) -> None:
    """Refuse two columns of the file that read alike when the model reads one of them
    (``read``): which one holds the feature could not be told (a site refuses such a file,
    :func:`~fedforest.federation.site_rules.check_column_names`)."""
    for group in look_alike_groups(columns):
        used = [c for c in group if c in read]
        if used:
            others = [c for c in group if c != used[0]]
            raise ValueError(
                f"--data {data}: columns {' and '.join(map(spelled, group))} read alike "
                f"({spelled(others[0])} {how_names_differ(others[0], used[0])}) and the model reads "
                f"{spelled(used[0])}, so which one holds it cannot be told; allowed: names "
                f"that read differently: remove or rename {listing(map(spelled, others))} in "
                "the file"
            )
