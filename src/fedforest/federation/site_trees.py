"""The trees a site evaluates: its own, then those its columns can follow furthest.

A pool of many sites holds many trees that split early on columns a given
site lacks: with its columns absent, such a tree guesses (``mp``, ``ipr``)
or is discarded (``fpv``) for most rows, and costs as much to evaluate as any
other. With ``evaluation.trees_per_site`` set, the server sends each site at
most that many trees of the pooled forest (swarm mode: each site keeps that
many of the forest it pooled itself):

* every tree the site trained itself (``local`` and ``park`` need them), and
* the other sites' trees, each site in turn giving its next tree by
  decreasing :func:`reachable_share` for this site's columns: the share of
  the tree's training rows whose path reaches a leaf without meeting a split
  on a column this site lacks (a split that learned a direction for missing
  values counts as followed, the way it routes the site's rows). The trees
  this site's columns reach not at all come after all the others. Ties go to
  the tree earlier in the pooled forest, and the turns follow the pooled
  order (site names), so the choice never depends on the order of the
  replies; taking turns keeps a site that makes its trees look reachable
  (node counts are the sender's word) to its turn.

The kept trees stay in their pooled order. The site's evaluation (and the
sizes of what it receives) then stop growing with the number of sites.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

import numpy as np

from ..model.forest import PooledForest

logger = logging.getLogger(__name__)


def reachable_share(forest: PooledForest, columns: Collection[str]) -> np.ndarray:
    """Per tree: the share of its training rows that reach a leaf on ``columns`` alone.

    Computed from the node counts depth by depth (no loop over nodes): a
    root holds share 1; a split on a column in ``columns`` passes its share
    to its children in proportion to their training rows; a split on another
    column passes it whole to the child its missing values go to when it
    learned one, and nothing otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]] * 5, dtype=float)
    >>> rf = RandomForestClassifier(2, random_state=0).fit(X, (X[:, 0] * 2 + X[:, 1]).astype(int))
    >>> forest = PooledForest.from_sklearn(rf, ["a", "b"], owner="s1")
    >>> reachable_share(forest, ["a", "b"]).tolist()
    [1.0, 1.0]
    >>> reachable_share(forest, []).tolist()
    [0.0, 0.0]
    """
    available = set(columns)
    present = np.array([name in available for name in forest.feature_names], dtype=bool)
    n_nodes = forest.n_nodes
    share = np.zeros(n_nodes)
    if not n_nodes:
        return np.zeros(forest.n_trees)
    left, right = forest.global_children
    internal = forest.feature >= 0
    on_present = internal & present[np.where(internal, forest.feature, 0)]
    learned = internal & ~on_present & forest.saw_missing
    counts = forest.n_node_samples.astype(np.float64)
    roots = forest.tree_start[:-1]
    share[roots] = 1.0
    depth = forest.node_depth
    for d in range(int(depth.max()) + 1):
        level = np.flatnonzero((depth == d) & internal)
        split = level[on_present[level]]
        if split.size:
            total = np.maximum(counts[split], 1.0)
            share[left[split]] = share[split] * counts[left[split]] / total
            share[right[split]] = share[split] * counts[right[split]] / total
        routed = level[learned[level]]
        if routed.size:
            child = np.where(forest.missing_left[routed], left[routed], right[routed])
            share[child] = share[routed]
    leaves = ~internal
    return np.clip(
        np.bincount(forest.tree_of_node[leaves], share[leaves], minlength=forest.n_trees), 0, 1
    )


def trees_for_site(
    forest: PooledForest, site: str, columns: Collection[str], max_trees: int | None
) -> np.ndarray:
    """Which trees of ``forest`` site ``site`` (with ``columns``) evaluates (a bool mask).

    ``max_trees`` ``None`` keeps every tree. The site's own trees are always
    kept, even beyond ``max_trees``. The room left is shared out among the
    other owners in turn (in pooled order, which is site-name order), each
    giving its next tree by decreasing :func:`reachable_share` (ties by pooled
    order), the trees a site's columns reach not at all coming last. So no
    owner gets more than its turn while the others still have trees to give:
    a site that inflates its trees' node counts to look reachable everywhere
    cannot crowd the others out of every site's model.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X = np.random.default_rng(0).normal(size=(60, 2))
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> def site(owner, seed):
    ...     rf = RandomForestClassifier(2, random_state=seed).fit(X, y)
    ...     return PooledForest.from_sklearn(rf, ["a", "b"], owner=owner)
    >>> pooled = PooledForest.concat([site("s1", 0), site("s2", 1)])
    >>> trees_for_site(pooled, "s1", ["a", "b"], 3).tolist()
    [True, True, True, False]
    """
    mask = np.ones(forest.n_trees, dtype=bool)
    if max_trees is None or forest.n_trees <= max_trees:
        return mask
    own = forest.owner_mask(site) if site in forest.owners else np.zeros_like(mask)
    room = max(int(max_trees) - int(own.sum()), 0)
    share = reachable_share(forest, columns)
    queues = []
    for owner in forest.owners:
        if owner == site:
            continue
        trees = np.flatnonzero(forest.owner_mask(owner))
        # best reached first (stable: ties keep the pooled order), unreachable ones last
        trees = trees[np.argsort(-share[trees], kind="stable")]
        queues.append(list(trees))
    reached = [[t for t in q if share[t] > 0] for q in queues]
    unreached = [[t for t in q if share[t] <= 0] for q in queues]
    mask = own.copy()
    for lists in (reached, unreached):
        turn = 0
        while room and any(lists):
            q = lists[turn % len(lists)]
            if q:
                mask[q.pop(0)] = True
                room -= 1
            turn += 1
    return mask


def forest_for_site(
    forest: PooledForest, site: str, columns: Collection[str], max_trees: int | None
) -> PooledForest:
    """``forest`` with only the trees :func:`trees_for_site` keeps (``forest`` itself if all)."""
    mask = trees_for_site(forest, site, columns, max_trees)
    if mask.all():
        return forest
    logger.info("site %s is sent %d of the %d pooled trees", site, mask.sum(), forest.n_trees)
    return forest.select_trees(mask)
