"""What prediction keeps between calls, as explicit objects.

* :class:`ForestCache`: what depends on a forest alone (treated as immutable)
  and is worth building once: its :class:`~fedforest.model.traversal.CompiledForest`,
  the rewritten trees of the compiled fast path per pattern of absent columns,
  whether those split on columns of draws, and the per-node factors of p_R per
  set of standard deviations. :func:`forest_cache` gives the one of a forest
  (kept while the forest lives), shared by every estimator predicting with it.
* :class:`PredictionMemo`: predictions of one table (and the calibrations fitted
  on them) shared by the estimators of one forest and settings, which a caller
  passes to ``fit``, ``predict_proba`` and ``predict`` (the job's evaluation:
  ``auto``'s candidates, ``wmp``'s parts and each strategy's own row are
  predicted once).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from ..model.traversal import CompiledForest


class BoundedCache:
    """A dict that forgets everything when it would hold more than ``limit`` entries.

    Examples
    --------
    >>> cache = BoundedCache(2)
    >>> cache.get_or_build("a", lambda: 1), cache.get_or_build("a", lambda: 2)
    (1, 1)
    """

    def __init__(self, limit: int):
        self.limit = limit
        self._entries: dict[Hashable, Any] = {}

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The entry of ``key``, built by ``build()`` the first time it is asked for."""
        if key not in self._entries:
            if len(self._entries) >= self.limit:
                self._entries.clear()
            self._entries[key] = build()
        return self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)


class ForestCache:
    """What prediction builds once per forest.

    Attributes
    ----------
    static : BoundedCache
        The compiled fast path's tree sets, at most 64 patterns.
    guesses : BoundedCache
        Whether a pattern's rewritten trees split on columns of draws, at most 64.
    node_factors : BoundedCache
        The per-node factors of p_R, per set of standard deviations, at most 16.
    parts : BoundedCache
        Node layouts whose value table holds a range of the forest's value
        columns only (:meth:`compiled` with ``outputs``), at most 4.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from fedforest import PooledForest
    >>> rf = RandomForestClassifier(n_estimators=2, random_state=0).fit([[0], [1]], [0, 1])
    >>> forest = PooledForest.from_sklearn(rf, ["a"], owner="s1")
    >>> forest_cache(forest) is forest_cache(forest)
    True
    >>> forest_cache(forest).compiled(forest).roots.size
    2
    """

    def __init__(self) -> None:
        self._compiled: CompiledForest | None = None
        self.static = BoundedCache(64)
        self.guesses = BoundedCache(64)
        self.node_factors = BoundedCache(16)
        self.parts = BoundedCache(4)

    def compiled(self, forest, outputs: tuple[int, int] | None = None) -> CompiledForest:
        """The node layout of ``forest`` (the forest this cache belongs to).

        ``outputs`` (``(start, stop)``, optional): a layout whose ``value``
        holds the value columns ``start:stop`` only (a survival forest's
        cumulative hazards, or its survival curves), the other arrays shared
        with the whole layout's. Averaging fewer columns gives the same
        numbers in them, in less time.
        """
        if self._compiled is None:
            self._compiled = CompiledForest.build(forest)
        whole = self._compiled
        if outputs is None or tuple(outputs) == (0, whole.value.shape[1]):
            return whole
        start, stop = (int(i) for i in outputs)
        if not 0 <= start < stop <= whole.value.shape[1]:
            raise ValueError(
                f"outputs={outputs!r} is not a range of the forest's "
                f"{whole.value.shape[1]} value columns"
            )

        def part() -> CompiledForest:
            return whole._replace(
                value=np.ascontiguousarray(whole.value[:, start:stop]),
                vote=np.ascontiguousarray(whole.vote[:, start:stop]),
            )

        return self.parts.get_or_build((start, stop), part)


_CACHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def forest_cache(forest) -> ForestCache:
    """The :class:`ForestCache` of ``forest``, made on first use and dropped with the forest."""
    cache = _CACHES.get(forest)
    if cache is None:
        cache = _CACHES.setdefault(forest, ForestCache())
    return cache


class PredictionMemo:
    """Predictions of tables shared by the estimators of one forest and settings.

    An entry is keyed by the table's identity (``id``), so the tables must
    outlive the memo's use; the caller owns both.

    Examples
    --------
    >>> memo = PredictionMemo()
    >>> memo.get_or_compute(("fpv", 1), lambda: "p"), len(memo)
    ('p', 1)
    """

    def __init__(self) -> None:
        self._entries: dict[Hashable, Any] = {}

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value of ``key``, computed by ``compute()`` the first time."""
        if key not in self._entries:
            self._entries[key] = compute()
        return self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
