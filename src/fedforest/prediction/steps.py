"""The numpy implementation of every routing step (:mod:`fedforest.rules.routing`).

Each step is implemented twice here, with the same semantics: as a decision for
(node, row) pairs met by the numpy traversal (:data:`DECIDE`, :data:`ALWAYS`),
and as a rewrite of the trees for the rows that miss only whole columns, which
scikit-learn's compiled engine then walks (:data:`REWRITE`). The numba kernels
(:mod:`.numba_kernels`) implement the same steps by their codes. A rule names
its steps (:class:`~fedforest.rules.routing.Routing`); :class:`.strategies.Strategy`
applies them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.traversal import DISCARD, LEFT, RIGHT, STOP
from ..rules.routing import DISCARD as DISCARD_STEP
from ..rules.routing import IMPUTED_DRAW, IMPUTED_VALUE, PR_RULE, SURROGATE
from ..rules.routing import STOP as STOP_STEP
from .draws import IPR_STREAM, PR_STREAM


# ------------------------------------------------------------- the numpy traversal
def pr_rule(s, nodes, rows) -> np.ndarray:
    """Discard above ``depth_threshold``; below it, go right w.p. N_right/N_node.

    Right when the pair's draw (:data:`~.draws.PR_STREAM`) is below
    ``N_right / N_node``; nothing is drawn for a pair that discards.
    """
    decision = np.full(nodes.size, DISCARD)
    deep = np.flatnonzero(s.cf.depth[nodes] >= s.depth_threshold)
    if deep.size:
        n, r = nodes[deep], rows[deep]
        draw = s.draws.uniform(n, r, PR_STREAM)
        decision[deep] = np.where(draw < s.cf.right_fraction[n], RIGHT, LEFT)
    return decision


def _imputed_value(s, nodes, rows, decision) -> np.ndarray:
    value = s.imputed[rows, s.cf.feature[nodes]]
    has = ~np.isnan(value)
    decision[has] = np.where(value[has] > s.cf.threshold[nodes[has]], RIGHT, LEFT)
    return has


def _imputed_draw(s, nodes, rows, decision) -> np.ndarray:
    has = ~np.isnan(s.imputed[rows, s.cf.feature[nodes]])
    if has.any():
        n, r = nodes[has], rows[has]
        p = s.right_probability(n, r)
        decision[has] = np.where(s.draws.uniform(n, r, IPR_STREAM) < p, RIGHT, LEFT)
    return has


def _surrogate(s, nodes, rows, decision) -> np.ndarray:
    forest = s.forest
    sf = forest.surrogate_feature[nodes]
    has = sf >= 0
    xs = np.full(nodes.size, np.nan, dtype=np.float32)
    xs[has] = s.X[rows[has], sf[has]]
    has = ~np.isnan(xs)
    le = xs[has] <= forest.surrogate_threshold[nodes[has]]
    decision[has] = np.where(le == forest.surrogate_left_le[nodes[has]], LEFT, RIGHT)
    return has


#: A partial step: ``decide(strategy, nodes, rows, decision) -> decided`` writes the
#: decisions it can make into ``decision`` and returns where it made them.
DECIDE = {IMPUTED_VALUE: _imputed_value, IMPUTED_DRAW: _imputed_draw, SURROGATE: _surrogate}
#: A total step: ``always(strategy, nodes, rows) -> decisions`` for every pair.
ALWAYS = {
    DISCARD_STEP: lambda s, nodes, rows: np.full(nodes.size, DISCARD),
    STOP_STEP: lambda s, nodes, rows: np.full(nodes.size, STOP),
    PR_RULE: pr_rule,
}


# ------------------------------------------------------------- the rewritten trees
@dataclass
class Rewrite:
    """The node arrays being rewritten for one pattern of ``absent`` columns.

    ``stuck`` marks the unresolvable nodes still to decide; a step that
    decides some takes them out of it.
    """

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    absent: np.ndarray
    internal: np.ndarray
    stuck: np.ndarray
    discard: np.ndarray
    random_node: np.ndarray

    @classmethod
    def start(cls, forest, absent: np.ndarray) -> Rewrite:
        feature = forest.feature.astype(np.int64)
        internal = feature >= 0
        stuck = internal & absent[np.where(internal, feature, 0)] & ~forest.saw_missing
        return cls(
            left=forest.children_left.copy(),
            right=forest.children_right.copy(),
            feature=feature,
            threshold=forest.threshold.copy(),
            absent=absent,
            internal=internal,
            stuck=stuck,
            discard=np.zeros(forest.n_nodes, dtype=bool),
            random_node=np.zeros(forest.n_nodes, dtype=bool),
        )

    def make_leaves(self, nodes: np.ndarray) -> None:
        self.feature[nodes] = -1
        self.left[nodes] = -1
        self.right[nodes] = -1


def with_imputer(s) -> np.ndarray:
    """Per feature, whether the call has imputed values for it."""
    return ~np.all(np.isnan(s.imputed), axis=0)


def _rewrite_imputed_value(s, t: Rewrite) -> None:
    """A node with an imputer splits on the imputed column (n_features + f)."""
    has_imp = with_imputer(s)
    use = t.stuck & has_imp[np.where(t.internal, t.feature, 0)]
    t.feature[use] = s.forest.n_features + t.feature[use]
    t.stuck = t.stuck & ~use


def _rewrite_surrogate(s, t: Rewrite) -> None:
    """A node with a surrogate the rows have splits on it (children swapped when not left_le)."""
    f = s.forest
    sf = f.surrogate_feature
    use = t.stuck & (sf >= 0) & ~t.absent[np.where(sf >= 0, sf, 0)]
    t.feature[use] = sf[use]
    t.threshold[use] = f.surrogate_threshold[use]
    swap = use & ~f.surrogate_left_le
    t.left[swap], t.right[swap] = f.children_right[swap], f.children_left[swap]
    t.stuck = t.stuck & ~use


def _rewrite_pr_rule(s, t: Rewrite) -> None:
    """Below the depth threshold a split on the column of draws; above it a discard leaf."""
    depth = s.cf.depth
    shallow = t.stuck & (depth < s.depth_threshold)
    deep = t.stuck & ~shallow
    t.feature[deep] = 2 * s.forest.n_features + depth[deep]
    t.threshold[deep] = -s.cf.right_fraction[deep]
    t.random_node = deep
    t.make_leaves(shallow)
    t.discard = shallow


def _rewrite_discard(s, t: Rewrite) -> None:
    t.make_leaves(t.stuck)
    t.discard = t.stuck


def _rewrite_stop(s, t: Rewrite) -> None:
    """An ordinary leaf: the node's own ``value`` row is the tree's prediction."""
    t.make_leaves(t.stuck)


#: ``rewrite(strategy, rewrite)`` for every step that has a static form.
REWRITE = {
    IMPUTED_VALUE: _rewrite_imputed_value,
    SURROGATE: _rewrite_surrogate,
    PR_RULE: _rewrite_pr_rule,
    DISCARD_STEP: _rewrite_discard,
    STOP_STEP: _rewrite_stop,
}


def static_rows(s) -> np.ndarray | None:
    """The rows the rewritten trees can take (``None``: every row).

    A node that splits on an imputed column needs the row's imputed value
    there: a row without one follows the ``pr`` rule, on the dynamic path.
    """
    if IMPUTED_VALUE not in s.routing.steps:
        return None
    return ~np.isnan(s.imputed[:, with_imputer(s)]).any(axis=1)


def static_key(s) -> tuple:
    """What, besides the absent columns, the rewritten trees depend on (the imputers used)."""
    if IMPUTED_VALUE in s.routing.steps:
        return tuple(np.flatnonzero(with_imputer(s)))
    return ()
