"""Split one table into sites with partially overlapping columns (paper, section IV-A).

The experiments of the paper simulate ``N`` sites from a single table:

* **Columns.** For a target pairwise Jaccard similarity ``J`` of the sites'
  feature sets, ``O`` features are shared by every site and the remaining
  ``F - O`` are private, dealt to the sites in a balanced way. With ``P``
  private features per site, ``F = O + N P`` and ``J = O / (O + 2P)`` (eq. 23),
  so ``O = F / (1 + N (1/(2J) - 1/2))`` (eq. 24), rounded to the nearest integer.
* **Rows.** The rows are distributed evenly and randomly over the sites; here
  the deal is stratified by class so that every site sees each class as evenly
  as possible. A regression target has no classes: with ``stratify=False``
  the rows are dealt in one random order, whatever the target's values.

Every random choice comes from ``random_state`` (an int seed, a
:class:`numpy.random.Generator` or ``None``), so a seed reproduces a split.

Example
-------
>>> import pandas as pd
>>> frame = pd.DataFrame({f"x{i}": range(8) for i in range(6)})
>>> frame["y"] = [0, 1] * 4
>>> sites = split_table(frame, "y", n_sites=2, jaccard=0.5, random_state=0)
>>> sorted(sites)
['site-1', 'site-2']
>>> sum(len(s) for s in sites.values())
8
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from itertools import combinations

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

RandomState = int | np.random.Generator | None

__all__ = [
    "assign_features",
    "pairwise_jaccard",
    "shared_feature_count",
    "site_names",
    "split_rows",
    "split_table",
]


def _check_sites(n_sites) -> int:
    if isinstance(n_sites, bool) or not isinstance(n_sites, (int, np.integer)) or n_sites < 2:
        raise ValueError(f"n_sites must be an integer >= 2, got {n_sites!r}")
    return int(n_sites)


def _check_jaccard(jaccard) -> float:
    if (
        isinstance(jaccard, bool)
        or not isinstance(jaccard, (int, float, np.integer, np.floating))
        or not math.isfinite(jaccard)
        or not 0 < jaccard <= 1
    ):
        raise ValueError(f"jaccard must be a number in (0, 1], got {jaccard!r}")
    return float(jaccard)


def site_names(n_sites: int) -> list[str]:
    """The site names ``site-1 .. site-N``.

    Examples
    --------
    >>> site_names(3)
    ['site-1', 'site-2', 'site-3']
    """
    return [f"site-{k}" for k in range(1, _check_sites(n_sites) + 1)]


def shared_feature_count(n_features: int, n_sites: int, jaccard: float) -> int:
    """Number of features every site shares for a target pairwise Jaccard (eq. 24).

    ``O = F / (1 + N (1/(2J) - 1/2))``, rounded to the nearest integer (halves
    round up) and clipped to ``[1, F]`` so that the sites share at least one
    column.

    Parameters
    ----------
    n_features : int
        Total number of features ``F`` (>= 1).
    n_sites : int
        Number of sites ``N`` (>= 2).
    jaccard : float
        Target pairwise Jaccard similarity ``J`` of the sites' feature sets, in (0, 1].

    Returns
    -------
    int
        The number of shared features ``O``.

    Raises
    ------
    ValueError
        If an argument is out of range; the message names the argument.

    Examples
    --------
    >>> shared_feature_count(16, 2, 0.5)
    8
    >>> shared_feature_count(16, 6, 0.2)
    1
    """
    if (
        isinstance(n_features, bool)
        or not isinstance(n_features, (int, np.integer))
        or n_features < 1
    ):
        raise ValueError(f"n_features must be an integer >= 1, got {n_features!r}")
    n_sites = _check_sites(n_sites)
    jaccard = _check_jaccard(jaccard)
    ideal = n_features / (1 + n_sites * (1 / (2 * jaccard) - 0.5))
    return int(min(max(math.floor(ideal + 0.5), 1), n_features))


def assign_features(
    features: Sequence[str],
    n_sites: int,
    jaccard: float,
    random_state: RandomState = None,
) -> list[list[str]]:
    """Give each site a feature list with a target pairwise Jaccard similarity.

    A random subset of :func:`shared_feature_count` features is shared by all
    sites; the other features are shuffled and dealt round-robin (starting
    from a randomly ordered list of sites) as private features, so the
    numbers of private features differ by at most one between sites.

    Parameters
    ----------
    features : sequence of str
        The feature names (distinct).
    n_sites : int
        Number of sites (>= 2).
    jaccard : float
        Target pairwise Jaccard similarity in (0, 1].
    random_state : int, numpy.random.Generator or None
        Source of every random choice.

    Returns
    -------
    list of list of str
        One list per site, each in the order of ``features``.

    Examples
    --------
    >>> sets = assign_features([f"f{i}" for i in range(8)], 2, 0.6, random_state=0)
    >>> len(set(sets[0]) & set(sets[1]))
    5
    """
    features = list(features)
    if not features:
        raise ValueError("features must hold at least one name, got an empty list")
    if len(set(features)) != len(features):
        dupes = sorted({f for f in features if features.count(f) > 1})
        raise ValueError(f"features must be distinct; repeated: {dupes}")
    n_shared = shared_feature_count(len(features), n_sites, jaccard)
    rng = np.random.default_rng(random_state)
    order = rng.permutation(len(features))
    shared = set(order[:n_shared].tolist())
    private = order[n_shared:]  # already in random order
    site_order = rng.permutation(n_sites)
    members: list[set[int]] = [set(shared) for _ in range(n_sites)]
    for k, feat in enumerate(private.tolist()):
        members[int(site_order[k % n_sites])].add(feat)
    return [[features[i] for i in sorted(m)] for m in members]


def pairwise_jaccard(sets: Iterable[Iterable]) -> float:
    """Mean Jaccard similarity ``|A & B| / |A | B|`` over all pairs of sets.

    Two empty sets count as identical (similarity 1).

    Examples
    --------
    >>> pairwise_jaccard([["a", "b"], ["a", "c"], ["a", "b", "c"]])
    0.5555555555555555
    """
    sets = [set(s) for s in sets]
    if len(sets) < 2:
        raise ValueError(f"sets must hold at least two sets, got {len(sets)}")
    scores = [len(a & b) / len(a | b) if a | b else 1.0 for a, b in combinations(sets, 2)]
    return float(np.mean(scores))


def split_rows(
    y, n_sites: int, random_state: RandomState = None, stratify: bool = True
) -> list[np.ndarray]:
    """Deal row indices evenly over the sites, stratified by class.

    The rows of each class are shuffled and dealt round-robin, continuing
    from class to class, to a randomly ordered list of sites. So every site
    has within one row of ``len(y) / n_sites`` rows and within one row of its
    even share of every class. With ``stratify=False`` (a regression target,
    whose every value would otherwise be a class of its own) all rows are
    shuffled together and dealt the same way: the sizes are as even, and the
    values of ``y`` play no part.

    Parameters
    ----------
    y : array-like, shape (n_rows,)
        Class labels (missing labels form their own class), or any values
        with ``stratify=False``.
    n_sites : int
        Number of sites (>= 2, <= n_rows).
    random_state : int, numpy.random.Generator or None
        Source of every random choice.
    stratify : bool
        Deal each class evenly (default); ``False`` deals the rows regardless of ``y``.

    Returns
    -------
    list of numpy.ndarray
        One sorted array of row positions per site; together a partition of
        ``range(len(y))``.

    Examples
    --------
    >>> parts = split_rows([0, 0, 0, 1, 1, 1], 3, random_state=0)
    >>> [len(p) for p in parts]
    [2, 2, 2]
    >>> [len(p) for p in split_rows([0.5, 1.5, 2.5, 3.5, 4.5], 2, 0, stratify=False)]
    [3, 2]
    """
    n_sites = _check_sites(n_sites)
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y.shape}")
    if len(y) < n_sites:
        raise ValueError(f"y must have at least n_sites={n_sites} rows, got {len(y)}")
    rng = np.random.default_rng(random_state)
    if stratify:
        codes, _ = pd.factorize(pd.Series(y), sort=True, use_na_sentinel=False)
        deal = np.concatenate(
            [rng.permutation(np.flatnonzero(codes == c)) for c in np.unique(codes)]
        )
    else:
        deal = rng.permutation(len(y))
    site_order = rng.permutation(n_sites)
    owner = site_order[np.arange(len(deal)) % n_sites]
    return [np.sort(deal[owner == s]) for s in range(n_sites)]


def split_table(
    frame: pd.DataFrame,
    target: str,
    n_sites: int,
    jaccard: float,
    random_state: RandomState = None,
    stratify: bool = True,
) -> dict[str, pd.DataFrame]:
    """Split a table into sites ``site-1 .. site-N`` with overlapping columns.

    Each site gets its rows from :func:`split_rows` (stratified by ``target``,
    unless ``stratify=False``: a regression target) and its columns from
    :func:`assign_features` over all non-target columns, plus the target
    column last. Rows keep their original index labels.

    Parameters
    ----------
    frame : pandas.DataFrame
        The full table.
    target : str
        The target column.
    n_sites : int
        Number of sites (>= 2).
    jaccard : float
        Target pairwise Jaccard similarity of the feature sets, in (0, 1].
    random_state : int, numpy.random.Generator or None
        Source of every random choice.
    stratify : bool
        Deal the rows stratified by class (default); ``False`` for a regression target.

    Returns
    -------
    dict of str to pandas.DataFrame
        The sites' tables, in site order.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"a": range(6), "b": range(6), "c": range(6), "y": [0, 1] * 3})
    >>> sites = split_table(frame, "y", 2, 0.5, random_state=1)
    >>> [list(s.columns)[-1] for s in sites.values()]
    ['y', 'y']
    """
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    if target not in frame.columns:
        raise ValueError(f"target {target!r} is not a column of frame: {list(frame.columns)}")
    features = [c for c in frame.columns if c != target]
    if not features:
        raise ValueError("frame must have at least one column besides the target")
    rng = np.random.default_rng(random_state)
    columns = assign_features(features, n_sites, jaccard, rng)
    rows = split_rows(frame[target].to_numpy(), n_sites, rng, stratify=stratify)
    names = site_names(n_sites)
    out = {
        name: frame.iloc[idx][cols + [target]]
        for name, cols, idx in zip(names, columns, rows, strict=True)
    }
    logger.debug(
        "split %d rows x %d features into %d sites (target J=%.2f, shared %d, realised J=%.3f)",
        len(frame),
        len(features),
        n_sites,
        jaccard,
        shared_feature_count(len(features), n_sites, jaccard),
        pairwise_jaccard(columns),
    )
    return out
