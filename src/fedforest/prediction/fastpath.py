"""Compiled traversal through scikit-learn's own tree engine.

For rows with no missing value in the columns a site has, every strategy that
makes one decision per node (``fpv``, ``pr``, ``mi``, ``ss``, ``node``,
``local``, ``park``) can be written as an ordinary decision tree over an
*augmented* row:

* a node the strategy discards becomes a leaf marked "discard";
* a node where ``node`` stops becomes an ordinary leaf (its own class
  distribution is the tree's prediction);
* ``mi`` compares an imputed column with the node's threshold;
* ``ss`` splits on the surrogate feature (children swapped when the surrogate
  runs the other way);
* a ``pr`` coin flip at depth ``d`` splits on a column that holds minus the
  row's draw at (tree, depth ``d``) (:mod:`.draws`: a pure function of the
  seed, the tree, the depth and the row's values, an exact float32), with
  threshold ``-N_right / N_node``: right exactly when the draw is below
  ``N_right / N_node``, as in the dynamic traversals (a path visits every
  depth at most once, so the flips along a path are independent).

Such trees are built as scikit-learn ``Tree`` objects straight from numpy
arrays (no pickle involved) and traversed by its compiled ``apply``, which is
as fast as scikit-learn's own ``predict_proba``. When scikit-learn's tree
internals are not what this module expects, :func:`available` is false and
callers use the numpy engine in :mod:`fedforest.prediction.routing` instead.
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

try:  # scikit-learn's compiled tree; its node layout is checked below
    from sklearn.tree._tree import NODE_DTYPE, Tree

    _FIELDS = {
        "left_child",
        "right_child",
        "feature",
        "threshold",
        "impurity",
        "n_node_samples",
        "weighted_n_node_samples",
        "missing_go_to_left",
    }
    _OK = set(NODE_DTYPE.names) == _FIELDS
except ImportError:  # pragma: no cover - depends on the installed scikit-learn
    _OK = False

#: Rows traversed at once (bounds the augmented matrix).
ROW_CHUNK = 1 << 16


def available() -> bool:
    """Whether scikit-learn's compiled tree engine can be used."""
    return _OK


class TreeSet:
    """scikit-learn trees built from flat node arrays (one per forest tree).

    Parameters
    ----------
    tree_start : ndarray
        Node offsets of each tree (as in :class:`~fedforest.PooledForest`).
    trees : ndarray of int
        Which trees to build.
    left, right, feature : ndarray of int
        Local children (``-1`` at leaves) and split column (``-1`` at leaves);
        the column may index the augmented matrix.
    threshold, n_node_samples, missing_left : ndarray
        As in :class:`~fedforest.PooledForest`. The trees only route rows
        (:meth:`apply`): they hold no leaf values (one zero per node), however
        wide the forest's value table.
    n_columns : int
        Width of the augmented matrix.
    random_depths : list of ndarray of int, one per forest tree
        The depths at which each tree splits on a column of draws.
    """

    def __init__(
        self,
        tree_start,
        trees,
        left,
        right,
        feature,
        threshold,
        n_node_samples,
        missing_left,
        n_columns,
        random_depths,
    ):
        self.trees = np.asarray(trees)
        self.offsets = tree_start[self.trees]
        self.n_columns = int(n_columns)
        self.random_depths = [np.asarray(random_depths[t], dtype=np.int64) for t in self.trees]
        n_classes = np.array([1], dtype=np.intp)
        leaf = feature < 0
        nodes = np.zeros(left.shape[0], dtype=NODE_DTYPE)
        nodes["left_child"] = np.where(leaf, -1, left)
        nodes["right_child"] = np.where(leaf, -1, right)
        nodes["feature"] = np.where(leaf, -2, feature)
        nodes["threshold"] = np.where(leaf, -2.0, threshold)
        nodes["n_node_samples"] = n_node_samples
        nodes["weighted_n_node_samples"] = n_node_samples
        nodes["missing_go_to_left"] = missing_left
        values = np.zeros((left.shape[0], 1, 1), dtype=np.float64)
        self._trees = []
        for t in self.trees:
            lo, hi = int(tree_start[t]), int(tree_start[t + 1])
            tree = Tree(self.n_columns, n_classes, 1)
            tree.__setstate__(
                {
                    "max_depth": int(hi - lo),
                    "node_count": hi - lo,
                    "nodes": nodes[lo:hi].copy(),
                    "values": values[lo:hi].copy(),
                }
            )
            self._trees.append(tree)

    def apply(self, X_aug: np.ndarray, n_features: int, draws) -> np.ndarray:
        """Global leaf index per (tree, row).

        ``X_aug`` has the real and imputed columns filled in; the columns of
        draws after ``2 * n_features`` are filled here, per tree, from
        ``draws`` (:class:`~.draws.Draws` over the same rows; only read when
        a tree splits on them).
        """
        n_rows = X_aug.shape[0]
        out = np.empty((len(self._trees), n_rows), dtype=np.int64)
        for lo in range(0, n_rows, ROW_CHUNK):
            hi = min(n_rows, lo + ROW_CHUNK)
            chunk = np.ascontiguousarray(X_aug[lo:hi])
            part = None
            for i, tree in enumerate(self._trees):
                depths = self.random_depths[i]
                if depths.size:
                    if part is None:
                        part = draws.subset(slice(lo, hi))
                    u = part.tree_uniforms(int(self.trees[i]), depths)
                    chunk[:, 2 * n_features + depths] = -u.astype(np.float32)
                out[i, lo:hi] = tree.apply(chunk)
        out += self.offsets[:, None]
        return out
