"""Portable pooled forests: trees in a global feature space, addressed by name.

A :class:`PooledForest` holds any number of binary classification, regression or
survival trees as flat numpy arrays (one entry per node, trees stored one after the
other), together with the global feature names, the class labels (for
classification), the site that trained each tree and, optionally, one
surrogate split per node. It is what sites exchange: it
converts to and from a payload made only of numpy arrays and plain values, and
every payload is validated before use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import protocol
from ..validation import PayloadReader
from ..vocabulary import TASKS
from . import forest_edit, forest_format, forest_v1
from .forest_sources import check_times, sklearn_fields, sksurv_fields
from .payload_checks import (
    MAX_CLASSES,
    MAX_FEATURES,
    MAX_LEVELS,
    MAX_TIMES,
    MAX_TREES,
    plain_labels,
)

FORMAT = protocol.POOLED_FOREST
VERSION = protocol.FORMATS[FORMAT]

# The reader of version 1 lives apart (model/forest_v1.py); protocol.py imports nothing
# from the package, so the model layer registers it.
protocol.UPGRADES[(FORMAT, 1)] = forest_v1.upgrade


def _upgrade_v3(payload: Mapping) -> dict:
    """``fedforest/pooled-forest`` version 3 -> 4: no time grid (only classification and
    regression trees existed)."""
    return {**payload, "times": np.zeros(0)}


protocol.UPGRADES[(FORMAT, 3)] = _upgrade_v3

#: Per-node arrays of a forest besides ``value`` (one entry per node).
NODE_FIELDS = (
    "children_left",
    "children_right",
    "feature",
    "threshold",
    "n_node_samples",
    "missing_left",
    "saw_missing",
    "surrogate_feature",
    "surrogate_threshold",
    "surrogate_left_le",
    "surrogate_agreement",
)


class PooledForest:
    """Trees from one or several sites, in a global feature space.

    Node arrays have one entry per node; trees are stored one after the other
    and ``tree_start[i]:tree_start[i + 1]`` are the nodes of tree ``i``. Child
    indices are local to their tree and always larger than the parent's index
    (scikit-learn's depth-first order), which makes every tree acyclic by
    construction. Leaves have ``feature == -1`` and both children ``-1``.

    Build one with :meth:`from_sklearn`, combine with :meth:`concat`, exchange
    with :meth:`to_payload` / :meth:`from_payload`, and predict with
    :class:`fedforest.PooledForestClassifier`.

    Parameters
    ----------
    feature_names : sequence of str
        Global feature names; node ``feature`` values index into this list.
    classes : array-like
        Class labels (str or int); columns of ``value`` follow this order.
        Empty for regression trees.
    owners : sequence of str
        Site names; ``tree_owner`` indexes into this list.
    tree_start : ndarray of shape (n_trees + 1,)
        Offsets of each tree's first node.
    tree_owner : ndarray of shape (n_trees,)
        Index into ``owners`` of the site that trained each tree.
    children_left, children_right : ndarray of shape (n_nodes,)
        Local child indices, ``-1`` at leaves.
    feature : ndarray of shape (n_nodes,)
        Split feature (global index), ``-1`` at leaves.
    threshold : ndarray of shape (n_nodes,)
        Split threshold: a row goes left when ``x <= threshold``.
    n_node_samples : ndarray of shape (n_nodes,)
        Training rows that reached each node.
    missing_left : ndarray of shape (n_nodes,)
        Learned direction of a missing value (used where ``saw_missing``).
    saw_missing : ndarray of shape (n_nodes,)
        Whether the node saw a missing value for its feature in training.
    value : ndarray of shape (n_nodes, n_classes), (n_nodes, 1) or (n_nodes, 2 * n_times)
        Class distribution at each node (rows sum to one); for regression
        trees, the mean target of the node's training rows; for survival trees,
        the node's cumulative hazard at each of ``times`` (Nelson-Aalen, the
        first ``n_times`` columns) and its survival probability there
        (Kaplan-Meier, the last ``n_times``), as scikit-survival's
        ``SurvivalTree`` stores them.
    categories : mapping of str to list of str, optional
        Levels of the categorical features; level ``k`` is coded as ``k``.
    surrogate_feature, surrogate_threshold, surrogate_left_le, surrogate_agreement :
        ndarray of shape (n_nodes,), optional
        One surrogate split per node (``surrogate_feature == -1``: none). A row
        goes left when ``(x_s <= t_s) == surrogate_left_le``.
    task : {"classification", "regression", "survival"}, default "classification"
        What the trees predict: class distributions (``RandomForestClassifier``),
        means (``RandomForestRegressor``) or curves over time (scikit-survival's
        ``RandomSurvivalForest``).
    times : array-like of shape (n_times,), optional
        The time grid of survival trees (strictly increasing, finite, at least
        0): the times at which every node's curves are given. Empty for the
        other tasks.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from fedforest import PooledForest
    >>> X = np.random.RandomState(0).normal(size=(60, 3)); y = (X[:, 0] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    >>> forest = PooledForest.from_sklearn(rf, ["a", "b", "c"], owner="site-1")
    >>> forest.n_trees, forest.feature_names
    (5, ['a', 'b', 'c'])
    >>> PooledForest.from_payload(forest.to_payload()).n_nodes == forest.n_nodes
    True
    """

    def __init__(
        self,
        *,
        feature_names: Sequence[str],
        classes,
        owners: Sequence[str],
        tree_start,
        tree_owner,
        children_left,
        children_right,
        feature,
        threshold,
        n_node_samples,
        missing_left,
        saw_missing,
        value,
        categories: Mapping[str, Sequence[str]] | None = None,
        surrogate_feature=None,
        surrogate_threshold=None,
        surrogate_left_le=None,
        surrogate_agreement=None,
        task: str = "classification",
        times=None,
    ):
        if task not in TASKS:
            raise ValueError(f"task={task!r} is not one of {list(TASKS)}")
        self.task = task
        self.times = np.zeros(0) if times is None else np.asarray(times, dtype=np.float64)
        self.feature_names = list(feature_names)
        self.classes = np.asarray(classes)
        self.owners = list(owners)
        self.categories = {k: list(v) for k, v in (categories or {}).items()}
        self.tree_start = np.asarray(tree_start, dtype=np.int64)
        self.tree_owner = np.asarray(tree_owner, dtype=np.int32)
        self.children_left = np.asarray(children_left, dtype=np.int32)
        self.children_right = np.asarray(children_right, dtype=np.int32)
        self.feature = np.asarray(feature, dtype=np.int32)
        self.threshold = np.asarray(threshold, dtype=np.float64)
        self.n_node_samples = np.asarray(n_node_samples, dtype=np.int64)
        self.missing_left = np.asarray(missing_left, dtype=bool)
        self.saw_missing = np.asarray(saw_missing, dtype=bool)
        self.value = np.asarray(value, dtype=np.float64)
        n = self.feature.shape[0]
        self.surrogate_feature = (
            np.full(n, -1, np.int32)
            if surrogate_feature is None
            else np.asarray(surrogate_feature, dtype=np.int32)
        )
        self.surrogate_threshold = (
            np.zeros(n) if surrogate_threshold is None else np.asarray(surrogate_threshold, float)
        )
        self.surrogate_left_le = (
            np.ones(n, bool) if surrogate_left_le is None else np.asarray(surrogate_left_le, bool)
        )
        self.surrogate_agreement = (
            np.zeros(n) if surrogate_agreement is None else np.asarray(surrogate_agreement, float)
        )
        self._cache: dict[str, Any] = {}
        lengths = {name: getattr(self, name).shape[0] for name in NODE_FIELDS}
        lengths["value"] = self.value.shape[0]
        if len(set(lengths.values())) != 1:
            raise ValueError(f"node arrays differ in length: {lengths}")
        check_times(self.times, task)
        width = {"regression": 1, "survival": 2 * len(self.times)}.get(task, len(self.classes))
        if task != "classification" and len(self.classes):
            raise ValueError(f"{task} trees have no classes (classes must be empty)")
        if self.value.ndim != 2 or self.value.shape[1] != width:
            raise ValueError(f"value has shape {self.value.shape}, expected (n_nodes, {width})")

    # ------------------------------------------------------------------ sizes
    @property
    def n_trees(self) -> int:
        """Number of trees."""
        return int(self.tree_start.shape[0] - 1)

    @property
    def n_nodes(self) -> int:
        """Total number of nodes over all trees."""
        return int(self.feature.shape[0])

    @property
    def n_features(self) -> int:
        """Number of global features."""
        return len(self.feature_names)

    @property
    def n_classes(self) -> int:
        """Number of classes (0 for regression trees)."""
        return len(self.classes)

    @property
    def is_regression(self) -> bool:
        """Whether the trees predict a number (``task == "regression"``)."""
        return self.task == "regression"

    @property
    def is_survival(self) -> bool:
        """Whether the trees predict curves over :attr:`times` (``task == "survival"``)."""
        return self.task == "survival"

    @property
    def is_distribution(self) -> bool:
        """Whether each row of ``value`` is a class distribution (classification trees)."""
        return self.task == "classification"

    @property
    def n_times(self) -> int:
        """Points of the time grid (0 unless survival trees)."""
        return int(self.times.shape[0])

    @property
    def n_outputs(self) -> int:
        """Columns of ``value``: the classes, 1 (the mean), or two curves over :attr:`times`."""
        return int(self.value.shape[1])

    def _same_kind(self) -> dict:
        """What a forest derived from this one keeps: names, classes, owners, levels, task."""
        return {
            "feature_names": self.feature_names,
            "classes": self.classes,
            "owners": self.owners,
            "categories": self.categories,
            "task": self.task,
            "times": self.times,
        }

    @property
    def is_categorical(self) -> np.ndarray:
        """Boolean mask over ``feature_names``: which features are categorical."""
        if "is_categorical" not in self._cache:
            self._cache["is_categorical"] = np.array(
                [f in self.categories for f in self.feature_names], dtype=bool
            )
        return self._cache["is_categorical"]

    # ------------------------------------------------------- derived arrays
    @property
    def tree_of_node(self) -> np.ndarray:
        """Tree index of every node."""
        if "tree_of_node" not in self._cache:
            sizes = np.diff(self.tree_start)
            self._cache["tree_of_node"] = np.repeat(np.arange(self.n_trees, dtype=np.int32), sizes)
        return self._cache["tree_of_node"]

    @property
    def global_children(self) -> tuple[np.ndarray, np.ndarray]:
        """Left and right children as global node indices (``-1`` at leaves)."""
        if "global_children" not in self._cache:
            base = self.tree_start[:-1][self.tree_of_node]
            leaf = self.feature < 0
            left = np.where(leaf, -1, self.children_left + base)
            right = np.where(leaf, -1, self.children_right + base)
            self._cache["global_children"] = (left.astype(np.int64), right.astype(np.int64))
        return self._cache["global_children"]

    @property
    def node_depth(self) -> np.ndarray:
        """Depth of every node (roots have depth 0)."""
        if "node_depth" not in self._cache:
            left, right = self.global_children
            depth = np.zeros(self.n_nodes, dtype=np.int32)
            frontier = self.tree_start[:-1]
            d = 0
            while frontier.size:
                depth[frontier] = d
                internal = frontier[self.feature[frontier] >= 0]
                frontier = np.concatenate([left[internal], right[internal]])
                d += 1
            self._cache["node_depth"] = depth
        return self._cache["node_depth"]

    def trees_within(self, available: Sequence[str]) -> np.ndarray:
        """Boolean mask of the trees whose every split feature is in ``available``."""
        have = np.zeros(self.n_features + 1, dtype=bool)
        names = set(available)
        have[: self.n_features] = [f in names for f in self.feature_names]
        uses_missing = np.zeros(self.n_trees, dtype=bool)
        internal = self.feature >= 0
        bad = internal & ~have[self.feature]
        uses_missing[np.unique(self.tree_of_node[bad])] = True
        return ~uses_missing

    def owner_mask(self, owner: str) -> np.ndarray:
        """Boolean mask of the trees trained by site ``owner``."""
        if owner not in self.owners:
            return np.zeros(self.n_trees, dtype=bool)
        return self.tree_owner == self.owners.index(owner)

    # ------------------------------------------------------------ building
    @classmethod
    def from_sklearn(
        cls,
        rf,
        feature_names: Sequence[str],
        owner: str,
        *,
        X=None,
        categories: Mapping[str, Sequence[str]] | None = None,
    ) -> PooledForest:
        """Convert a fitted scikit-learn ``RandomForestClassifier`` or ``RandomForestRegressor``.

        Parameters
        ----------
        rf : RandomForestClassifier, RandomForestRegressor, or their ExtraTrees
            A fitted single-output forest. A regressor gives regression trees
            (``task="regression"``, ``value`` the node means).
        feature_names : sequence of str
            Global name of each column ``rf`` was trained on, in order.
        owner : str
            Name of the site that trained the forest.
        X : array-like of shape (n_samples, n_features), optional
            The training rows, needed only when they contained missing values:
            they tell which nodes really saw a missing value in training (those
            keep scikit-learn's learned direction). Without ``X`` only the
            nodes that split missing from non-missing values are known to have.
        categories : mapping of str to list of str, optional
            Levels of categorical features, coded ``0 .. K-1`` in the data.

        Returns
        -------
        PooledForest
        """
        return cls(owners=[str(owner)], **sklearn_fields(rf, feature_names, X, categories))

    @classmethod
    def from_sksurv(
        cls,
        rsf,
        feature_names: Sequence[str],
        owner: str,
        *,
        times,
        X=None,
        categories: Mapping[str, Sequence[str]] | None = None,
    ) -> PooledForest:
        """Convert a fitted scikit-survival ``RandomSurvivalForest`` on a time grid.

        A survival tree holds, at every node, the cumulative hazard
        (Nelson-Aalen) and the survival probability (Kaplan-Meier) of the
        node's training rows at each of the forest's ``unique_times_``: step
        functions, constant between those times. Each is read here at every
        point of ``times`` (its value at the last of ``unique_times_`` at or
        before the point; before the first, a hazard of 0 and a survival of 1),
        so trees of sites with different event times share one grid and pool.
        On the forest's own event times the curves are exactly
        scikit-survival's.

        Parameters
        ----------
        rsf : sksurv.ensemble.RandomSurvivalForest or ExtraSurvivalTrees
            A fitted forest with ``low_memory=False`` (the default: its trees
            keep their curves).
        feature_names : sequence of str
            Global name of each column ``rsf`` was trained on, in order.
        owner : str
            Name of the site that trained the forest.
        times : array-like of shape (n_times,)
            The grid: strictly increasing, finite, at least 0.
        X : array-like, optional
            The training rows, needed only when they contained missing values
            (as for :meth:`from_sklearn`).
        categories : mapping of str to list of str, optional
            Levels of categorical features, coded ``0 .. K-1`` in the data.

        Returns
        -------
        PooledForest
            ``task="survival"``, ``value`` of shape ``(n_nodes, 2 * n_times)``.

        Examples
        --------
        >>> import numpy as np
        >>> from sksurv.ensemble import RandomSurvivalForest
        >>> from sksurv.util import Surv
        >>> from fedforest import PooledForest
        >>> rng = np.random.RandomState(0)
        >>> X = rng.normal(size=(80, 2)); time = rng.exponential(np.exp(-X[:, 0]))
        >>> y = Surv.from_arrays(event=rng.rand(80) < 0.7, time=time)
        >>> rsf = RandomSurvivalForest(n_estimators=5, random_state=0).fit(X, y)
        >>> forest = PooledForest.from_sksurv(rsf, ["a", "b"], "site-1", times=[0.5, 1.0, 2.0])
        >>> forest.task, forest.n_times, forest.n_outputs
        ('survival', 3, 6)
        """
        return cls(owners=[str(owner)], **sksurv_fields(rsf, feature_names, times, X, categories))

    @classmethod
    def concat(cls, forests: Sequence[PooledForest]) -> PooledForest:
        """Pool several forests into one.

        Feature names are matched by name (global order: first appearance),
        class lists are aligned (union, sorted as scikit-learn sorts labels; a
        class a forest never saw gets probability 0 in its trees), and owners
        are merged by name.

        Raises
        ------
        ValueError
            If the forests disagree on whether a feature is categorical or on
            its levels, or mix string and integer class labels.
        """
        forests = list(forests)
        if not forests:
            raise ValueError("concat needs at least one forest")
        tasks = sorted({f.task for f in forests})
        if len(tasks) > 1:
            raise ValueError(
                f"forests mix tasks {tasks}: trees of different tasks cannot be pooled"
            )
        times = forests[0].times
        for f in forests[1:]:
            if not np.array_equal(f.times, times):
                raise ValueError(
                    f"survival forests on different time grids ({len(times)} and "
                    f"{len(f.times)} points) cannot be pooled: convert every site's forest on "
                    "the grid the sites agreed (PooledForest.from_sksurv(..., times=grid))"
                )
        names: list[str] = []
        for f in forests:
            names.extend(n for n in f.feature_names if n not in names)
        declared: dict[str, tuple | None] = {}
        for f in forests:
            for name in f.feature_names:
                levels = f.categories.get(name)
                key = None if levels is None else tuple(levels)
                if name in declared and declared[name] != key:
                    raise ValueError(
                        f"forests disagree about feature {name!r}: "
                        f"{_kind(declared[name])} vs {_kind(key)}"
                    )
                declared[name] = key
        categories = {n: list(v) for n, v in declared.items() if v is not None}
        kinds = {type(v) for f in forests for v in plain_labels(f.classes)}
        if len(kinds) > 1:
            raise ValueError(
                "forests mix class label types "
                f"{sorted(k.__name__ for k in kinds)}; use one label type at every site"
            )
        if all(np.array_equal(f.classes, forests[0].classes) for f in forests):
            classes = forests[0].classes
        else:
            classes = np.unique(np.concatenate([f.classes for f in forests]))
        owners: list[str] = []
        for f in forests:
            owners.extend(o for o in f.owners if o not in owners)

        fields: dict[str, list[np.ndarray]] = {k: [] for k in NODE_FIELDS}
        values, tree_owner, starts = [], [], [np.zeros(1, np.int64)]
        offset = 0
        for f in forests:
            fmap = np.array([names.index(n) for n in f.feature_names] + [-1], dtype=np.int32)
            for k in NODE_FIELDS:
                arr = getattr(f, k)
                if k in ("feature", "surrogate_feature"):
                    arr = fmap[arr]  # -1 maps to the trailing -1
                fields[k].append(arr)
            if not f.is_distribution:
                values.append(f.value)
            else:
                cmap = np.searchsorted(classes, f.classes)
                v = np.zeros((f.n_nodes, len(classes)))
                v[:, cmap] = f.value
                values.append(v)
            omap = np.array([owners.index(o) for o in f.owners], dtype=np.int32)
            tree_owner.append(omap[f.tree_owner])
            starts.append(f.tree_start[1:] + offset)
            offset += f.n_nodes
        return cls(
            feature_names=names,
            classes=classes,
            owners=owners,
            categories=categories,
            task=tasks[0],
            times=times,
            tree_start=np.concatenate(starts),
            tree_owner=np.concatenate(tree_owner),
            value=np.concatenate(values),
            **{k: np.concatenate(v) for k, v in fields.items()},
        )

    def select_trees(self, mask) -> PooledForest:
        """A new forest with only the trees where ``mask`` is true."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (self.n_trees,):
            raise ValueError(f"mask has shape {mask.shape}, expected ({self.n_trees},)")
        node_mask = mask[self.tree_of_node]
        sizes = np.diff(self.tree_start)[mask]
        return PooledForest(
            **self._same_kind(),
            tree_start=np.concatenate([[0], np.cumsum(sizes)]),
            tree_owner=self.tree_owner[mask],
            value=self.value[node_mask],
            **{k: getattr(self, k)[node_mask] for k in NODE_FIELDS},
        )

    def with_surrogates(self, feature, threshold, left_le, agreement) -> PooledForest:
        """A copy of this forest with the given per-node surrogate arrays."""
        out = self.select_trees(np.ones(self.n_trees, bool))
        out.surrogate_feature = np.asarray(feature, np.int32).copy()
        out.surrogate_threshold = np.asarray(threshold, float).copy()
        out.surrogate_left_le = np.asarray(left_le, bool).copy()
        out.surrogate_agreement = np.asarray(agreement, float).copy()
        return out

    # ------------------------------------------------------- tree surgery
    def with_arrays(self, **arrays) -> PooledForest:
        """A new forest with the same trees and some per-node arrays replaced.

        Keywords are names of :data:`NODE_FIELDS` or ``value``, each an array
        with one entry per node (validated as the constructor does).
        """
        unknown = sorted(set(arrays) - {*NODE_FIELDS, "value"})
        if unknown:
            raise ValueError(f"{unknown} are not per-node arrays of a forest")
        fields = {k: getattr(self, k) for k in NODE_FIELDS}
        fields["value"] = self.value
        fields.update(arrays)
        return PooledForest(
            **self._same_kind(),
            tree_start=self.tree_start,
            tree_owner=self.tree_owner,
            **fields,
        )

    def prune(self, action, keep_tree=None) -> PooledForest:
        """Rebuild the trees in depth-first order after pruning.

        Parameters
        ----------
        action : ndarray of shape (n_nodes,)
            Per node (:mod:`fedforest.model.forest_edit`): ``KEEP``; ``LEAF``
            (the node becomes a leaf with its own distribution and count);
            ``TO_LEFT`` / ``TO_RIGHT`` (the node is replaced by that child's
            subtree).
        keep_tree : ndarray of bool, shape (n_trees,), optional
            The trees to keep (default: all).

        Returns
        -------
        PooledForest
            This forest itself when nothing changes; else a new one with
            renumbered children, where a node made a leaf has lost its split,
            its missing-value flag and its surrogate.

        Raises
        ------
        ValueError
            When no tree is kept.
        """
        if keep_tree is None:
            keep_tree = np.ones(self.n_trees, bool)
        if np.all(action == forest_edit.KEEP) and keep_tree.all():
            return self
        if not keep_tree.any():
            raise ValueError("no tree is left")
        gleft, gright = self.global_children
        src, left, right, made, starts = forest_edit.pruned_preorder(
            self.tree_start, gleft, gright, self.feature, action, keep_tree
        )
        out = {k: getattr(self, k)[src].copy() for k in NODE_FIELDS}
        out["children_left"] = left
        out["children_right"] = right
        out["feature"][made] = -1
        out["threshold"][made] = 0.0
        out["saw_missing"][made] = False
        out["surrogate_feature"][made] = -1
        out["surrogate_threshold"][made] = 0.0
        out["surrogate_left_le"][made] = True
        out["surrogate_agreement"][made] = 0.0
        return PooledForest(
            **self._same_kind(),
            tree_start=starts,
            tree_owner=self.tree_owner[keep_tree],
            value=self.value[src],
            **out,
        )

    @classmethod
    def from_structure(
        cls,
        *,
        feature_names: Sequence[str],
        classes,
        owner: str,
        tree_start,
        children_left,
        children_right,
        feature,
        threshold,
        missing_left,
        categories: Mapping[str, Sequence[str]] | None = None,
        task: str = "classification",
    ) -> PooledForest:
        """One site's trees given by their structure alone, before any row is counted.

        Every node gets one row (``n_node_samples``), a uniform class
        distribution (regression: a mean of 0) and ``saw_missing`` false; set
        the counts with :meth:`with_arrays`. The arguments are those of the
        constructor.
        """
        if task == "survival":
            raise ValueError(
                "survival trees carry curves fitted on their rows: build them with from_sksurv"
            )
        n_nodes = len(feature)
        k = len(classes)
        value = np.zeros((n_nodes, 1)) if task == "regression" else np.full((n_nodes, k), 1.0 / k)
        return cls(
            task=task,
            feature_names=feature_names,
            classes=np.asarray(classes),
            owners=[str(owner)],
            categories=categories,
            tree_start=np.asarray(tree_start),
            tree_owner=np.zeros(len(tree_start) - 1, np.int32),
            children_left=children_left,
            children_right=children_right,
            feature=feature,
            threshold=threshold,
            n_node_samples=np.ones(n_nodes, np.int64),
            missing_left=missing_left,
            saw_missing=np.zeros(n_nodes, bool),
            value=value,
        )

    # ------------------------------------------------------------ payload
    def to_payload(self) -> dict:
        """The forest as a dict of numpy arrays and plain values (no pickle).

        The layout is version 3 of ``fedforest/pooled-forest``
        (:mod:`fedforest.model.forest_format`, architecture.md section 3;
        version 2 with the ``task``):
        about 8 bytes per node instead of version 1's 63, and lossless: every
        array comes back from :meth:`from_payload` bit for bit (thresholds of
        leaves and surrogate fields of nodes without a surrogate, which mean
        nothing, come back as their defaults; trees held in another
        depth-first order come back in preorder).

        Returns
        -------
        dict
            Versioned payload accepted by :meth:`from_payload`.
        """
        fields = {k: getattr(self, k) for k in NODE_FIELDS}
        return {
            "format": FORMAT,
            "version": VERSION,
            "task": self.task,
            "times": self.times.copy(),
            **forest_format.encode(
                {
                    "feature_names": self.feature_names,
                    "categories": self.categories,
                    "classes": self.classes,
                    "owners": self.owners,
                    "tree_start": self.tree_start,
                    "tree_owner": self.tree_owner,
                    "value": self.value,
                    **fields,
                },
                counts=self.is_distribution,  # means and curves are not ratios of counts
            ),
        }

    @classmethod
    def from_payload(
        cls, payload: Mapping, sender: str | None = None, *, where: str = ""
    ) -> PooledForest:
        """Rebuild a forest from :meth:`to_payload` output, validating everything.

        Parameters
        ----------
        payload : dict
            The received payload.
        sender : str, optional
            Who sent it; named in every error message.
        where : str, optional
            Where the payload sits in a larger one (``"forest"`` in a model
            bundle); named in every error message.

        Every version from 1 to :data:`VERSION` is read: a version 1 payload
        goes through its own reader (:mod:`fedforest.model.forest_v1`) first.

        Raises
        ------
        fedforest.PayloadError
            If any field is missing, ``None``, of the wrong type, dtype or
            shape, or the trees are not well formed (leaf flags that do not
            close every tree at its last node, feature indices out of range,
            non-finite thresholds, children with more training rows than their
            parent, leaf counts or class distributions that are not
            distributions), or the version is newer than this fedforest reads.
            Nothing else is raised.
        """
        r = PayloadReader(payload, FORMAT, sender, where)
        r.check_keys({*forest_format.PAYLOAD_FIELDS, "task", "times"})
        task = r.read_choice("task", TASKS)
        times = r.read_array("times", "f", max_len=MAX_TIMES, lo=0, hi=forest_format.MAX_MEAN)
        try:
            check_times(times, task)
        except ValueError as exc:
            r.fail(f"field 'times': {exc}")
        names = r.read_str_list("feature_names", MAX_FEATURES)
        owners = r.read_str_list("owners", MAX_TREES)
        for key, given in (("feature_names", names), ("owners", owners)):
            if not given:  # trees split on features and come from a site
                r.refuse(key, given, "a non-empty list of distinct strings")
        if task != "classification":
            given = r.get("classes")
            if not isinstance(given, (list, tuple)) or given:
                r.refuse("classes", given, f"an empty list ({task} trees have no classes)")
            classes = []
        else:
            classes = r.read_labels("classes", MAX_CLASSES)
        cats = {}
        for k, levels in r.read_mapping("categories", MAX_FEATURES).items():
            if k not in names:
                r.fail(
                    f"field 'categories' names unknown feature {k!r}; expected features of "
                    "'feature_names'"
                )
            key = f"categories[{k!r}]"
            cats[k] = r.str_list(key, levels, max_len=MAX_LEVELS, allow_empty=True)
            if not cats[k]:
                r.refuse(key, levels, "a non-empty list of distinct strings")
        levels = np.array([len(cats.get(n, ())) for n in names], dtype=np.int64)
        arrays = forest_format.decode(
            r,
            n_features=len(names),
            n_classes=len(classes),
            n_owners=len(owners),
            n_levels=levels,
            task=task,
            n_times=times.shape[0],
        )
        return cls(
            task=task,
            times=times,
            feature_names=names,
            classes=np.zeros(0) if task != "classification" else np.asarray(classes),
            owners=owners,
            categories=cats,
            **arrays,
        )

    def __repr__(self) -> str:
        return (
            f"PooledForest(n_trees={self.n_trees}, n_nodes={self.n_nodes}, "
            f"n_features={self.n_features}, "
            + (f"task={self.task!r}, " if not self.is_distribution else "")
            + (f"n_times={self.n_times}, " if self.is_survival else "")
            + f"classes={plain_labels(self.classes)}, "
            f"owners={self.owners})"
        )


def _kind(levels) -> str:
    return "numeric" if levels is None else f"categorical with levels {list(levels)}"
