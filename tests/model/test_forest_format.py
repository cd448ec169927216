"""The version 2 pooled-forest payload: exact thresholds, preorder trees, leaf counts, size.

Round trips of real scikit-learn forests must give back every array bit for bit
and every strategy's probabilities bit for bit; the reader must refuse what is
malformed before it allocates anything large.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from hostile import parts
from same import assert_same_arrays, assert_same_predictions
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

from fedforest import STRATEGIES, PayloadError, PooledForest, fit_imputers, fit_surrogates
from fedforest.federation.results import payload_bytes
from fedforest.model import forest_format as ff
from fedforest.model.payload_checks import MAX_NODES
from fedforest.privacy.dp_forest import fit_dp_forest
from fedforest.privacy.transforms import add_count_noise, enforce_min_leaf_rows

F32 = np.float32
F32_MAX = float(np.finfo(F32).max)
TINY = float(np.finfo(F32).smallest_subnormal)


# ------------------------------------------------------------------ thresholds
def _thresholds() -> np.ndarray:
    """Thresholds of every kind: float32 values, midpoints, values between two float32,
    huge, tiny, negative, signed zeros, beyond the float32 range, categorical ones."""
    rng = np.random.default_rng(0)
    a = rng.normal(scale=10.0 ** rng.integers(-6, 7, 2000), size=2000).astype(F32)
    b = np.nextafter(a, F32(np.inf))
    c = (a * F32(1.5)).astype(F32)
    midpoints = a.astype(np.float64) / 2 + b.astype(np.float64) / 2  # exactly between two
    far = a.astype(np.float64) / 2 + c.astype(np.float64) / 2  # scikit-learn's rule
    between = np.nextafter(a.astype(np.float64), np.inf)  # 1 float64 ulp above a float32
    special = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        -0.1,
        1 / 3,
        F32_MAX,
        -F32_MAX,
        np.nextafter(F32_MAX, np.inf),
        np.nextafter(-F32_MAX, -np.inf),
        1e39,
        -1e39,
        1e300,
        -1e300,
        TINY,
        -TINY,
        TINY / 2,
        1e-320,
        -1e-320,
        np.inf,
    ]
    categorical = [k + 0.5 for k in range(-1, 12)] + list(range(-1, 13))
    return np.concatenate(
        [a, midpoints, far, between, rng.normal(size=500) * 1e3, special, categorical]
    ).astype(np.float64)


@pytest.mark.filterwarnings("ignore:overflow encountered in nextafter")
def test_the_float32_floor_decides_every_comparison_of_a_float32_value():
    t = _thresholds()
    f = ff.float32_floor(t)
    assert f.dtype == F32
    assert np.all(f.astype(np.float64) <= t)
    # the largest such float32: the next one is above t
    up = np.nextafter(f, F32(np.inf)).astype(np.float64)
    assert np.all((up > t) | (f == F32_MAX) | np.isposinf(t))
    # every float32 near each threshold, and the special ones
    near = [f]
    for _ in range(3):
        near.append(np.nextafter(near[-1], F32(np.inf)))
        near.insert(0, np.nextafter(near[0], F32(-np.inf)))
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, F32_MAX, -F32_MAX, TINY, -TINY, 1.0, -1.0], F32
    )
    for x in [*near, *(np.full(t.shape, s, F32) for s in specials)]:
        # the engine compares float32 rows with float64 thresholds (numpy promotes x)
        np.testing.assert_array_equal(x <= t, x <= f)
        np.testing.assert_array_equal(x > t, x > f)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32).view(F32)
    for ti in rng.choice(t, size=40):
        fi = ff.float32_floor(np.array([ti]))[0]
        np.testing.assert_array_equal(x <= ti, x <= fi)


def test_float32_floor_edge_cases():
    cases = {
        0.0: 0.0,
        1.0: 1.0,  # exactly representable: itself
        0.1: float(np.nextafter(F32(0.1), F32(0))) if float(F32(0.1)) > 0.1 else float(F32(0.1)),
        1e300: F32_MAX,
        np.inf: np.inf,
        -1e300: -np.inf,  # no float32 is <= -1e300
        TINY / 2: 0.0,
        -TINY / 2: -TINY,
    }
    for t, expected in cases.items():
        assert ff.float32_floor(np.array([t]))[0] == F32(expected), t
    negzero = ff.float32_floor(np.array([-0.0]))[0]
    assert negzero == 0 and np.signbit(negzero)  # -0.0 stays -0.0
    assert np.isnan(ff.float32_floor(np.array([np.nan]))[0])


def test_thresholds_are_split_and_joined_bit_for_bit():
    t = np.concatenate([_thresholds(), [np.nan, -np.inf]])
    f32, fine, at, exact = ff.split_thresholds(t)
    assert f32.dtype == F32 and fine.dtype == np.uint8 and exact.dtype == np.float64
    joined = ff.join_thresholds(f32, fine)
    joined[at] = exact
    assert np.array_equal(joined.view(np.uint64), t.view(np.uint64))  # -0.0 and NaN too
    assert np.all(f32[at] == 0) and np.all(fine[at] == 0)
    # only what needs it is sent in full: float32 values, midpoints of two float32 values
    # (scikit-learn's thresholds) need no more; one float64 ulp above a float32 does
    assert np.all(at >= 3 * 2000)
    assert np.isin(np.arange(3 * 2000, 4 * 2000), at).all()
    sent = t[at]
    assert np.isnan(sent).any() and np.isneginf(sent).any() and 1e300 in sent


def test_categorical_thresholds_keep_their_level_codes():
    for k in range(1, 12):
        t = np.array([-1.0, *[c + 0.5 for c in range(-1, k)], *range(k + 1)], dtype=np.float64)
        f32, fine, at, _ = ff.split_thresholds(t)
        assert at.size == 0 and not fine.any()  # small halves are float32 values
        assert np.array_equal(f32.astype(np.float64), t)
        # and the floor never changes the code a rule computes from a threshold
        f = ff.float32_floor(t + 1e-9).astype(np.float64)
        assert np.array_equal(np.floor(np.clip(f, -1, k)), np.floor(np.clip(t + 1e-9, -1, k)))


# ------------------------------------------------------------------ structure
def test_preorder_links_rebuild_the_children():
    # tree 0: 0 -> (1, 4), 1 -> (2, 3); tree 1: a single leaf; tree 2: 6 -> (7, 8)
    is_leaf = np.array([0, 0, 1, 1, 1, 1, 0, 1, 1], bool)
    valid, left, right, end = ff.preorder_links(np.array([0, 5, 6, 9]), is_leaf)
    assert valid.tolist() == [True, True, True]
    assert left.tolist() == [1, 2, -1, -1, -1, -1, 7, -1, -1]
    assert right.tolist() == [4, 3, -1, -1, -1, -1, 8, -1, -1]
    assert end.tolist() == [5, 4, 3, 4, 5, 6, 9, 8, 9]


@pytest.mark.parametrize(
    "bits, starts, bad",
    [
        ([0, 1, 1, 1], [0, 4], [0]),  # closes after 3 nodes: one node too many
        ([0, 0, 1, 1], [0, 4], [0]),  # never closes
        ([0, 0, 0, 0], [0, 4], [0]),  # every node internal
        ([1, 0, 1, 1], [0, 1, 4], []),  # two good trees
        ([1, 0, 1, 1], [0, 2, 4], [0, 1]),  # a boundary in the wrong place breaks both
        ([1, 1, 1], [0, 3], [0]),  # three leaves are no tree
    ],
)
def test_preorder_links_flag_flags_that_are_not_trees(bits, starts, bad):
    valid, *_ = ff.preorder_links(np.array(starts), np.array(bits, bool))
    assert np.flatnonzero(~valid).tolist() == bad


# ------------------------------------------------------------------ round trips
def _round_trip(forest: PooledForest) -> PooledForest:
    payload = forest.to_payload()
    assert payload["version"] == 2
    back = PooledForest.from_payload(payload, sender="site-9")
    again = back.to_payload()  # a second round trip writes the very same payload
    for key, value in payload.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == again[key].dtype and np.array_equal(value, again[key]), key
        else:
            assert value == again[key], key
    return back


def test_a_real_forest_with_categories_missing_values_and_surrogates_round_trips():
    p = parts()
    forest = p["forest"]
    assert forest.categories and forest.saw_missing.any() and (forest.surrogate_feature >= 0).any()
    back = _round_trip(forest)
    assert_same_arrays(back, forest)
    assert forest.to_payload()["value_trees"].size == 0  # every tree sent as counts
    checked = assert_same_predictions(back, forest, p["imputers"], p["feature_std"])
    assert checked == 3 * len(STRATEGIES) * 2  # frames x strategies x votings
    inter = p["intersection"]
    assert_same_arrays(_round_trip(inter), inter)


def _table(n=400, classes=3, seed=0):
    rng = np.random.RandomState(seed)
    X = pd.DataFrame(rng.normal(size=(n, 5)), columns=[f"x{i}" for i in range(5)])
    X["c"] = rng.randint(0, 4, n).astype(float)
    score = X["x0"] - X["x1"] + 0.5 * X["c"] + rng.normal(scale=0.5, size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    X.loc[rng.rand(n) < 0.1, "x2"] = np.nan
    return X, y


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestClassifier(n_estimators=8, random_state=0),
        lambda: RandomForestClassifier(n_estimators=8, min_samples_leaf=7, random_state=1),
        lambda: RandomForestClassifier(n_estimators=8, max_depth=3, random_state=2),
        lambda: RandomForestClassifier(n_estimators=6, max_samples=0.5, random_state=3),
        lambda: RandomForestClassifier(n_estimators=6, class_weight="balanced", random_state=4),
        lambda: RandomForestClassifier(n_estimators=6, max_leaf_nodes=12, random_state=5),
        lambda: ExtraTreesClassifier(n_estimators=6, random_state=6),
    ],
    ids=["grown", "min_leaf", "shallow", "max_samples", "class_weight", "best_first", "extra"],
)
@pytest.mark.parametrize("classes", [2, 3, 5])
def test_scikit_learn_forests_round_trip_and_predict_bit_for_bit(make, classes):
    X, y = _table(classes=classes)
    labels = np.array([f"class-{k}" for k in range(classes)])[y]
    rf = make().fit(X.to_numpy(np.float32), labels)
    cats = {"c": ["a", "b", "c", "d"]}
    forest = PooledForest.from_sklearn(rf, list(X.columns), "site-1", X=X, categories=cats)
    forest = fit_surrogates(forest, X, ["x0", "x1", "c"], min_agreement=0.0, min_rows=2)
    imputers = fit_imputers(X, ["x2", "x3", "x4"], ["x0", "x1"], owner="site-1", cv=None)
    std = {c: float(X[c].std(ddof=0)) for c in X.columns if c != "c"}
    back = _round_trip(forest)
    if type(rf).__name__ == "RandomForestClassifier" and rf.max_leaf_nodes is not None:
        # best-first trees are not in preorder: the same trees, renumbered
        assert not np.array_equal(back.children_left, forest.children_left)
        assert_same_arrays(back, _round_trip(back))
    else:
        assert_same_arrays(back, forest)
    assert assert_same_predictions(back, forest, imputers, std) == 3 * len(STRATEGIES) * 2


def test_pooled_forests_with_classes_a_site_never_saw_round_trip():
    X, y = _table(classes=3)
    a = RandomForestClassifier(n_estimators=4, random_state=0).fit(X[y < 2], y[y < 2])
    b = RandomForestClassifier(n_estimators=4, random_state=1).fit(X[y > 0], y[y > 0])
    pooled = PooledForest.concat(
        [
            PooledForest.from_sklearn(a, list(X.columns), "a", X=X[y < 2]),
            PooledForest.from_sklearn(b, list(X.columns), "b", X=X[y > 0]),
        ]
    )
    back = _round_trip(pooled)
    assert_same_arrays(back, pooled)
    assert pooled.to_payload()["value_trees"].size == 0
    assert assert_same_predictions(back, pooled, strategies=("fpv", "pr", "park")) == 18


def test_distributions_that_are_not_count_ratios_are_sent_as_float64():
    X, y = _table(classes=2)
    rf = RandomForestClassifier(n_estimators=6, random_state=0).fit(X, y)
    forest = PooledForest.from_sklearn(rf, list(X.columns), "s", X=X)
    noisy = enforce_min_leaf_rows(add_count_noise(forest, 1.0, random_state=0), 3)
    payload = noisy.to_payload()
    assert payload["value_trees"].size == noisy.n_trees  # Laplace noise: no counts
    assert payload["value"].shape == (noisy.n_nodes, 2)
    back = _round_trip(noisy)
    assert_same_arrays(back, noisy)
    assert assert_same_predictions(back, noisy, strategies=("fpv", "mp")) == 12
    # a mix: some trees as counts, some as float64
    mixed = PooledForest.concat([forest, noisy.select_trees(np.arange(noisy.n_trees) < 2)])
    payload = mixed.to_payload()
    assert payload["value_trees"].tolist() == [6, 7]
    assert_same_arrays(_round_trip(mixed), mixed)


def test_differentially_private_forests_round_trip():
    X, y = _table(classes=2)
    X = X.drop(columns="x2")
    ranges = {c: (-5.0, 5.0) for c in X.columns if c != "c"}
    forest = fit_dp_forest(
        X,
        y,
        ranges,
        {"c": ["a", "b", "c", "d"]},
        n_trees=5,
        max_depth=3,
        epsilon=1.0,
        random_state=0,
        noise_state=0,
    )
    back = _round_trip(forest)
    assert_same_arrays(back, forest)
    assert assert_same_predictions(back, forest, strategies=("fpv", "pr")) == 12


def test_a_hand_made_forest_round_trips(two_site_forest):
    forest = two_site_forest[0]
    weird = PooledForest(
        **{
            **{k: getattr(forest, k) for k in ("feature_names", "classes", "owners", "categories")},
            **{k: getattr(forest, k) for k in ("tree_start", "tree_owner", "missing_left")},
            **{k: getattr(forest, k) for k in ("children_left", "children_right", "feature")},
            "threshold": forest.threshold * np.pi,  # thresholds with every bit used
            "n_node_samples": forest.n_node_samples + 3 * (forest.feature >= 0),  # no sums
            "saw_missing": forest.feature >= 0,
            "value": np.where(forest.feature[:, None] >= 0, 0.5, forest.value),
        }
    )
    payload = weird.to_payload()
    assert payload["samples_delta"].size > 0.3 * payload["feature"].size
    assert payload["threshold_exact_at"].size > 0.5 * payload["threshold"].size
    assert_same_arrays(_round_trip(weird), weird)


# ------------------------------------------------------------------ size
def _bench_forest(seed=0):
    """Like benchmarks/bench_inference.py, smaller: fully grown trees on 20 features."""
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=2000, n_features=20, n_informative=10, n_redundant=4, random_state=seed
    )
    names = [f"f{i:02d}" for i in range(20)]
    frame = pd.DataFrame(X, columns=names)
    rf = RandomForestClassifier(n_estimators=20, random_state=seed).fit(frame, y)
    forest = PooledForest.from_sklearn(rf, names, owner="site-1")
    return fit_surrogates(forest, frame, names[:10])


def test_a_pooled_forest_takes_at_most_16_bytes_per_node():
    forest = _bench_forest()
    payload = forest.to_payload()
    per_node = payload_bytes(payload) / forest.n_nodes
    assert per_node <= 16, per_node
    from v1_payloads import v1_payload

    assert payload_bytes(v1_payload(forest)) / forest.n_nodes > 4 * per_node


# ------------------------------------------------------------------ hostile payloads
def test_a_huge_node_count_is_refused_before_anything_is_allocated():
    payload = _bench_forest().to_payload()
    for starts in ([0, MAX_NODES], [0, 10, MAX_NODES]):
        bad = dict(payload, tree_start=np.array(starts), tree_owner=np.zeros(len(starts) - 1))
        start = time.perf_counter()
        with pytest.raises(PayloadError, match="field 'tree_owner'|field 'leaf_bits'"):
            PooledForest.from_payload(bad, "site-3")
        assert time.perf_counter() - start < 1.0
    bad = dict(payload, tree_start=np.array([0, MAX_NODES + 1]))
    with pytest.raises(PayloadError, match="field 'tree_start'"):
        PooledForest.from_payload(bad, "site-3")


def test_flags_that_never_close_a_tree_are_refused_at_any_size():
    payload = _bench_forest().to_payload()
    n = int(payload["tree_start"][-1])
    for bits in (np.zeros(n, bool), np.ones(n, bool)):  # all internal / all leaves
        bad = dict(payload, leaf_bits=np.packbits(bits))
        with pytest.raises(PayloadError, match="field 'leaf_bits' does not describe tree 0"):
            PooledForest.from_payload(bad, "site-3")


@pytest.mark.parametrize(
    "field, change",
    [
        ("feature", lambda a: a[:-1]),
        ("threshold", lambda a: a[:-1]),
        ("leaf_samples", lambda a: a[:-1]),
        ("leaf_counts", lambda a: a[:-1]),
        ("surrogate_agreement", lambda a: a[:-1]),
        ("missing_left", lambda a: a[:-1]),
    ],
)
def test_every_field_is_checked_before_the_trees_are_rebuilt(monkeypatch, field, change):
    """Only leaf flags, however many nodes they announce, never make the reader build trees:
    every field must first be as long as the flags say."""
    payload = _bench_forest().to_payload()

    def not_yet(*args, **kwargs):
        raise AssertionError("the trees were rebuilt before every field was checked")

    monkeypatch.setattr(ff, "preorder_links", not_yet)
    with pytest.raises(PayloadError, match=f"field {field!r}"):
        PooledForest.from_payload(dict(payload, **{field: change(payload[field])}), "site-3")
