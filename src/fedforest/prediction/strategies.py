"""A routing rule applied to one prediction call: how a node on an unavailable feature is resolved.

:class:`Strategy` applies a :class:`~fedforest.rules.routing.Routing` (what a
rule of :mod:`fedforest.rules` declares) to one call's rows, with one
implementation per step (:mod:`.steps`), in two forms of identical semantics:

* :meth:`Strategy.resolver` decides for (node, row) pairs met during the numpy
  traversal in :mod:`fedforest.prediction.routing` (any mix of missing values); the
  compiled kernels of :mod:`fedforest.prediction.numba_kernels` apply the same
  steps, by their codes, to the arrays of :meth:`Strategy.kernel_tables`;
* :meth:`Strategy.static_trees` rewrites the trees for the rows that miss only
  whole columns, so that scikit-learn's compiled engine can walk them
  (:mod:`fedforest.prediction.fastpath`).

The rules themselves are specified in ``docs/architecture.md`` ("Missing-split
semantics"). ``node`` (ForestFire's fallback, the ``stop`` step) is the one rule
that neither picks a child nor discards: the walk stops at the unresolvable
node, whose own class distribution is the tree's prediction for the row
(decision ``STOP``; in :meth:`Strategy.static_trees` the node becomes an
ordinary leaf).
"""

from __future__ import annotations

import numpy as np

from ..model.traversal import CompiledForest
from ..rules.routing import Routing
from .cache import ForestCache
from .draws import Draws
from .routing import exp_factor, factored_right, sigmoid
from .steps import ALWAYS, DECIDE, REWRITE, Rewrite, static_key

__all__ = ["Strategy"]


class Strategy:
    """A routing's decisions for one prediction call, and p_R for its rows.

    The ``discard`` and ``stop`` steps are deterministic and draw nothing;
    the ``pr`` rule draws a uniform for every pair it resolves at a depth of
    at least ``depth_threshold``; ``imputed_draw`` draws one, in its own
    stream, for a pair with an imputed value. Each draw is a pure function of
    the seed, the node and the row (:mod:`.draws`).

    Parameters
    ----------
    routing : Routing or None
        The rule's routing (``None`` for a rule that does not route itself:
        ``mp`` reads only p_R, :meth:`right_probability`).
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
    cache : ForestCache
        The forest's cache (the node factors of p_R, the rewritten trees'
        draws).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from fedforest import PooledForest, rules
    >>> from fedforest.prediction.cache import forest_cache
    >>> from fedforest.prediction.draws import Draws
    >>> rng = np.random.RandomState(0)
    >>> X = rng.normal(size=(40, 2)).astype(np.float32)
    >>> rf = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, X[:, 0] > 0)
    >>> forest = PooledForest.from_sklearn(rf, ["a", "b"], owner="s1")
    >>> cache = forest_cache(forest)
    >>> cf = cache.compiled(forest)
    >>> X[:, 0] = np.nan
    >>> none = np.full(X.shape, np.nan, dtype=np.float32)
    >>> s = Strategy(rules.get("fpv").routing, forest, cf, X, none, {}, np.full(2, np.nan), 2,
    ...              Draws(0, X, forest.tree_of_node, cf.depth), cache)
    >>> root = cf.roots[:1]
    >>> int(s.resolver(root, np.array([0]))[0])  # DISCARD
    2
    """

    def __init__(
        self,
        routing: Routing | None,
        forest,
        cf: CompiledForest,
        X,
        imputed,
        level_cdf,
        sigma,
        depth_threshold,
        draws: Draws,
        cache: ForestCache,
    ):
        self.routing = routing
        self.forest = forest
        self.cf = cf
        self.X = X
        self.imputed = imputed
        self.level_cdf = level_cdf
        self.sigma = sigma
        self.depth_threshold = depth_threshold
        self.draws = draws
        self.cache = cache

    def restricted(self, mask: np.ndarray) -> Strategy:
        """The same rules for the rows in ``mask`` (row indices restart at 0)."""
        return Strategy(
            self.routing,
            self.forest,
            self.cf,
            self.X[mask],
            self.imputed[mask],
            {k: v[mask] for k, v in self.level_cdf.items()},
            self.sigma,
            self.depth_threshold,
            self.draws.subset(mask),
            self.cache,
        )

    # ------------------------------------------------------------ dynamic
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
            centre, node_factor = _node_factors(self.forest, cf, inv_sigma, self.cache)
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

        The routing's ``first`` step decides the pairs it can, its
        ``otherwise`` step the rest. A pure function of each (node, row) pair:
        the order and the company in which pairs are asked change nothing.
        """
        first, otherwise = self.routing.first, self.routing.otherwise
        if first is None:
            return ALWAYS[otherwise](self, nodes, rows)
        decision = np.empty(nodes.size, dtype=np.int64)
        has = DECIDE[first](self, nodes, rows, decision)
        rest = np.flatnonzero(~has)
        if rest.size:
            decision[rest] = ALWAYS[otherwise](self, nodes[rest], rows[rest])
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
        depth = self.cf.depth
        max_depth = int(depth.max()) + 1 if f.n_nodes else 1
        t = Rewrite.start(f, absent)
        for step in self.routing.steps:
            REWRITE[step](self, t)
        random_depths = _depths_per_tree(f.tree_of_node, depth, t.random_node, f.n_trees)
        arrays = {
            "left": t.left,
            "right": t.right,
            "feature": t.feature,
            "threshold": t.threshold,
            "missing_left": f.missing_left,
        }
        n_columns = 2 * f.n_features + (max_depth if t.random_node.any() else 0)
        return arrays, t.discard, random_depths, n_columns

    def guesses(self, absent: np.ndarray) -> bool:
        """Whether rows missing exactly the ``absent`` columns can meet a ``pr`` draw."""
        routing = self.routing
        if routing is None or not (routing.static and routing.draws) or not absent.any():
            return False
        key = (routing, absent.tobytes(), int(self.depth_threshold), static_key(self))
        return self.cache.guesses.get_or_build(
            key, lambda: any(d.size for d in self.static_trees(absent)[2])
        )


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


def _node_factors(forest, cf: CompiledForest, inv_sigma: np.ndarray, cache: ForestCache):
    """Per feature its centre c, per node ``exp((t - c) / sigma)``; kept in the forest's cache.

    The centre is the median threshold of the forest's nodes on the feature (0
    for none): the two exponents of a probability then stay small whatever the
    feature's scale. Both depend on the forest and the standard deviations
    only, never on the rows predicted, so a row's probabilities are the same
    in any batch. A node's factor is NaN where it does not exist (a leaf, a
    categorical feature, a sigma of 0, an exponent beyond ``FACTOR_LIMIT``).
    """
    return cache.node_factors.get_or_build(
        inv_sigma.tobytes(), lambda: _build_node_factors(forest, cf, inv_sigma)
    )


def _build_node_factors(forest, cf: CompiledForest, inv_sigma: np.ndarray):
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
    return centre, np.ascontiguousarray(exp_factor(b))
