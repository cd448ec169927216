"""Non-iid row partitions: label skew (Dirichlet) and quantity skew over simulated sites.

:func:`~.partition.split_rows` deals a table's rows evenly and stratified, as
the paper does: every site has the same size and the same class mix. Real
hospitals differ in both. This module deals the rows with

* **label skew** (:func:`dirichlet_rows`): each class's rows are shared among
  the sites by proportions drawn from a Dirichlet distribution with
  concentration ``alpha``, the algorithm of Flower Datasets'
  ``DirichletPartitioner``; small ``alpha`` gives each site a few dominant
  classes, large ``alpha`` approaches the even deal;
* **quantity skew** (:func:`quantity_rows`): the site sizes follow proportions
  drawn from a symmetric Dirichlet distribution with concentration ``beta``,
  as NIID-Bench's ``iid-diff-quantity`` partition does, and within its size
  each site gets the table's class mix.

Both take ``min_class_rows``: every site first receives that many rows of
every class, so the sites can always be split into training and test rows
that hold every class; the skew applies to the remaining rows.
:func:`skewed_table` combines either partition with the columns of
:func:`~.partition.assign_features` (target pairwise Jaccard ``J``).

Every random choice comes from ``random_state`` (an int seed, a
:class:`numpy.random.Generator` or ``None``), so a seed reproduces a split.

Example
-------
>>> y = [0] * 60 + [1] * 40
>>> parts = dirichlet_rows(y, 3, alpha=0.5, min_class_rows=4, random_state=0)
>>> sorted(int(i) for p in parts for i in p) == list(range(100))
True
>>> all(np.isin([0, 1], np.asarray(y)[p]).all() for p in parts)
True
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .partition import RandomState, _check_sites, assign_features, site_names

logger = logging.getLogger(__name__)

#: The row partitions of an experiment: the paper's even deal and the two skews.
PARTITIONS = ("jaccard", "dirichlet", "quantity")
#: Samplings :func:`dirichlet_rows` tries beyond the first before it gives up (as Flower's).
MAX_ATTEMPTS = 10

__all__ = [
    "MAX_ATTEMPTS",
    "PARTITIONS",
    "class_shares",
    "dirichlet_rows",
    "quantity_rows",
    "scenario_name",
    "skewed_table",
]


def _labels(y) -> tuple[np.ndarray, int]:
    """Class codes in order of first appearance (as ``datasets.Dataset.unique``)."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y.shape}")
    codes, uniques = pd.factorize(pd.Series(y), sort=False, use_na_sentinel=False)
    return codes, len(uniques)


def _concentration(value, n_sites: int, what: str) -> np.ndarray:
    """A positive finite concentration, scalar or one per site, as an array of ``n_sites``."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a positive number or one per site, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{what} must be a positive number or one per site, got {value!r}"
        ) from None
    if arr.ndim == 0:
        arr = np.full(n_sites, float(arr))
    if arr.ndim != 1 or len(arr) != n_sites:
        raise ValueError(f"{what} must be one number or {n_sites} (one per site), got {value!r}")
    if not (np.isfinite(arr).all() and (arr > 0).all()):
        raise ValueError(f"{what} must be finite and > 0, got {value!r}")
    return arr


def _check_count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{what} must be an integer >= 0, got {value!r}")
    return int(value)


def _floor_rows(
    codes: np.ndarray, n_classes: int, n_sites: int, min_class_rows: int, rng
) -> tuple[list[list[int]], list[np.ndarray]]:
    """Give each site ``min_class_rows`` random rows of every class; the rest per class.

    Returns the sites' floor rows and, per class (codes order), the rows left
    over in their original order. Draws nothing when ``min_class_rows`` is 0.
    """
    sites: list[list[int]] = [[] for _ in range(n_sites)]
    rest = []
    for k in range(n_classes):
        rows = np.flatnonzero(codes == k)
        if min_class_rows:
            rows = rng.permutation(rows)
            for s in range(n_sites):
                sites[s].extend(rows[s * min_class_rows : (s + 1) * min_class_rows].tolist())
            rows = np.sort(rows[n_sites * min_class_rows :])
        rest.append(rows)
    return sites, rest


def _check_floor(counts: np.ndarray, n_sites: int, min_class_rows: int, uniques) -> None:
    short = [str(u) for u, c in zip(uniques, counts, strict=True) if c < n_sites * min_class_rows]
    if short:
        found = ", ".join(f"{u}: {c}" for u, c in zip(uniques, counts, strict=True))
        raise ValueError(
            f"min_class_rows={min_class_rows} rows of every class at {n_sites} sites need "
            f"{n_sites * min_class_rows} rows of every class; class counts {{{found}}}, too few "
            f"of class {', '.join(short)}"
        )


def dirichlet_rows(
    y,
    n_sites: int,
    alpha,
    min_partition_size: int = 10,
    self_balancing: bool = True,
    shuffle: bool = True,
    min_class_rows: int = 0,
    max_attempts: int = MAX_ATTEMPTS,
    random_state: RandomState = None,
) -> list[np.ndarray]:
    """Deal row indices over the sites with Dirichlet label skew.

    This is the algorithm of Flower Datasets' ``DirichletPartitioner``
    (``flwr_datasets/partitioner/dirichlet_partitioner.py``, after Yurochkin
    et al. 2019, "Bayesian nonparametric federated learning of neural
    networks"), on a label array instead of a Hugging Face dataset. For each
    class in order of first appearance, shares ``p ~ Dirichlet(alpha)`` of
    its rows go to the sites; with ``self_balancing`` a site that already
    holds more than ``len(y) / n_sites`` rows gets no more (the other shares
    are renormalised); the class's rows, in their original order, are cut at
    ``int(cumsum(p) * n_k)``. When a site ends with fewer than
    ``min_partition_size`` rows every class is drawn again, at most
    ``max_attempts`` more times; then :class:`ValueError`. Finally each site's
    rows are shuffled when ``shuffle``.

    Differences from ``DirichletPartitioner``:

    * ``min_class_rows`` (default 0, which leaves the algorithm as it is):
      before the Dirichlet shares, every site receives that many random rows
      of every class, so every site can hold every class in its training and
      test rows however small ``alpha`` is; the shares then deal the rest of
      each class.
    * With self-balancing, when every site still allowed to grow drew a
      share of exactly 0 (underflow at a tiny ``alpha``), Flower divides by
      zero; here the class keeps its unbalanced shares.
    * Failed attempts are logged (debug) instead of warned, and the error
      names the sizes reached. Flower's ``seed`` is ``random_state`` here.

    As in Flower, the cuts are ``int`` of a floating-point cumulative sum:
    when the sites still allowed to grow come first, a sum just below 1 can
    leave a class's last row to the last site even when it is full.

    With an int seed and ``min_class_rows=0`` the draws are the Flower
    partitioner's (one ``dirichlet`` per class and attempt, one ``shuffle``
    per site).

    Parameters
    ----------
    y : array-like, shape (n_rows,)
        Class labels.
    n_sites : int
        Number of sites (>= 2).
    alpha : float or sequence of float
        Dirichlet concentration, one number or one per site, each > 0.
    min_partition_size : int
        Fewest rows a site may end with.
    self_balancing : bool
        Stop giving rows to a site once it holds more than the even share.
    shuffle : bool
        Shuffle each site's rows at the end (else they come class by class).
    min_class_rows : int
        Rows of every class each site receives before the Dirichlet deal.
    max_attempts : int
        Samplings tried after the first when ``min_partition_size`` is not met.
    random_state : int, numpy.random.Generator or None
        Source of every random choice.

    Returns
    -------
    list of numpy.ndarray
        One array of row positions per site; together a partition of
        ``range(len(y))``.

    Raises
    ------
    ValueError
        For an argument out of range, too few rows of a class for
        ``min_class_rows``, or when ``min_partition_size`` is not met after
        ``max_attempts`` more samplings.

    Examples
    --------
    >>> y = np.repeat([0, 1, 2], 50)
    >>> parts = dirichlet_rows(y, 4, alpha=0.3, min_partition_size=5, random_state=1)
    >>> sum(len(p) for p in parts)
    150
    >>> parts = dirichlet_rows(y, 4, alpha=100.0, random_state=1)  # nearly even
    >>> [len(p) for p in parts]
    [37, 37, 37, 39]
    """
    n_sites = _check_sites(n_sites)
    alpha = _concentration(alpha, n_sites, "alpha")
    min_partition_size = _check_count(min_partition_size, "min_partition_size")
    min_class_rows = _check_count(min_class_rows, "min_class_rows")
    max_attempts = _check_count(max_attempts, "max_attempts")
    codes, n_classes = _labels(y)
    if len(codes) < n_sites:
        raise ValueError(f"y must have at least n_sites={n_sites} rows, got {len(codes)}")
    uniques = pd.unique(pd.Series(np.asarray(y)))
    _check_floor(np.bincount(codes, minlength=n_classes), n_sites, min_class_rows, uniques)
    rng = np.random.default_rng(random_state)
    average = len(codes) / n_sites
    attempt = 0
    while True:
        sites, rest = _floor_rows(codes, n_classes, n_sites, min_class_rows, rng)
        for rows in rest:
            shares = rng.dirichlet(alpha)
            if self_balancing:
                full = np.array([len(s) > average for s in sites])
                balanced = np.where(full, 0.0, shares)
                if balanced.sum() > 0:
                    shares = balanced / balanced.sum()
            cuts = (np.cumsum(shares) * len(rows)).astype(int)[:-1]
            for s, part in enumerate(np.split(rows, cuts)):
                sites[s].extend(part.tolist())
        sizes = [len(s) for s in sites]
        if min(sizes) >= min_partition_size:
            break
        logger.debug(
            "dirichlet_rows: attempt %d gave site sizes %s, below min_partition_size=%d",
            attempt,
            sizes,
            min_partition_size,
        )
        if attempt == max_attempts:
            raise ValueError(
                f"min_partition_size={min_partition_size} was not met after {max_attempts + 1} "
                f"samplings from Dirichlet(alpha={alpha.tolist()}) over {n_sites} sites of "
                f"{len(codes)} rows (last site sizes {sizes}); raise alpha, lower "
                "min_partition_size or use fewer sites"
            )
        attempt += 1
    if shuffle:
        for s in sites:
            rng.shuffle(s)
    return [np.asarray(s, dtype=np.intp) for s in sites]


def _largest_remainder(total: int, shares: np.ndarray) -> np.ndarray:
    """Integers summing to ``total`` in proportion to ``shares`` (Hamilton's method)."""
    quota = total * shares / shares.sum()
    counts = np.floor(quota).astype(int)
    order = np.argsort(-(quota - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return counts


def quantity_rows(
    y,
    n_sites: int,
    beta: float,
    min_rows: int = 10,
    min_class_rows: int = 0,
    random_state: RandomState = None,
) -> list[np.ndarray]:
    """Deal row indices over sites of Dirichlet-distributed sizes, stratified within each.

    The sites' size proportions ``p ~ Dirichlet(beta, ..., beta)`` are drawn
    once, as NIID-Bench's quantity skew (``iid-diff-quantity``) does. Each site
    gets ``m = max(min_rows, min_class_rows * n_classes)`` rows plus its share
    ``p`` of the remaining rows (largest remainders). Its rows are
    ``min_class_rows`` random rows of every class and then a block of the other
    rows, shuffled within each class and interleaved in proportion to the class
    counts, so every site has the table's class mix to within about a row per
    class.

    Differences from NIID-Bench: NIID-Bench draws ``p`` again until every
    site would have 10 rows (without a bound on the attempts) and deals a
    random permutation of the rows; here the minimum size comes first, so no
    redraw is needed, and the deal is stratified.

    Parameters
    ----------
    y : array-like, shape (n_rows,)
        Class labels.
    n_sites : int
        Number of sites (>= 2).
    beta : float
        Concentration of the size proportions (> 0); small values give very
        unequal sites, large ones nearly equal sites.
    min_rows : int
        Fewest rows of a site.
    min_class_rows : int
        Fewest rows of every class at a site.
    random_state : int, numpy.random.Generator or None
        Source of every random choice.

    Returns
    -------
    list of numpy.ndarray
        One sorted array of row positions per site; together a partition of
        ``range(len(y))``.

    Raises
    ------
    ValueError
        For an argument out of range or too few rows for the minimums.

    Examples
    --------
    >>> y = np.repeat([0, 1], [120, 80])
    >>> parts = quantity_rows(y, 3, beta=0.5, min_rows=20, random_state=0)
    >>> sizes = [len(p) for p in parts]
    >>> sum(sizes), min(sizes) >= 20
    (200, True)
    >>> [round(float(np.mean(y[p])), 1) for p in parts]  # the class mix of the table
    [0.4, 0.4, 0.4]
    """
    n_sites = _check_sites(n_sites)
    beta = float(_concentration(beta, 1, "beta")[0])
    min_rows = _check_count(min_rows, "min_rows")
    min_class_rows = _check_count(min_class_rows, "min_class_rows")
    codes, n_classes = _labels(y)
    uniques = pd.unique(pd.Series(np.asarray(y)))
    counts = np.bincount(codes, minlength=n_classes)
    _check_floor(counts, n_sites, min_class_rows, uniques)
    smallest = max(min_rows, min_class_rows * n_classes)
    if len(codes) < n_sites * smallest:
        raise ValueError(
            f"{n_sites} sites of at least {smallest} rows need {n_sites * smallest} rows, "
            f"got {len(codes)}; lower min_rows or use fewer sites"
        )
    rng = np.random.default_rng(random_state)
    shares = rng.dirichlet(np.full(n_sites, beta))
    sizes = smallest + _largest_remainder(len(codes) - n_sites * smallest, shares)
    sites, rest = _floor_rows(codes, n_classes, n_sites, min_class_rows, rng)
    # the other rows, each class shuffled and spread evenly along one sequence
    keys, order = [], []
    for rows in rest:
        rows = rng.permutation(rows)
        keys.append((np.arange(len(rows)) + 0.5) / max(len(rows), 1))
        order.append(rows)
    sequence = np.concatenate(order)[np.argsort(np.concatenate(keys), kind="stable")]
    blocks = np.cumsum([size - len(s) for size, s in zip(sizes, sites, strict=True)])[:-1]
    for s, block in enumerate(np.split(sequence, blocks)):
        sites[s].extend(block.tolist())
    return [np.sort(np.asarray(s, dtype=np.intp)) for s in sites]


def scenario_name(dataset: str, partition: str, alpha: float | None) -> str:
    """The ``dataset`` value of a scenario's tidy rows: ``name`` or ``name@partition-alpha``.

    Examples
    --------
    >>> scenario_name("wine", "jaccard", None)
    'wine'
    >>> scenario_name("wine", "dirichlet", 0.3), scenario_name("wine", "quantity", 1.0)
    ('wine@dirichlet-0.3', 'wine@quantity-1')
    """
    if partition == "jaccard":
        return dataset
    return f"{dataset}@{partition}-{alpha:g}"


def skewed_table(
    frame: pd.DataFrame,
    target: str,
    n_sites: int,
    jaccard: float,
    partition: str,
    alpha: float,
    min_class_rows: int = 0,
    random_state: RandomState = None,
    stratify: bool = True,
) -> dict[str, pd.DataFrame]:
    """Split a table into sites with overlapping columns and skewed rows.

    As :func:`~.partition.split_table`, whose columns it draws the same way
    (:func:`~.partition.assign_features`, target Jaccard ``jaccard``), but the
    rows come from :func:`dirichlet_rows` (``partition="dirichlet"``,
    concentration ``alpha``) or :func:`quantity_rows` (``"quantity"``, size
    concentration ``alpha``), each site holding at least ``min_class_rows``
    rows of every class. The Dirichlet deal keeps Flower's defaults
    (self-balancing, shuffle) and requires no size beyond the class floor.

    With ``stratify=False`` (a regression target, which has no classes) the
    quantity skew deals the rows as one class, regardless of the target's
    values: every site first gets ``min_class_rows`` random rows, then its
    share of the others in random order. Label skew needs classes, so
    ``"dirichlet"`` is refused then.

    Examples
    --------
    >>> frame = pd.DataFrame({f"x{i}": range(60) for i in range(4)}).assign(y=[0, 1] * 30)
    >>> sites = skewed_table(frame, "y", 3, 0.5, "dirichlet", 0.5, 4, random_state=0)
    >>> sorted(sites), sum(len(t) for t in sites.values())
    (['site-1', 'site-2', 'site-3'], 60)
    """
    if partition not in PARTITIONS[1:]:
        raise ValueError(f"partition={partition!r} must be one of {', '.join(PARTITIONS[1:])}")
    if target not in frame.columns:
        raise ValueError(f"target {target!r} is not a column of frame: {list(frame.columns)}")
    if partition == "dirichlet" and not stratify:
        raise ValueError(
            "partition='dirichlet' (label skew) shares each class's rows among the sites; a "
            "regression target (stratify=False) has no classes: use partition 'quantity'"
        )
    features = [c for c in frame.columns if c != target]
    rng = np.random.default_rng(random_state)
    columns = assign_features(features, n_sites, jaccard, rng)
    y = frame[target].to_numpy() if stratify else np.zeros(len(frame), dtype=int)
    if partition == "dirichlet":
        rows = dirichlet_rows(
            y, n_sites, alpha, min_partition_size=0, min_class_rows=min_class_rows, random_state=rng
        )
    else:
        rows = quantity_rows(
            y, n_sites, alpha, min_rows=0, min_class_rows=min_class_rows, random_state=rng
        )
    names = site_names(n_sites)
    logger.debug(
        "%s split of %d rows over %d sites (alpha %g): sizes %s",
        partition,
        len(frame),
        n_sites,
        alpha,
        [len(r) for r in rows],
    )
    return {
        name: frame.iloc[idx][cols + [target]]
        for name, cols, idx in zip(names, columns, rows, strict=True)
    }


def class_shares(y, parts: Sequence[np.ndarray]) -> pd.DataFrame:
    """Rows of every class at every site (sites as rows), to inspect a partition.

    Examples
    --------
    >>> class_shares([0, 0, 1, 1], [np.array([0, 2]), np.array([1, 3])]).to_numpy().tolist()
    [[1, 1], [1, 1]]
    """
    y = np.asarray(y)
    classes = np.unique(y)
    return pd.DataFrame(
        [[int((y[p] == c).sum()) for c in classes] for p in parts],
        columns=classes,
        index=site_names(len(parts)) if len(parts) >= 2 else None,
    )
