"""Tree surgery on a pooled forest's node arrays: the walk behind pruning.

:meth:`PooledForest.prune <fedforest.model.forest.PooledForest.prune>` is told,
node by node, what to do (:data:`KEEP`, :data:`LEAF`, :data:`TO_LEFT`,
:data:`TO_RIGHT`) and which trees to keep. :func:`pruned_preorder` walks every
kept tree from its root in depth-first order and says which old node each new
node is, with the renumbered children. It works on plain arrays; the forest's
method builds the new forest from them.
"""

from __future__ import annotations

import numpy as np

#: What :meth:`~fedforest.model.forest.PooledForest.prune` does with a node: keep it;
#: make it a leaf (with its own distribution and count); replace it by its left or by
#: its right child's subtree.
KEEP, LEAF, TO_LEFT, TO_RIGHT = 0, 1, 2, 3


def pruned_preorder(
    tree_start: np.ndarray,
    global_left: np.ndarray,
    global_right: np.ndarray,
    feature: np.ndarray,
    action: np.ndarray,
    keep_tree: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The nodes that survive a pruning, in depth-first order, tree by tree.

    Parameters
    ----------
    tree_start : ndarray of shape (n_trees + 1,)
        Offsets of each tree's first node.
    global_left, global_right : ndarray of shape (n_nodes,)
        Children as global node indices (``-1`` at leaves).
    feature : ndarray of shape (n_nodes,)
        Split feature, ``-1`` at leaves.
    action : ndarray of shape (n_nodes,)
        :data:`KEEP`, :data:`LEAF`, :data:`TO_LEFT` or :data:`TO_RIGHT` per node.
    keep_tree : ndarray of bool, shape (n_trees,)
        The trees to keep; the others are dropped.

    Returns
    -------
    source : ndarray of int64
        The old node of each new node.
    children_left, children_right : ndarray of int32
        The new nodes' children, local to their tree (``-1`` at leaves).
    made_leaf : ndarray of bool
        New nodes that were splits and are leaves now (:data:`LEAF`).
    tree_start : ndarray of int64
        Offsets of the kept trees' first nodes.
    """
    src: list[int] = []
    new_left: list[int] = []
    new_right: list[int] = []
    made_leaf: list[bool] = []
    starts = [0]
    for t in np.flatnonzero(keep_tree):
        base = len(src)
        stack = [(int(tree_start[t]), -1, False)]
        while stack:
            node, parent, is_right = stack.pop()
            while action[node] in (TO_LEFT, TO_RIGHT):
                node = int(global_left[node] if action[node] == TO_LEFT else global_right[node])
            idx = len(src) - base
            src.append(node)
            new_left.append(-1)
            new_right.append(-1)
            leaf = feature[node] < 0 or action[node] == LEAF
            made_leaf.append(bool(feature[node] >= 0 and leaf))
            if parent >= 0:
                (new_right if is_right else new_left)[base + parent] = idx
            if not leaf:
                stack.append((int(global_right[node]), idx, True))
                stack.append((int(global_left[node]), idx, False))
        starts.append(len(src))
    return (
        np.asarray(src, dtype=np.int64),
        np.asarray(new_left, dtype=np.int32),
        np.asarray(new_right, dtype=np.int32),
        np.asarray(made_leaf, dtype=bool),
        np.asarray(starts, dtype=np.int64),
    )
