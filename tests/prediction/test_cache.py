"""What prediction builds once per forest, and memoised predictions."""

from __future__ import annotations

import gc

from sklearn.ensemble import RandomForestClassifier

from fedforest import PooledForest
from fedforest.prediction import cache
from fedforest.prediction.cache import BoundedCache, PredictionMemo, forest_cache


def test_a_bounded_cache_builds_once_and_forgets_everything_when_full():
    built = []

    def build(value):
        return lambda: built.append(value) or value

    c = BoundedCache(2)
    assert c.get_or_build("a", build(1)) == 1 and c.get_or_build("a", build(9)) == 1
    c.get_or_build("b", build(2))
    assert len(c) == 2 and built == [1, 2]
    assert c.get_or_build("c", build(3)) == 3
    assert len(c) == 1  # cleared, then c
    assert c.get_or_build("a", build(4)) == 4 and built == [1, 2, 3, 4]


def test_each_forest_has_its_own_cache_dropped_with_it():
    rf = RandomForestClassifier(n_estimators=3, random_state=0).fit([[0], [1], [2]], [0, 1, 1])
    forest = PooledForest.from_sklearn(rf, ["a"], owner="s1")
    other = PooledForest.from_sklearn(rf, ["a"], owner="s2")
    assert forest_cache(forest) is forest_cache(forest)
    assert forest_cache(forest) is not forest_cache(other)
    compiled = forest_cache(forest).compiled(forest)
    assert compiled is forest_cache(forest).compiled(forest) and compiled.roots.size == 3
    gc.collect()  # forests other tests left in reference cycles go first
    n = len(cache._CACHES)
    del forest, compiled
    gc.collect()
    assert len(cache._CACHES) == n - 1


def test_a_memo_computes_each_key_once():
    calls = []
    memo = PredictionMemo()
    assert memo.get_or_compute(("fpv", 1), lambda: calls.append(1) or "p") == "p"
    assert memo.get_or_compute(("fpv", 1), lambda: calls.append(2) or "q") == "p"
    assert memo.get_or_compute(("mp", 1), lambda: "r") == "r"
    assert len(memo) == 2 and calls == [1]
