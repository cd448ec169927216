"""Counter-based random draws: each one a pure function of the seed, the node and the row.

The strategies that guess (the ``pr`` rule of ``pr``, ``mi``, ``ss`` and
``ipr``, and ``ipr``'s imputed probability) draw a uniform number at an
unresolvable node. Here a draw is not taken from a generator in some order:
it is computed, with SplitMix64's mixing function (Steele, Lea and Flood,
"Fast splittable pseudorandom number generators", OOPSLA 2014), from

* the seed (``random_state``),
* the tree (its index in the forest) and the node's depth in it (a path
  meets one node per depth, so this names the node the row is at),
* the stream: :data:`PR_STREAM` for the ``pr`` rule, :data:`IPR_STREAM` for
  ``ipr``'s imputed probability (two independent draws at one node),
* the row's own values: :func:`row_keys` hashes the row's float32 values in
  the model's global feature matrix (NaN for an absent column or a missing
  value), once per row.

So a row's draws, and its prediction, depend on that row and the model only:
not on its batch, its position, the chunking, the number of threads, the
engine, or whether scikit-learn's compiled trees or the dynamic traversals
walk it. Identical rows get identical risks.

A draw is ``(mix64(level_key ^ row_key) >> 40) / 2**24``: 24 bits, an exact
float32, so that the compiled fast path (:mod:`.fastpath`, whose trees read
float32 columns) compares it with a node's ``N_right / N_node`` exactly as
the kernels do. The numba kernels (:mod:`.numba_kernels`) compute the same
uint64 arithmetic from the same keys, bit for bit.

Examples
--------
>>> import numpy as np
>>> from fedforest.prediction.draws import row_keys, uniforms
>>> X = np.array([[1.0, np.nan], [1.0, np.nan], [-0.0, 2.0]], dtype=np.float32)
>>> keys = row_keys(X)
>>> bool(keys[0] == keys[1]), bool(keys[0] == keys[2])
(True, False)
>>> u = uniforms(np.uint64(12345), keys)
>>> bool(u[0] == u[1]) and bool(((u >= 0) & (u < 1)).all())
True
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "IPR_STREAM",
    "PR_STREAM",
    "UNIFORM_BITS",
    "Draws",
    "level_keys",
    "mix64",
    "row_keys",
    "seed_key",
    "uniforms",
]

#: SplitMix64's increment (the golden ratio) and its two multipliers.
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
MIX_2 = np.uint64(0x94D049BB133111EB)
#: The stream of the ``pr`` rule's draw, and of ``ipr``'s imputed probability.
PR_STREAM, IPR_STREAM = 0, 1
#: Bits of a uniform: an exact float32 in [0, 1).
UNIFORM_BITS = 24
UNIFORM_SHIFT = np.uint64(64 - UNIFORM_BITS)
UNIFORM_SCALE = 2.0**-UNIFORM_BITS
#: The one bit pattern every NaN is hashed as (and -0.0 is hashed as 0.0).
CANONICAL_NAN = np.uint32(0x7FC00000)
#: Rows hashed at once (bounds the (rows, columns) temporaries).
ROW_BLOCK = 1 << 14
#: Largest seed (``random_state``) accepted.
MAX_SEED = 2**64 - 1

_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser of uint64 values (a new array; arithmetic modulo 2**64).

    Examples
    --------
    >>> import numpy as np
    >>> from fedforest.prediction.draws import mix64
    >>> hex(int(mix64(np.array([1], dtype=np.uint64))[0]))
    '0x5692161d100b05e5'
    """
    z = np.array(z, dtype=np.uint64, copy=True)
    z ^= z >> _S30
    z *= MIX_1
    z ^= z >> _S27
    z *= MIX_2
    z ^= z >> _S31
    return z


def seed_key(random_state) -> np.uint64:
    """The 64-bit key of a seed: ``mix64(seed + GOLDEN)``.

    Parameters
    ----------
    random_state : int, numpy Generator or None
        An integer in [0, 2**64 - 1] is the seed; ``None`` is seed 0 (draws
        are always reproducible); a Generator gives one integer for the call
        (so a call's rows are still independent of their batch).

    Examples
    --------
    >>> from fedforest.prediction.draws import seed_key
    >>> seed_key(None) == seed_key(0)
    True
    """
    if random_state is None:
        seed = 0
    elif isinstance(random_state, np.random.Generator):
        seed = int(random_state.integers(0, 2**63))
    elif isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        seed = int(random_state)
        if not 0 <= seed <= MAX_SEED:
            raise ValueError(f"random_state={seed} is not an integer in [0, 2**64 - 1]")
    else:
        raise ValueError(
            f"random_state={random_state!r} is not an integer in [0, 2**64 - 1], a "
            "numpy Generator or None"
        )
    with np.errstate(over="ignore"):
        return mix64(np.array([seed], dtype=np.uint64) + GOLDEN)[0]


def row_keys(X: np.ndarray) -> np.ndarray:
    """One uint64 key per row: a hash of the row's float32 values, column by column.

    Each cell is hashed with its column index (``mix64((j << 32 | bits) +
    GOLDEN)``, its float32 bit pattern, every NaN as one pattern and -0.0 as
    0.0), the cells of a row are summed modulo 2**64 and the sum is mixed
    again. Vectorised over rows and columns, in blocks of :data:`ROW_BLOCK`
    rows.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
        The global feature matrix (cast to float32, the trees' precision).

    Returns
    -------
    ndarray of shape (n_rows,), uint64
    """
    X = np.asarray(X, dtype=np.float32)
    n_rows, n_feat = X.shape
    column = np.arange(n_feat, dtype=np.uint64) << np.uint64(32)
    out = np.empty(n_rows, dtype=np.uint64)
    for lo in range(0, n_rows, ROW_BLOCK):
        block = X[lo : lo + ROW_BLOCK] + np.float32(0.0)  # -0.0 + 0.0 is 0.0
        bits = block.view(np.uint32).copy()
        bits[np.isnan(block)] = CANONICAL_NAN
        with np.errstate(over="ignore"):
            cells = mix64((bits.astype(np.uint64) | column) + GOLDEN)
            out[lo : lo + ROW_BLOCK] = mix64(cells.sum(axis=1, dtype=np.uint64))
    return out


def level_keys(key: np.uint64, tree, depth, stream: int) -> np.ndarray:
    """Keys of (tree, depth, stream): SplitMix64's output at counter ``tree << 32 | depth << 1 | stream``.

    ``mix64(key + (counter + 1) * GOLDEN)``, elementwise (uint64).
    """
    tree = np.asarray(tree, dtype=np.uint64)
    depth = np.asarray(depth, dtype=np.uint64)
    counter = (tree << np.uint64(32)) | (depth << np.uint64(1)) | np.uint64(stream)
    with np.errstate(over="ignore"):
        return mix64(np.uint64(key) + (counter + np.uint64(1)) * GOLDEN)


def uniforms(level_key, row_key) -> np.ndarray:
    """The draws ``(mix64(level_key ^ row_key) >> 40) / 2**24`` (float64, exact float32).

    Broadcasts ``level_key`` against ``row_key``; values in [0, 1) on a grid
    of 2**-24.
    """
    h = mix64(np.bitwise_xor(np.asarray(level_key, dtype=np.uint64), row_key))
    return (h >> UNIFORM_SHIFT).astype(np.float64) * UNIFORM_SCALE


class Draws:
    """The draws of one prediction call: the seed's key and the rows' keys.

    Parameters
    ----------
    random_state : int, numpy Generator or None
        See :func:`seed_key`.
    X : ndarray of shape (n_rows, n_features)
        The global feature matrix of the rows (their keys, :func:`row_keys`,
        are computed when a draw first needs them).
    tree_of_node, depth : ndarray of int, one per node
        The forest's nodes' tree and depth.

    Examples
    --------
    >>> import numpy as np
    >>> from fedforest.prediction.draws import Draws
    >>> X = np.array([[0.5], [0.5], [2.0]], dtype=np.float32)
    >>> d = Draws(7, X, tree_of_node=np.array([0, 0, 0]), depth=np.array([0, 1, 1]))
    >>> u = d.uniform(np.array([1, 2, 1]), np.array([0, 1, 2]), stream=0)
    >>> bool(u[0] == u[1])  # the same row values at the same (tree, depth)
    True
    """

    def __init__(self, random_state, X, tree_of_node, depth, *, key=None):
        self.key = seed_key(random_state) if key is None else np.uint64(key)
        self._X = X
        self._parent: tuple[Draws, object] | None = None
        self._row_keys: np.ndarray | None = None
        self.tree_of_node = tree_of_node
        self.depth = depth
        self._node_keys: dict[int, np.ndarray] = {}

    @property
    def row_keys(self) -> np.ndarray:
        """:func:`row_keys` of the rows (computed once, when a draw first needs them)."""
        if self._row_keys is None:
            if self._parent is not None:
                parent, mask = self._parent
                self._row_keys = parent.row_keys[mask]
            else:
                self._row_keys = row_keys(self._X)
        return self._row_keys

    def node_keys(self, stream: int) -> np.ndarray:
        """Per node of the forest, the key of its (tree, depth) in ``stream`` (computed once)."""
        if stream not in self._node_keys:
            keys = level_keys(self.key, self.tree_of_node, self.depth, stream)
            self._node_keys[stream] = np.ascontiguousarray(keys)
        return self._node_keys[stream]

    def tree_levels(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The flat table of every tree's levels: ``(start, tree, depth)``.

        ``start`` (int64, n_trees + 1): tree t's depth d is entry ``start[t] +
        d``, down to its deepest node; ``tree`` and ``depth`` name every
        entry (for :meth:`level_table`).
        """
        n_trees = int(self.tree_of_node.max()) + 1 if self.tree_of_node.size else 0
        deepest = np.zeros(n_trees, dtype=np.int64)
        np.maximum.at(deepest, self.tree_of_node, self.depth)
        start = np.zeros(n_trees + 1, dtype=np.int64)
        np.cumsum(deepest + 1, out=start[1:])
        tree = np.repeat(np.arange(n_trees), deepest + 1)
        depth = np.arange(start[-1]) - start[tree]
        return start, tree, depth

    def level_table(self, stream: int) -> tuple[np.ndarray, np.ndarray]:
        """The keys of every (tree, depth) in ``stream``, flat: ``(start, keys)``.

        ``keys[start[t] + d]`` is :func:`level_keys` of tree t at depth d (what
        :meth:`node_keys` gives each node there); at most one entry per node.
        """
        start, tree, depth = self.tree_levels()
        return start, np.ascontiguousarray(level_keys(self.key, tree, depth, stream))

    def uniform(self, nodes: np.ndarray, rows: np.ndarray, stream: int) -> np.ndarray:
        """The draws of (node, row) pairs in ``stream`` (float64 in [0, 1))."""
        return uniforms(self.node_keys(stream)[nodes], self.row_keys[rows])

    def tree_uniforms(self, tree: int, depths: np.ndarray, stream: int = PR_STREAM) -> np.ndarray:
        """Every row's draw at each of ``depths`` of ``tree``: shape (n_rows, len(depths))."""
        keys = level_keys(self.key, np.full(len(depths), tree), depths, stream)
        return uniforms(keys[None, :], self.row_keys[:, None])

    def subset(self, mask) -> Draws:
        """The same draws for the rows in ``mask`` (a boolean mask or a slice; rows restart at 0).

        Nothing is copied or hashed until a draw needs the rows' keys.
        """
        out = Draws(None, None, self.tree_of_node, self.depth, key=self.key)
        out._parent = (self, mask)
        out._node_keys = self._node_keys  # the same forest and seed
        return out
