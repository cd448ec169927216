from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import PayloadError, PooledForest

ALLOWED_SCALARS = (str, int, float, bool, type(None))


def _only_plain(obj) -> bool:
    if isinstance(obj, np.ndarray):
        return obj.dtype.kind in "iufbU"
    if isinstance(obj, dict):
        return all(isinstance(k, str) and _only_plain(v) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return all(_only_plain(v) for v in obj)
    return isinstance(obj, ALLOWED_SCALARS)


def test_from_sklearn_keeps_structure(two_site_forest):
    forest, rf_a, rf_b = two_site_forest
    assert forest.n_trees == 30
    assert forest.feature_names == ["x0", "x1", "x2", "x3", "x4", "x5"]
    assert forest.owners == ["a", "b"]
    assert list(forest.tree_owner[:15]) == [0] * 15 and list(forest.tree_owner[15:]) == [1] * 15
    t0 = rf_a.estimators_[0].tree_
    n0 = t0.node_count
    assert np.array_equal(forest.n_node_samples[:n0], t0.n_node_samples)
    assert forest.children_left.dtype == np.int32 and forest.feature.dtype == np.int32
    # site b's columns are remapped to global indices
    tb = rf_b.estimators_[0].tree_
    start = forest.tree_start[15]
    internal = tb.feature >= 0
    names_b = ["x0", "x1", "x4", "x5"]
    mapped = [
        forest.feature_names[i] for i in forest.feature[start : start + tb.node_count][internal]
    ]
    assert mapped == [names_b[i] for i in tb.feature[internal]]


def test_from_sklearn_rejects_bad_arguments(table):
    X, y = table
    rf = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="6 features"):
        PooledForest.from_sklearn(rf, ["a", "b"], owner="s")
    with pytest.raises(ValueError, match="differ from the columns"):
        PooledForest.from_sklearn(rf, [f"z{i}" for i in range(6)], owner="s")
    with pytest.raises(ValueError, match="fitted"):
        PooledForest.from_sklearn(RandomForestClassifier(), list(X.columns), owner="s")
    with pytest.raises(ValueError, match="categories"):
        PooledForest.from_sklearn(rf, list(X.columns), owner="s", categories={"q": ["u"]})


def test_from_sklearn_with_missing_values_marks_nodes_that_saw_nan(table):
    X, y = table
    X = X.copy()
    rng = np.random.RandomState(3)
    X.loc[rng.rand(len(X)) < 0.3, "x0"] = np.nan
    rf = RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, list(X.columns), owner="s", X=X)
    saw = forest.saw_missing
    assert saw.any()
    # only nodes on the column that had NaN can have seen NaN
    assert set(forest.feature[saw]) == {0}
    # without X only the missing-vs-observed splits (threshold +inf) are known
    bare = PooledForest.from_sklearn(rf, list(X.columns), owner="s")
    assert np.all(bare.saw_missing <= saw)
    assert np.array_equal(bare.saw_missing, np.isposinf(forest.threshold))
    # and the learned direction is scikit-learn's
    start = 0
    for est in rf.estimators_:
        n = est.tree_.node_count
        assert np.array_equal(
            forest.missing_left[start : start + n], est.tree_.missing_go_to_left.astype(bool)
        )
        start += n


def test_payload_round_trip_is_exact(two_site_forest):
    forest, _, _ = two_site_forest
    payload = forest.to_payload()
    assert _only_plain(payload)
    back = PooledForest.from_payload(payload, sender="site-9")
    again = back.to_payload()
    assert payload.keys() == again.keys()
    for key, value in payload.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == again[key].dtype and np.array_equal(value, again[key]), key
        else:
            assert value == again[key], key


def test_payload_round_trip_with_categories_and_string_classes():
    rng = np.random.RandomState(0)
    X = pd.DataFrame({"c": rng.randint(0, 3, 200), "n": rng.normal(size=200)})
    y = np.where(X["c"] == 1, "yes", "no")
    rf = RandomForestClassifier(n_estimators=4, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, ["c", "n"], "s", categories={"c": ["u", "v", "w"]})
    back = PooledForest.from_payload(forest.to_payload())
    assert back.categories == {"c": ["u", "v", "w"]}
    assert list(back.classes) == ["no", "yes"]


def _payload(two_site_forest):
    return two_site_forest[0].to_payload()


def _corrupt(payload, key, fn):
    bad = dict(payload)
    bad[key] = fn(payload[key].copy() if isinstance(payload[key], np.ndarray) else payload[key])
    return bad


def _set(i, v):
    def f(a):
        a[i] = v
        return a

    return f


@pytest.mark.parametrize(
    "key, fn, message",
    [
        ("children_left", _set(0, 10**6), "children_left"),
        ("children_left", _set(0, 0), "not after their parent"),
        ("children_right", lambda a: a.astype(np.float64), "dtype"),
        ("feature", _set(0, 99), "feature"),
        ("threshold", _set(0, np.nan), "threshold"),
        ("threshold", _set(0, -np.inf), "threshold"),
        ("value", lambda a: a * 2, "value"),
        ("value", lambda a: a[:, :1], "columns"),
        ("n_node_samples", _set(0, 0), "n_node_samples"),
        ("tree_start", lambda a: a[::-1], "tree_start"),
        ("tree_owner", _set(0, 7), "tree_owner"),
        ("feature_names", lambda v: v[:-1], "feature"),
        ("classes", lambda v: [1, 0], "classes"),
        ("owners", lambda v: "a", "owners"),
        ("version", lambda v: 99, "version"),
        ("format", lambda v: "something", "format"),
        ("missing_left", lambda a: a.astype(np.int32), "missing_left"),
        ("surrogate_feature", _set(0, 55), "surrogate_feature"),
        ("value", lambda a: a.astype(object), "object"),
        ("saw_missing", lambda a: a[:-1], "length"),
    ],
)
def test_malformed_payloads_are_refused(two_site_forest, key, fn, message):
    bad = _corrupt(_payload(two_site_forest), key, fn)
    with pytest.raises(PayloadError, match=message) as err:
        PooledForest.from_payload(bad, sender="site-3")
    assert "site-3" in str(err.value)


def test_cycle_and_shared_child_are_refused(two_site_forest):
    payload = _payload(two_site_forest)
    left = payload["children_left"].copy()
    right = payload["children_right"].copy()
    # point the root's right child at the same node as its left child
    bad = dict(payload, children_right=_set(0, left[0])(right))
    with pytest.raises(PayloadError, match="parent"):
        PooledForest.from_payload(bad)
    # a child pointing back up (a cycle) is refused too
    internal = np.flatnonzero(payload["feature"] >= 0)
    node = internal[1]
    bad = dict(payload, children_left=_set(node, 0)(left))
    with pytest.raises(PayloadError, match="not after their parent"):
        PooledForest.from_payload(bad)


def test_payload_refuses_unknown_fields_and_non_dicts(two_site_forest):
    payload = _payload(two_site_forest)
    with pytest.raises(PayloadError, match="unknown fields"):
        PooledForest.from_payload(dict(payload, code="import os"))
    with pytest.raises(PayloadError, match="dict"):
        PooledForest.from_payload(b"\x80\x04pickle")
    missing = dict(payload)
    del missing["threshold"]
    with pytest.raises(PayloadError, match="threshold"):
        PooledForest.from_payload(missing)


def test_concat_aligns_classes_and_features():
    rng = np.random.RandomState(0)
    X1 = pd.DataFrame(rng.normal(size=(120, 2)), columns=["a", "b"])
    y1 = rng.choice([0, 1], 120)
    X2 = pd.DataFrame(rng.normal(size=(120, 2)), columns=["b", "c"])
    y2 = rng.choice([1, 2], 120)
    f1 = PooledForest.from_sklearn(
        RandomForestClassifier(n_estimators=3, random_state=0).fit(X1, y1), ["a", "b"], "s1"
    )
    f2 = PooledForest.from_sklearn(
        RandomForestClassifier(n_estimators=3, random_state=0).fit(X2, y2), ["b", "c"], "s2"
    )
    pooled = PooledForest.concat([f1, f2])
    assert list(pooled.classes) == [0, 1, 2]
    assert pooled.feature_names == ["a", "b", "c"]
    first = pooled.tree_start[3]
    assert np.all(pooled.value[:first, 2] == 0)  # s1 never saw class 2
    assert np.all(pooled.value[first:, 0] == 0)  # s2 never saw class 0
    assert np.allclose(pooled.value[first:, 1:], f2.value)


def test_concat_refuses_contradictions():
    rng = np.random.RandomState(0)
    X = pd.DataFrame({"a": rng.randint(0, 2, 80), "b": rng.normal(size=80)})
    y = rng.choice([0, 1], 80)
    rf = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y)
    numeric = PooledForest.from_sklearn(rf, ["a", "b"], "s1")
    cat = PooledForest.from_sklearn(rf, ["a", "b"], "s2", categories={"a": ["n", "y"]})
    with pytest.raises(ValueError, match="'a'"):
        PooledForest.concat([numeric, cat])
    strings = PooledForest.from_sklearn(
        RandomForestClassifier(n_estimators=2, random_state=0).fit(X, np.where(y, "p", "q")),
        ["a", "b"],
        "s3",
    )
    with pytest.raises(ValueError, match="label types"):
        PooledForest.concat([numeric, strings])
    with pytest.raises(ValueError, match="at least one"):
        PooledForest.concat([])


def test_select_trees_and_tree_queries(two_site_forest):
    forest, _, _ = two_site_forest
    only_b = forest.select_trees(forest.owner_mask("b"))
    assert only_b.n_trees == 15 and set(only_b.tree_owner) == {1}
    within = forest.trees_within(["x0", "x1", "x2", "x3"])
    assert within[:15].all()  # site a's trees use only its columns
    uses_b_only = forest.trees_within(["x0", "x1", "x4", "x5"])
    assert uses_b_only[15:].all() and not within[15:].all()
    assert forest.node_depth[forest.tree_start[:-1]].tolist() == [0] * 30


def test_no_pickle_in_the_library():
    import pathlib

    src = pathlib.Path(__file__).resolve().parents[2] / "src"
    for path in src.rglob("*.py"):
        text = path.read_text()
        for banned in ("import pickle", "import joblib", "cloudpickle", "pickle.load"):
            assert banned not in text, f"{path} uses {banned}"
