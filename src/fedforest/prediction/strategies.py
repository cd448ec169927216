"""The missing-split strategies: how a node on an unavailable feature is resolved.

Each strategy is expressed twice, with identical semantics:

* :meth:`Strategy.resolver` decides for (node, row) pairs met during the numpy
  traversal in :mod:`fedforest.prediction.routing` (any mix of missing values); the
  compiled kernels of :mod:`fedforest.prediction.numba_kernels` apply the same
  rules to the arrays of :meth:`Strategy.kernel_tables`;
* :meth:`Strategy.static_trees` rewrites the trees for the rows that miss only
  whole columns, so that scikit-learn's compiled engine can walk them
  (:mod:`fedforest.fastpath`).

The rules themselves are specified in ``docs/architecture.md`` ("Missing-split
semantics"). ``node`` (ForestFire's fallback) is the one rule that neither
picks a child nor discards: the walk stops at the unresolvable node, whose own
class distribution is the tree's prediction for the row (decision ``STOP``;
in :meth:`Strategy.static_trees` the node becomes an ordinary leaf).
"""

from __future__ import annotations

import numpy as np

from ..model.traversal import DISCARD, LEFT, RIGHT, STOP, CompiledForest
from ..vocabulary import STRATEGIES, TREE_SELECTION
from .draws import IPR_STREAM, PR_STREAM, Draws
from .routing import exp_factor, factored_right, sigmoid

__all__ = ["STATIC", "STRATEGIES", "TREE_SELECTION", "Strategy"]

#: Strategies whose decision at a node can be written into the tree (a split, a
#: coin flip on a column of the rows' draws, a "discard" leaf or, for ``node``,
#: an ordinary leaf): the compiled fast path.
STATIC = ("fpv", "pr", "mi", "ss", "node")


class Strategy:
    """Resolution rules of one strategy for one prediction call.

    ``fpv`` and ``node`` are deterministic and draw nothing (``node`` stops
    at the node: ``STOP``); ``pr`` draws the ``pr`` rule's uniform for every
    pair it resolves at a depth of at least ``depth_threshold``, and ``mi``, ``ipr`` and ``ss``
    for those their own rule cannot decide; ``ipr`` draws a second one, in
    its own stream, for a pair with an imputed value. Each draw is a pure
    function of the seed, the node and the row (:mod:`.draws`).

    Parameters
    ----------
    name : str
        One of :data:`STRATEGIES`.
    forest : PooledForest
    cf : CompiledForest
    X : ndarray of shape (n_rows, n_features), float32
        The global matrix being predicted (NaN = unavailable).
    imputed : ndarray of shape (n_rows, n_features), float32
        Imputed value (numeric) or most probable code (categorical) per row
        and feature; NaN where the feature has no imputer.
    level_cdf : dict of int to ndarray of shape (n_rows, n_levels)
        Cumulative imputer probabilities over category codes, per categorical
        feature that has an imputer.
    sigma : ndarray of shape (n_features,)
        Pooled standard deviation per feature (NaN where unknown).
    depth_threshold : int
    draws : Draws
        The call's draws, over the same rows as ``X``.
    """

    def __init__(
        self,
        name,
        forest,
        cf: CompiledForest,
        X,
        imputed,
        level_cdf,
        sigma,
        depth_threshold,
        draws: Draws,
    ):
        self.name = name
        self.forest = forest
        self.cf = cf
        self.X = X
        self.imputed = imputed
        self.level_cdf = level_cdf
        self.sigma = sigma
        self.depth_threshold = depth_threshold
        self.draws = draws

    def restricted(self, mask: np.ndarray, name: str | None = None) -> Strategy:
        """The same rules (or ``name``'s) for the rows in ``mask`` (row indices restart at 0)."""
        return Strategy(
            name or self.name,
            self.forest,
            self.cf,
            self.X[mask],
            self.imputed[mask],
            {k: v[mask] for k, v in self.level_cdf.items()},
            self.sigma,
            self.depth_threshold,
            self.draws.subset(mask),
        )

    # ------------------------------------------------------------ dynamic
    def pr_rule(self, nodes, rows) -> np.ndarray:
        """Discard above ``depth_threshold``; below it, go right w.p. N_right/N_node.

        Right when the pair's draw (:data:`~.draws.PR_STREAM`) is below
        ``N_right / N_node``; nothing is drawn for a pair that discards.
        """
        decision = np.full(nodes.size, DISCARD)
        deep = np.flatnonzero(self.cf.depth[nodes] >= self.depth_threshold)
        if deep.size:
            n, r = nodes[deep], rows[deep]
            draw = self.draws.uniform(n, r, PR_STREAM)
            decision[deep] = np.where(draw < self.cf.right_fraction[n], RIGHT, LEFT)
        return decision

    def _probability_tables(self):
        """Per-node lookups for :meth:`right_probability`, built once per call."""
        if getattr(self, "_tables", None) is None:
            cf = self.cf
            n_feat = self.X.shape[1]
            has_imputer = ~np.all(np.isnan(self.imputed), axis=0)
            categorical = self.forest.is_categorical
            inv_sigma = _inverse_sigma(self.sigma)
            # 0: no imputer (N_right / N_node), 1: numeric imputer, 2: categorical imputer
            kind_f = np.where(has_imputer, np.where(categorical, 2, 1), 0)
            f = np.where(cf.feature >= 0, cf.feature, 0)
            node_kind = np.where(cf.feature >= 0, kind_f[f], 0)
            imputed = self.imputed.astype(np.float64).reshape(-1)
            # sigmoid((x_hat - t) / sigma) as a product of a row's and a node's exponential
            numeric = np.flatnonzero(kind_f == 1)
            factor_column = np.full(n_feat, -1, dtype=np.int64)
            factor_column[numeric] = np.arange(numeric.size)
            centre, node_factor = _node_factors(self.forest, cf, inv_sigma)
            with np.errstate(invalid="ignore", over="ignore"):
                a = -(self.imputed[:, numeric] - centre[numeric]) * inv_sigma[numeric]
            row_factor = exp_factor(np.where(_usable(inv_sigma[numeric]), a, np.nan))
            self._tables = (
                node_kind,
                imputed,
                inv_sigma,
                n_feat,
                np.ascontiguousarray(row_factor),
                factor_column,
                node_factor,
            )
        return self._tables

    def _sigmoid(self, nodes, rows, f) -> np.ndarray:
        """sigmoid((x_hat - t) / sigma); NaN where there is no imputed value for the row.

        Taken as :func:`~.routing.factored_right` where both factors exist (the
        row's and the node's exponent within ``FACTOR_LIMIT``), directly
        elsewhere; the compiled kernels make the same choice.
        """
        _, imputed, inv_sigma, n_feat, row_factor, factor_column, node_factor = (
            self._probability_tables()
        )
        q = factored_right(row_factor[rows, factor_column[f]], node_factor[nodes])
        slow = np.flatnonzero(np.isnan(q))
        if slow.size:
            nodes, rows, f = nodes[slow], rows[slow], f[slow]
            inv = inv_sigma[f]
            with np.errstate(over="ignore", invalid="ignore"):
                d = imputed[rows * n_feat + f] - self.cf.threshold[nodes]
                # sigma 0 (or unknown): the term is 0; x_hat == t with 1/sigma = inf: the limit is 0
                z = np.where((inv == 0) | (d == 0), 0.0, d * inv)
            q[slow] = sigmoid(z)
        return q

    def kernel_tables(self) -> dict:
        """The per-call lookups of :meth:`right_probability`, for the compiled kernels.

        Returns
        -------
        dict
            ``node_kind`` (int64 per node: 0 no imputer, 1 numeric, 2
            categorical), ``inv_sigma`` (float64 per feature), ``imputed``
            (float32, n_rows x n_features), ``cdf`` (float64, n_rows x the
            levels of every categorical feature with an imputer, one after the
            other), ``cdf_start`` and ``n_levels`` (int64 per feature: where a
            feature's levels start in ``cdf`` and how many it has), and the
            factors of :func:`~.routing.factored_right`: ``row_factor``
            (float64, n_rows x the numeric features with an imputer),
            ``node_column`` (int64 per node: the column there of a node with
            a numeric imputer, 0 for the others) and ``node_factor`` (float64
            per node; NaN where a factor does not exist).
        """
        node_kind, _, inv_sigma, n_feat, row_factor, factor_column, node_factor = (
            self._probability_tables()
        )
        n_rows = self.X.shape[0]
        cdf_start = np.zeros(n_feat, dtype=np.int64)
        n_levels = np.zeros(n_feat, dtype=np.int64)
        parts = []
        width = 0
        for feat in sorted(self.level_cdf):
            cdf = self.level_cdf[feat]
            cdf_start[feat], n_levels[feat] = width, cdf.shape[1]
            parts.append(np.asarray(cdf, dtype=np.float64))
            width += cdf.shape[1]
        return {
            "node_kind": np.ascontiguousarray(node_kind, dtype=np.int64),
            "inv_sigma": np.ascontiguousarray(inv_sigma, dtype=np.float64),
            "imputed": np.ascontiguousarray(self.imputed, dtype=np.float32),
            "cdf": np.ascontiguousarray(
                np.concatenate(parts, axis=1) if parts else np.zeros((n_rows, 0)),
                dtype=np.float64,
            ),
            "cdf_start": cdf_start,
            "n_levels": n_levels,
            "row_factor": row_factor,
            "node_column": np.where(
                node_kind == 1, factor_column[np.where(self.cf.feature >= 0, self.cf.feature, 0)], 0
            ),
            "node_factor": node_factor,
        }

    def right_probability(self, nodes, rows) -> np.ndarray:
        """IPR probability of going right; ``N_right / N_node`` without imputer.

        Always in [0, 1]: a row without an imputed value (or with an undefined
        one) gets ``N_right / N_node`` too.
        """
        node_kind = self._probability_tables()[0]
        kind = node_kind[nodes]
        f = self.cf.feature[nodes]
        numeric = kind == 1
        p = self.cf.right_fraction[nodes]  # a copy (fancy indexing)
        if numeric.any():
            i = np.flatnonzero(numeric)
            q = self._sigmoid(nodes[i], rows[i], f[i])
            p[i] = np.where(np.isnan(q), p[i], q)
        cat = kind == 2
        if cat.any():
            thr = self.cf.threshold[nodes]
            for feat in np.unique(f[cat]):
                sel = np.flatnonzero(cat & (f == feat))
                cdf = self.level_cdf[int(feat)]
                # codes <= t go left; t outside [-1, K] is clipped before the cast to int
                code = np.floor(np.clip(thr[sel], -1, cdf.shape[1])).astype(np.int64)
                p_left = np.where(code < 0, 0.0, cdf[rows[sel], np.clip(code, 0, cdf.shape[1] - 1)])
                p[sel] = 1.0 - p_left
        return np.clip(np.where(np.isnan(p), self.cf.right_fraction[nodes], p), 0.0, 1.0)

    def resolver(self, nodes, rows) -> np.ndarray:
        """Decision (LEFT, RIGHT, DISCARD, STOP) for pairs at unresolvable nodes.

        A pure function of each (node, row) pair: the order and the company in
        which pairs are asked change nothing.
        """
        if self.name == "fpv":
            return np.full(nodes.size, DISCARD)
        if self.name == "node":  # stop here: the node's own distribution; no draws
            return np.full(nodes.size, STOP)
        if self.name == "pr":
            return self.pr_rule(nodes, rows)
        decision = np.empty(nodes.size, dtype=np.int64)
        if self.name == "mi":
            value = self.imputed[rows, self.cf.feature[nodes]]
            has = ~np.isnan(value)
            decision[has] = np.where(value[has] > self.cf.threshold[nodes[has]], RIGHT, LEFT)
        elif self.name == "ipr":
            has = ~np.isnan(self.imputed[rows, self.cf.feature[nodes]])
            if has.any():
                n, r = nodes[has], rows[has]
                p = self.right_probability(n, r)
                decision[has] = np.where(self.draws.uniform(n, r, IPR_STREAM) < p, RIGHT, LEFT)
        elif self.name == "ss":
            sf = self.forest.surrogate_feature[nodes]
            has = sf >= 0
            xs = np.full(nodes.size, np.nan, dtype=np.float32)
            xs[has] = self.X[rows[has], sf[has]]
            has = ~np.isnan(xs)
            le = xs[has] <= self.forest.surrogate_threshold[nodes[has]]
            decision[has] = np.where(le == self.forest.surrogate_left_le[nodes[has]], LEFT, RIGHT)
        else:  # pragma: no cover - guarded by the classifier
            raise ValueError(f"strategy {self.name!r} has no per-node resolver")
        rest = np.flatnonzero(~has)  # the pr rule
        if rest.size:
            decision[rest] = self.pr_rule(nodes[rest], rows[rest])
        return decision

    # ------------------------------------------------------------- static
    def static_trees(self, absent: np.ndarray):
        """Node arrays rewritten for rows that miss exactly the ``absent`` columns.

        Returns
        -------
        arrays : dict
            ``left``, ``right``, ``feature``, ``threshold``, ``missing_left``
            (local children), ready for :class:`fedforest.fastpath.TreeSet`.
        discard : ndarray of bool, shape (n_nodes,)
            Leaves that stand for "discard this tree for this row". For
            ``node`` none: its unresolvable nodes become ordinary leaves, so
            the tree's prediction is the node's own ``value`` row.
        random_depths : list of ndarray of int64, one per tree
            The depths at which the tree splits on a uniform column (empty
            for a tree that draws nothing).
        n_columns : int
            Width of the augmented matrix: features, imputed columns, one
            uniform column per depth.

        Notes
        -----
        A ``pr`` coin flip at depth ``d`` splits on column ``2 * n_features +
        d``, which holds minus the row's draw there (:mod:`.draws`; an exact
        float32), with threshold ``-N_right / N_node``: the row goes right
        exactly when its draw is below ``N_right / N_node``, as in the
        dynamic traversals.
        """
        f = self.forest
        n_feat = f.n_features
        left = f.children_left.copy()
        right = f.children_right.copy()
        feature = f.feature.astype(np.int64)
        threshold = f.threshold.copy()
        discard = np.zeros(f.n_nodes, dtype=bool)
        internal = feature >= 0
        stuck = internal & absent[np.where(internal, feature, 0)] & ~f.saw_missing
        depth = self.cf.depth
        max_depth = int(depth.max()) + 1 if f.n_nodes else 1
        random_node = np.zeros(f.n_nodes, dtype=bool)
        if self.name in ("mi", "ss"):
            resolved = np.zeros(f.n_nodes, dtype=bool)
            if self.name == "mi":
                has_imp = np.zeros(n_feat, dtype=bool)
                has_imp[:] = ~np.all(np.isnan(self.imputed), axis=0)
                use = stuck & has_imp[np.where(internal, feature, 0)]
                feature[use] = n_feat + feature[use]
                resolved = use
            else:
                sf = f.surrogate_feature
                use = stuck & (sf >= 0) & ~absent[np.where(sf >= 0, sf, 0)]
                feature[use] = sf[use]
                threshold[use] = f.surrogate_threshold[use]
                swap = use & ~f.surrogate_left_le
                left[swap], right[swap] = f.children_right[swap], f.children_left[swap]
                resolved = use
            stuck = stuck & ~resolved
        if self.name in ("pr", "mi", "ss"):
            shallow = stuck & (depth < self.depth_threshold)
            deep = stuck & ~shallow
            feature[deep] = 2 * n_feat + depth[deep]
            threshold[deep] = -self.cf.right_fraction[deep]
            random_node = deep
            stuck = shallow
        feature[stuck] = -1
        left[stuck] = -1
        right[stuck] = -1
        # fpv, pr, mi, ss: a leaf that discards the tree; node: a leaf like any other
        if self.name != "node":
            discard = stuck
        random_depths = _depths_per_tree(f.tree_of_node, depth, random_node, f.n_trees)
        arrays = {
            "left": left,
            "right": right,
            "feature": feature,
            "threshold": threshold,
            "missing_left": f.missing_left,
        }
        n_columns = 2 * n_feat + (max_depth if random_node.any() else 0)
        return arrays, discard, random_depths, n_columns

    def guesses(self, absent: np.ndarray) -> bool:
        """Whether rows missing exactly the ``absent`` columns can meet a ``pr`` draw."""
        if self.name not in ("pr", "mi", "ss") or not absent.any():
            return False
        imputed = ~np.all(np.isnan(self.imputed), axis=0) if self.name == "mi" else ()
        key = (
            self.name,
            absent.tobytes(),
            int(self.depth_threshold),
            tuple(np.flatnonzero(imputed)),
        )
        cache = self.forest._cache.setdefault("guesses", {})
        if key not in cache:
            if len(cache) >= 64:
                cache.clear()
            cache[key] = any(d.size for d in self.static_trees(absent)[2])
        return cache[key]


def _depths_per_tree(tree_of_node, depth, marked, n_trees: int) -> list:
    """Per tree, the sorted distinct depths of its ``marked`` nodes (int64 arrays)."""
    at = np.flatnonzero(marked)
    span = int(depth.max()) + 1 if depth.size else 1
    pairs = np.unique(tree_of_node[at].astype(np.int64) * span + depth[at])
    trees, depths = pairs // span, pairs % span
    bounds = np.searchsorted(trees, np.arange(n_trees + 1))
    return [depths[bounds[t] : bounds[t + 1]] for t in range(n_trees)]


def _inverse_sigma(sigma: np.ndarray) -> np.ndarray:
    """1 / sigma per feature; 0 where sigma is 0, unknown or not finite (inf for a tiny sigma)."""
    ok = np.isfinite(sigma) & (sigma > 0)
    with np.errstate(over="ignore", divide="ignore"):  # a tiny sigma gives 1/sigma = inf
        return np.where(ok, 1 / np.where(ok, sigma, 1.0), 0.0)


def _usable(inv_sigma: np.ndarray) -> np.ndarray:
    """Features whose probability can be factored: a finite, nonzero 1 / sigma."""
    return np.isfinite(inv_sigma) & (inv_sigma > 0)


def _node_factors(forest, cf: CompiledForest, inv_sigma: np.ndarray):
    """Per feature its centre c, per node ``exp((t - c) / sigma)``; cached on the forest.

    The centre is the median threshold of the forest's nodes on the feature (0
    for none): the two exponents of a probability then stay small whatever the
    feature's scale. Both depend on the forest and the standard deviations
    only, never on the rows predicted, so a row's probabilities are the same
    in any batch. A node's factor is NaN where it does not exist (a leaf, a
    categorical feature, a sigma of 0, an exponent beyond ``FACTOR_LIMIT``).
    """
    cache = forest._cache.setdefault("node_factors", {})
    key = inv_sigma.tobytes()
    if key not in cache:
        if len(cache) >= 16:
            cache.clear()
        n_feat = inv_sigma.shape[0]
        internal = cf.feature >= 0
        centre = np.zeros(n_feat)
        on = cf.feature[internal]
        thresholds = cf.threshold[internal]
        by_feature = np.argsort(on, kind="stable")
        bounds = np.searchsorted(on[by_feature], np.arange(n_feat + 1))
        for j in range(n_feat):
            if bounds[j + 1] > bounds[j]:
                centre[j] = np.median(thresholds[by_feature[bounds[j] : bounds[j + 1]]])
        f = np.where(internal, cf.feature, 0)
        numeric = internal & ~forest.is_categorical[f] & _usable(inv_sigma)[f]
        with np.errstate(invalid="ignore", over="ignore"):
            b = np.where(numeric, (cf.threshold - centre[f]) * inv_sigma[f], np.nan)
        cache[key] = (centre, np.ascontiguousarray(exp_factor(b)))
    return cache[key]
