"""Which of a site's training rows each of its trees trained on: the in-bag record.

A scikit-learn forest trains each tree on a bootstrap sample of the rows.
:func:`sample_counts` reproduces every tree's sample (its multiplicities, as
scikit-learn draws them: ``estimators_samples_``, all ones without
``bootstrap``). An :class:`InBagRecord` keeps, for the trees a site sends,
which of its training rows each trained on, so that the site can later score
its own training rows *out of bag* with the pooled forest: each row by the
trees that never saw it (architecture.md, "Out-of-bag validation").

A tree is identified after pooling by a fingerprint of its arrays
(:func:`tree_fingerprints`), not by its position: the pooled forest holds the
site's trees among every other site's, in any order, with the features
renumbered in the global space, the classes widened to the union, and the
trees rewritten in preorder by the payload format. The fingerprint reads only
what none of these change: each internal node's depth, feature *name* and
threshold (for a categorical feature the last level code that goes left, so
moving a threshold to the cut between codes changes nothing). Counts and
class distributions are left out, so count noise added after the record
changes nothing either. A tree of the site that matches no entry (changed
after the record, e.g. pruned by a privacy filter) is counted as having
trained on *every* row: it never scores one of the site's rows, so the
scores stay out of sample. Trees the transforms removed simply have no
entry.

The record stays at the site: it holds which rows trained which tree, so no
message of the job carries it (``tests/federation/test_messages.py``).
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict

import numpy as np

from .forest import NODE_FIELDS, PooledForest

logger = logging.getLogger(__name__)


def sample_counts(rf, n_rows: int) -> np.ndarray:
    """Per-tree bootstrap multiplicities of a fitted scikit-learn forest, shape (n_trees, n_rows).

    The rows each tree was trained on, as scikit-learn draws them
    (``estimators_samples_``: ``_generate_sample_indices`` with the tree's
    seed and ``_get_n_samples_bootstrap`` rows, ``max_samples`` included);
    with ``bootstrap=False`` every row counts once in every tree.

    Parameters
    ----------
    rf : RandomForestClassifier or RandomForestRegressor
        A fitted forest.
    n_rows : int
        The number of rows it was fitted on.

    Returns
    -------
    ndarray of int64, shape (n_trees, n_rows)

    Raises
    ------
    ValueError
        When ``n_rows`` is not the number of rows the forest was fitted on.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X = np.arange(20.0).reshape(-1, 1); y = (X[:, 0] > 9).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    >>> counts = sample_counts(rf, 20)
    >>> counts.shape, counts.sum(axis=1).tolist()
    ((3, 20), [20, 20, 20])
    """
    n_rows = int(n_rows)
    fitted_rows = getattr(rf, "_n_samples", n_rows)
    if fitted_rows != n_rows:
        raise ValueError(f"n_rows={n_rows}, but the forest was fitted on {fitted_rows} rows")
    out = np.ones((len(rf.estimators_), n_rows), dtype=np.int64)
    if getattr(rf, "bootstrap", False):
        for i, rows in enumerate(rf.estimators_samples_):
            out[i] = np.bincount(np.asarray(rows), minlength=n_rows)
    return out


def tree_fingerprints(forest: PooledForest) -> list[bytes]:
    """One fingerprint per tree of ``forest``, the same after pooling and a payload round trip.

    A BLAKE2b digest of the tree's internal nodes, each as (depth, feature
    name, threshold; for a categorical feature the floor of the threshold),
    sorted, so the order in which the tree stores its nodes does not matter.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X = np.random.RandomState(0).normal(size=(50, 2)); y = (X[:, 0] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y)
    >>> a = PooledForest.from_sklearn(rf, ["a", "b"], owner="s1")
    >>> b = PooledForest.from_payload(PooledForest.concat([a, a]).to_payload())
    >>> tree_fingerprints(b) == tree_fingerprints(a) * 2
    True
    """
    internal = forest.feature >= 0
    name_keys = np.array(
        [
            int.from_bytes(hashlib.blake2b(n.encode(), digest_size=8).digest(), "little") >> 1
            for n in forest.feature_names
        ]
        + [0],
        dtype=np.int64,
    )
    feature = np.where(internal, forest.feature, -1)
    threshold = np.where(internal, forest.threshold, 0.0)
    categorical = internal & forest.is_categorical[np.where(internal, forest.feature, 0)]
    threshold = np.where(categorical, np.floor(threshold), threshold)
    keys = np.empty((forest.n_nodes, 3), dtype=np.int64)
    keys[:, 0] = forest.node_depth
    keys[:, 1] = name_keys[feature]
    keys[:, 2] = threshold.astype(np.float64).view(np.int64)
    tree = forest.tree_of_node
    order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0], ~internal, tree))
    keys, tree, internal = keys[order], tree[order], internal[order]
    bounds = np.searchsorted(tree, np.arange(forest.n_trees + 1))
    out = []
    for t in range(forest.n_trees):
        lo, hi = bounds[t], bounds[t + 1]
        part = keys[lo:hi][internal[lo:hi]]
        out.append(hashlib.blake2b(np.ascontiguousarray(part).tobytes(), digest_size=16).digest())
    return out


class InBagRecord:
    """Which of a site's training rows each of the trees it sent trained on.

    Build it with :meth:`build` from the forest as the site sends it (after
    every privacy transform) and the bootstrap counts of the trees that
    remain; ask it with :meth:`matrix` for any forest holding these trees.
    It stays at the site: no message carries it.

    Parameters
    ----------
    site : str
        The site whose trees and rows these are (its name in ``owners``).
    fingerprints : list of bytes
        :func:`tree_fingerprints` of the site's trees.
    in_bag : ndarray of bool, shape (len(fingerprints), n_rows)
        ``True`` where the tree trained on the row.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X = np.random.RandomState(0).normal(size=(30, 2)); y = (X[:, 0] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=4, random_state=0).fit(X, y)
    >>> forest = PooledForest.from_sklearn(rf, ["a", "b"], owner="s1")
    >>> record = InBagRecord.build("s1", forest, sample_counts(rf, 30))
    >>> bool((record.matrix(forest) == (sample_counts(rf, 30) > 0)).all())
    True
    """

    def __init__(self, site: str, fingerprints, in_bag):
        in_bag = np.asarray(in_bag)
        if in_bag.dtype != bool or in_bag.ndim != 2 or in_bag.shape[0] != len(fingerprints):
            raise ValueError(
                f"in_bag must be a bool array of shape ({len(fingerprints)}, n_rows), got "
                f"{in_bag.dtype} {in_bag.shape}"
            )
        self.site = str(site)
        self.fingerprints = list(fingerprints)
        self.in_bag = in_bag

    @property
    def n_rows(self) -> int:
        """The number of the site's training rows."""
        return int(self.in_bag.shape[1])

    @property
    def n_trees(self) -> int:
        """The number of trees recorded."""
        return int(self.in_bag.shape[0])

    @classmethod
    def build(cls, site: str, forest: PooledForest, counts) -> InBagRecord:
        """The record of ``forest`` (the site's trees as sent) and its trees' ``counts``.

        Parameters
        ----------
        site : str
        forest : PooledForest
            The forest the site sends, every tree trained by ``site``.
        counts : ndarray of shape (forest.n_trees, n_rows)
            Each tree's multiplicities of the training rows (:func:`sample_counts`
            of the trees that remain), or a bool in-bag matrix.
        """
        counts = np.asarray(counts)
        if counts.ndim != 2 or counts.shape[0] != forest.n_trees:
            raise ValueError(
                f"counts must have shape ({forest.n_trees}, n_rows): one row per tree of the "
                f"forest, got {counts.shape}"
            )
        return cls(site, tree_fingerprints(forest), counts > 0)

    def matrix(self, forest: PooledForest) -> np.ndarray:
        """Whether each tree of ``forest`` trained on each of the site's rows.

        Trees of other sites never did; a tree of the site is matched by its
        fingerprint (equal fingerprints in the order they come); one of the
        site's trees that matches no entry counts as having trained on every
        row (logged).

        Returns
        -------
        ndarray of bool, shape (forest.n_trees, n_rows)

        Raises
        ------
        ValueError
            When ``forest`` holds trees of the site and none of them matches
            the record: it was made for another forest.
        """
        out = np.zeros((forest.n_trees, self.n_rows), dtype=bool)
        own = np.flatnonzero(forest.owner_mask(self.site))
        if not own.size:
            return out
        entries: dict[bytes, list[int]] = defaultdict(list)
        for i, fp in enumerate(self.fingerprints):
            entries[fp].append(i)
        seen: dict[bytes, int] = defaultdict(int)
        unmatched = []
        prints = tree_fingerprints(forest)
        for t in own:
            fp = prints[t]
            k = seen[fp]
            seen[fp] += 1
            if k < len(entries.get(fp, ())):
                out[t] = self.in_bag[entries[fp][k]]
            else:
                unmatched.append(int(t))
        if len(unmatched) == own.size:
            raise ValueError(
                f"the in-bag record of site {self.site!r} matches none of the forest's "
                f"{own.size} trees of {self.site!r}: it was made for another forest"
            )
        if unmatched:
            logger.warning(
                "site %s: %d of its %d trees in the forest match no entry of its in-bag "
                "record (changed after training); they count as trained on every row",
                self.site,
                len(unmatched),
                own.size,
            )
            out[unmatched] = True
        return out

    def __repr__(self) -> str:
        return f"InBagRecord(site={self.site!r}, n_trees={self.n_trees}, n_rows={self.n_rows})"


def tagged_by_tree(forest: PooledForest) -> PooledForest:
    """``forest`` with one owner per tree (``"0"``, ``"1"``, ...), to follow its trees
    through transforms that drop some (:func:`tree_origin`)."""
    return PooledForest(
        feature_names=forest.feature_names,
        classes=forest.classes,
        owners=[str(i) for i in range(forest.n_trees)],
        categories=forest.categories,
        task=forest.task,
        times=forest.times,
        tree_start=forest.tree_start,
        tree_owner=np.arange(forest.n_trees),
        value=forest.value,
        **{k: getattr(forest, k) for k in NODE_FIELDS},
    )


def tree_origin(tagged: PooledForest, owner: str) -> tuple[PooledForest, np.ndarray]:
    """A forest derived from :func:`tagged_by_tree`'s, owned by ``owner`` again, and the
    index in the original forest of each of its trees."""
    origin = np.asarray([int(tagged.owners[o]) for o in tagged.tree_owner], dtype=np.int64)
    forest = PooledForest(
        feature_names=tagged.feature_names,
        classes=tagged.classes,
        owners=[owner],
        categories=tagged.categories,
        task=tagged.task,
        times=tagged.times,
        tree_start=tagged.tree_start,
        tree_owner=np.zeros(tagged.n_trees, dtype=np.int32),
        value=tagged.value,
        **{k: getattr(tagged, k) for k in NODE_FIELDS},
    )
    return forest, origin
