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


def _flip_bit(i):
    def f(bits):
        bits[i // 8] ^= 0x80 >> (i % 8)
        return bits

    return f


def _padding_bit(bits):
    bits[-1] |= 1  # 2284 nodes: the last byte holds 4 flags and 4 padding bits
    return bits


@pytest.mark.parametrize(
    "key, fn, message",
    [
        ("leaf_bits", _flip_bit(0), "field 'leaf_bits' does not describe tree 0"),
        ("leaf_bits", _flip_bit(5), "field 'leaf_bits' does not describe tree 0"),
        ("leaf_bits", lambda a: a.astype(np.int64), "uint8"),
        ("leaf_bits", lambda a: a[:-1], "field 'leaf_bits'"),
        ("leaf_bits", _padding_bit, "padding bits"),
        ("feature", _set(0, 99), "field 'feature'"),
        ("feature", lambda a: a.astype(np.float64), "field 'feature'"),
        ("threshold", lambda a: a.astype(np.float64), "float32"),
        ("threshold", _set(0, np.nan), "NaN or -inf"),
        ("threshold", _set(0, -np.inf), "NaN or -inf"),
        ("threshold", _set(0, np.inf), "no larger finite float32"),
        ("threshold", lambda a: a[:-1], "field 'threshold'"),
        ("threshold_fine", lambda a: a.astype(np.int16) + 256, "field 'threshold_fine'"),
        ("threshold_exact_at", lambda a: np.array([5, 3]), "strictly increasing"),
        ("threshold_exact", lambda a: np.zeros(1), "field 'threshold_exact'"),
        ("leaf_samples", _set(0, 0), "field 'leaf_samples'"),
        ("leaf_samples", lambda a: a.astype(np.float32), "field 'leaf_samples'"),
        ("samples_delta_at", lambda a: np.array([0]), "field 'samples_delta'"),
        ("leaf_counts", lambda a: a * 0, "total count"),
        ("leaf_counts", lambda a: a[:, :1], "columns"),
        ("leaf_counts", lambda a: a[:-1], "field 'leaf_counts'"),
        ("leaf_counts", lambda a: a.astype(np.float64), "field 'leaf_counts'"),
        ("value_trees", lambda a: np.array([0]), "field 'value'"),
        ("value_trees", lambda a: np.array([1, 1]), "strictly increasing"),
        ("value_trees", lambda a: np.array([30]), "field 'value_trees'"),
        ("value", lambda a: a.astype(object), "object"),
        ("tree_start", lambda a: a[::-1], "tree_start"),
        ("tree_start", lambda a: a + np.append(0, np.ones(30, a.dtype)), "leaf_bits"),
        ("tree_owner", _set(0, 7), "tree_owner"),
        ("feature_names", lambda v: v[:-1], "feature"),
        ("classes", lambda v: [1, 0], "classes"),
        ("owners", lambda v: "a", "owners"),
        ("version", lambda v: 99, "version"),
        ("format", lambda v: "something", "format"),
        ("missing_left", lambda a: np.unpackbits(a).astype(bool), "missing_left"),
        ("saw_missing", lambda a: a[:-1], "saw_missing"),
        ("surrogate_nodes", _set(0, 0xFF), "field 'surrogate_feature'"),
        ("surrogate_feature", lambda a: np.zeros(3, np.int32), "surrogate_feature"),
    ],
)
def test_malformed_payloads_are_refused(two_site_forest, key, fn, message):
    bad = _corrupt(_payload(two_site_forest), key, fn)
    with pytest.raises(PayloadError, match=message) as err:
        PooledForest.from_payload(bad, sender="site-3")
    assert "site-3" in str(err.value)


def test_an_infinite_threshold_needs_a_node_that_saw_missing_values(two_site_forest):
    payload = _payload(two_site_forest)
    node = int(np.flatnonzero(payload["threshold_fine"] == 0)[0])
    bad = _corrupt(payload, "threshold", _set(node, np.inf))
    with pytest.raises(PayloadError, match="only [+]inf is allowed, on nodes that split missing"):
        PooledForest.from_payload(bad, sender="site-3")
    n = int(payload["tree_start"][-1])
    saw = np.unpackbits(payload["saw_missing"])[:n]
    inner = np.flatnonzero(np.unpackbits(payload["leaf_bits"])[:n] == 0)
    saw[inner[node]] = 1
    bad["saw_missing"] = np.packbits(saw)
    assert np.isposinf(PooledForest.from_payload(bad).threshold[inner[node]])


def test_trees_are_trees_by_construction(two_site_forest):
    """Version 2 has no child indices: the flags can only describe trees in preorder (no
    cycle, no shared child); flags that close a tree too early or too late are refused."""
    payload = _payload(two_site_forest)
    forest = PooledForest.from_payload(payload)
    is_leaf = np.unpackbits(payload["leaf_bits"])[: forest.n_nodes].astype(bool)
    left, right = forest.global_children
    internal = np.flatnonzero(~is_leaf)
    assert np.all(left[internal] == internal + 1) and np.all(right[internal] > left[internal])
    children = np.sort(np.concatenate([left[internal], right[internal]]))
    roots = forest.tree_start[:-1]
    assert np.array_equal(children, np.setdiff1d(np.arange(forest.n_nodes), roots))
    # turning the last leaf of tree 0 into an internal node: tree 0 takes a node of tree 1
    end = int(forest.tree_start[1]) - 1
    bits = _flip_bit(end)(payload["leaf_bits"].copy())
    with pytest.raises(PayloadError, match="does not describe tree 0"):
        PooledForest.from_payload(dict(payload, leaf_bits=bits))


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
