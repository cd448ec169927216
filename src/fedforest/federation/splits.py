"""Splitting a site's rows into training, validation and test rows.

A site holds out its test rows first (``test_fraction`` of its rows), then
its validation rows (``validation_fraction`` of all rows, taken from the
rest); both splits are scikit-learn's ``train_test_split`` with the job's
seed, stratified by class when every class has at least two rows (a plain
split otherwise). :func:`split_site_rows` is that split, the one a site
makes; it depends on the target column and the seed only. A site whose
validation mode is ``oob`` (:data:`~fedforest.vocabulary.VALIDATIONS`) holds
out no validation rows: ``validation_fraction=None`` here, the second split
is skipped, and every row that is not a test row is a training row (scored
out of bag where a holdout site uses its validation rows).

The job needs every class a site has in each of the three parts (the vote
and the trees need two classes in the training rows, the tuning scores and
the calibration in the validation rows, the metrics in the test rows); an
``oob`` site has two parts, and its validation count is always 0 and not
checked.
:func:`describe_short_classes` makes the same split of the target column
alone, so that ``job build``, a site when it starts and
``data_prep/jaccard_split.py`` refuse a table the job could not run before
any site trains, and says how many rows a class needs whatever the seed
(:func:`fewest_class_rows`, from the bounds of :func:`holdout_class_rows`:
stratified allocation, ``StratifiedShuffleSplit``, gives a class of ``c``
rows among ``n`` either ``floor(c h / n)`` or ``ceil(c h / n)`` of the ``h``
held-out rows; a plain split anything from ``max(0, c - (n - h))`` to
``min(c, h)``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

#: The rows of each class every part (training, validation, test) must keep:
#: the vote and the trees need two classes in the training rows, the tuning
#: scores and the calibration in the validation rows, the metrics in the test rows.
MIN_CLASS_ROWS_PER_PART = 1

#: The parts of a site's rows, in the order :func:`holdout_class_rows` gives them.
PARTS = ("training", "validation", "test")


def split_validation(X: pd.DataFrame, y, fraction: float, random_state=None, stratify: bool = True):
    """Split off ``fraction`` of the rows, stratified by class (plain split when a class is
    too rare, or with ``stratify=False``: a regression target). A survival target (a
    structured array with an ``event`` field) is stratified by event."""
    y = np.asarray(y)
    by = None
    if stratify:
        classes = y["event"] if y.dtype.names and "event" in y.dtype.names else y
        _, counts = np.unique(classes, return_counts=True)
        by = classes if counts.min() >= 2 else None
    return train_test_split(X, y, test_size=fraction, stratify=by, random_state=random_state)


def split_site_rows(
    X: pd.DataFrame,
    y,
    validation_fraction: float | None,
    test_fraction: float,
    random_state=None,
    stratify: bool = True,
):
    """A site's training, validation and test rows, as the job splits them.

    ``stratify=False`` for a regression target (a plain random split). A survival
    target (:func:`fedforest.survival_metrics.survival_target`'s structured array) is
    stratified by its ``event`` field, so that every part keeps the site's share of
    events; the split of the event column alone is the same split.
    ``validation_fraction=None`` (validation mode ``oob``) holds out no
    validation rows: the training rows are every row but the test rows, and
    ``X_val`` and ``y_val`` are ``None``. The test rows are the same either way.

    Returns
    -------
    tuple
        ``(X_train, X_val, X_test, y_train, y_val, y_test)``.

    Examples
    --------
    >>> X = pd.DataFrame({"a": range(20)})
    >>> y = [0, 1] * 10
    >>> parts = split_site_rows(X, y, None, 0.25, random_state=0)
    >>> len(parts[0]), parts[1] is None, len(parts[2])
    (15, True, 5)
    """
    rest_X, X_test, rest_y, y_test = split_validation(X, y, test_fraction, random_state, stratify)
    if validation_fraction is None:
        return rest_X, None, X_test, rest_y, None, y_test
    val_share = validation_fraction / (1 - test_fraction)
    X_train, X_val, y_train, y_val = split_validation(
        rest_X, rest_y, val_share, random_state, stratify
    )
    return X_train, X_val, X_test, y_train, y_val, y_test


def part_event_rows(
    event, validation_fraction: float | None, test_fraction: float, random_state=None
) -> tuple[int, int, int]:
    """The events in each of the ``(training, validation, test)`` rows of a survival site's
    split (validation 0 with ``validation_fraction=None``).

    Examples
    --------
    >>> part_event_rows([1, 0] * 20, None, 0.25, random_state=0)
    (15, 0, 5)
    """
    e = np.asarray(event).astype(np.int64)
    rows = part_class_rows(e, validation_fraction, test_fraction, random_state)
    return rows.get(1, (0, 0, 0))


def part_class_rows(
    y, validation_fraction: float | None, test_fraction: float, random_state=None
) -> dict:
    """Class label -> its ``(training, validation, test)`` rows in the split a site makes
    (validation 0 with ``validation_fraction=None``)."""
    y = np.asarray(y)
    X = pd.DataFrame(index=np.arange(len(y)))
    _, _, _, *parts = split_site_rows(X, y, validation_fraction, test_fraction, random_state)
    return {
        label: tuple(0 if part is None else int((part == label).sum()) for part in parts)
        for label in np.unique(y)
    }


def split_sizes(n_rows: int, validation_fraction: float | None, test_fraction: float):
    """(training, validation, test) rows of a site of ``n_rows`` rows, as the job splits them.

    The test rows are split off first, then the validation rows (scikit-learn's
    ``train_test_split`` rounds the held-out count up); none with
    ``validation_fraction=None`` (validation mode ``oob``).
    """
    n_test = math.ceil(test_fraction * n_rows)
    rest = n_rows - n_test
    if validation_fraction is None:
        return rest, 0, n_test
    n_val = math.ceil(validation_fraction / (1 - test_fraction) * rest)
    return rest - n_val, n_val, n_test


def _split_bounds(rows: int, n: int, n_held: int, stratified: bool) -> tuple[int, int]:
    """The fewest rows a split of ``n_held`` held-out rows among ``n`` can give a class
    of ``rows`` rows in the held-out part and in the rest."""
    if stratified:
        return rows * n_held // n, rows - (-(-rows * n_held // n))
    return max(0, rows - (n - n_held)), max(0, rows - n_held)


def holdout_class_rows(
    class_rows: Mapping, validation_fraction: float | None, test_fraction: float
) -> dict:
    """The fewest rows of each class in each part of a site's rows, whatever the seed.

    Each split is taken at its worst: stratified when every class surely has
    two rows or more at that point, otherwise the worse of a stratified and a
    plain split. The bounds grow with a class's rows, so the fewest rows the
    first split leaves a class give the second split's worst case.

    Parameters
    ----------
    class_rows : mapping of class label to int
        The site's rows of each class (every class it has, each at least 1).
    validation_fraction, test_fraction : float
        The site's holdouts, as in its YAML (``validation_fraction=None``: no
        validation rows, validation mode ``oob``).

    Returns
    -------
    dict
        Class label -> ``(training, validation, test)`` rows guaranteed to it.

    Examples
    --------
    >>> holdout_class_rows({0: 297, 1: 3}, 0.2, 0.25)[1]
    (1, 0, 0)
    >>> holdout_class_rows({0: 280, 1: 20}, 0.2, 0.25)[1]
    (11, 4, 5)
    """
    counts = {label: int(c) for label, c in class_rows.items()}
    n = sum(counts.values())
    _, n_val, n_test = split_sizes(n, validation_fraction, test_fraction)
    n_rest = n - n_test
    first = min(counts.values()) >= 2
    out = {}
    rest = {}
    for label, c in counts.items():
        test, rest[label] = _split_bounds(c, n, n_test, first)
        out[label] = test
    if validation_fraction is None:  # oob: no validation rows
        return {label: (rest[label], 0, out[label]) for label in counts}
    second = [True] if min(rest.values()) >= 2 else [True, False]
    for label, c in rest.items():
        val, train = (
            min(b) for b in zip(*(_split_bounds(c, n_rest, n_val, s) for s in second), strict=True)
        )
        out[label] = (train, val, out[label])
    return out


def checked_parts(rows: tuple, validation_fraction: float | None) -> tuple:
    """The parts of a class's ``(training, validation, test)`` rows that must hold it: all
    three, or training and test without validation rows (``validation_fraction=None``)."""
    return tuple(rows) if validation_fraction is not None else (rows[0], rows[2])


def fewest_class_rows(n_rows: int, validation_fraction: float | None, test_fraction: float) -> int:
    """The fewest rows a class needs, at a site of ``n_rows`` rows whose other classes are
    large, for :data:`MIN_CLASS_ROWS_PER_PART` of them in every part (``n_rows + 1`` when
    no number of rows is enough)."""
    for c in range(1, n_rows):
        rows = holdout_class_rows({0: n_rows - c, 1: c}, validation_fraction, test_fraction)
        if all(
            min(checked_parts(r, validation_fraction)) >= MIN_CLASS_ROWS_PER_PART
            for r in (rows[1], rows[0])
        ):
            return c
    return n_rows + 1


def _rows(k) -> str:
    return f"{int(k)} row" + ("" if int(k) == 1 else "s")


def describe_short_classes(
    y, validation_fraction: float | None, test_fraction: float, random_state=None
) -> str | None:
    """Why the job could not run on a site with this target column, or None when it can.

    The site's split (:func:`split_site_rows` with the job's seed) must leave
    :data:`MIN_CLASS_ROWS_PER_PART` rows of every class in each part. The
    text names the short classes, the rows each part would get and the rows
    a class needs at a site of this size whatever the seed.

    Parameters
    ----------
    y : array-like
        The site's target column (after ``label_map``).
    validation_fraction, test_fraction : float
        ``validation_fraction=None``: no validation rows (validation mode ``oob``).
    random_state : int
        The job's ``seed``.

    Examples
    --------
    >>> print(describe_short_classes([0] * 99 + [1], 0.2, 0.25, random_state=0))
    ... # doctest: +ELLIPSIS
    class counts {0: 99, 1: 1}: ...a class needs at least 6 rows...
    >>> describe_short_classes([0] * 90 + [1] * 10, 0.2, 0.25, random_state=0) is None
    True
    """
    rows = part_class_rows(y, validation_fraction, test_fraction, random_state)
    names = checked_parts(PARTS, validation_fraction)
    short = {
        label: checked_parts(r, validation_fraction)
        for label, r in rows.items()
        if min(checked_parts(r, validation_fraction)) < MIN_CLASS_ROWS_PER_PART
    }
    if not short:
        return None
    n = len(np.asarray(y))
    need = fewest_class_rows(n, validation_fraction, test_fraction)
    found = ", ".join(f"{_label(label)!r}: {sum(r)}" for label, r in rows.items())
    parts = "; ".join(
        f"class {_label(label)!r} ({_rows(sum(r))}) gets "
        + ", ".join(f"{k} {name}" for k, name in zip(r, names, strict=True))
        + " rows"
        for label, r in short.items()
    )
    held = (
        f"test_fraction {test_fraction:g} and validation_fraction {validation_fraction:g}"
        if validation_fraction is not None
        else f"test_fraction {test_fraction:g} (validation: oob, no validation rows)"
    )
    return (
        f"class counts {{{found}}}: the job holds out {held} of the rows (stratified, seed "
        f"{random_state}), and {parts}, but every class needs at least "
        f"{MIN_CLASS_ROWS_PER_PART} row in each part; with {n} rows a class needs at least "
        f"{need} rows to keep one in every part whatever the seed"
    )


def _label(label):
    return label.item() if isinstance(label, np.generic) else label
