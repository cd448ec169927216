"""Version 1 pooled-forest payloads still load, through their own reader, and predict as before.

``data/model_v1.npz`` is a model file written by fedforest when pooled forests
travelled as version 1 (``data/make_model_v1.py``); :func:`v1_payload` is the
version 1 writer, kept to make version 1 payloads of other forests.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from fedforest import PayloadError, PooledForest, protocol
from fedforest.model import forest_format, forest_v1
from fedforest.model.model_files import load_payload, save_payload
from fedforest.model.pooled_model import PooledModel, PredictionSettings, load_model

from .same import assert_same_arrays, assert_same_predictions
from .v1_payloads import MODEL_V1, forest_fields, v1_payload

SENDER = "site-3"


@pytest.fixture(scope="module")
def saved():
    """The raw version 1 model file (not validated)."""
    return load_payload(MODEL_V1)


def test_the_fixture_holds_version_1_forests(saved):
    assert saved["format"] == "fedforest/model" and saved["version"] == 1
    for part in ("forest", "intersection"):
        payload = saved[part]
        assert payload["version"] == 1
        assert set(payload) == {"format", "version", *forest_v1.PAYLOAD_FIELDS}
    forest = saved["forest"]
    assert forest["classes"] == [0, 1, 2] and forest["categories"] == {"c": ["low", "mid", "high"]}
    assert forest["saw_missing"].any() and (forest["surrogate_feature"] >= 0).any()


def test_the_kept_v1_writer_writes_what_version_1_wrote(saved):
    for part in ("forest", "intersection"):
        original = saved[part]
        again = v1_payload(PooledForest(**forest_fields(original)))
        assert again.keys() == original.keys()
        for key, value in original.items():
            if isinstance(value, np.ndarray):
                assert value.dtype == again[key].dtype, key
                assert np.array_equal(value, again[key]), key
            else:
                assert value == again[key], key


def test_a_saved_version_1_model_loads_and_predicts_exactly_as_before(saved):
    model = load_model(MODEL_V1)
    assert model.settings == PredictionSettings(depth_threshold=1, voting="soft", seed=0)
    for part in ("forest", "intersection"):
        before = PooledForest(**forest_fields(saved[part]))  # the arrays as version 1 sent them
        forest = getattr(model, part)
        assert_same_arrays(forest, before)
        imputers = model.imputers if part == "forest" else None
        assert assert_same_predictions(forest, before, imputers, model.feature_std) > 0


def test_version_1_is_read_by_its_own_reader(saved):
    assert protocol.FORMATS[protocol.POOLED_FOREST] == 4
    assert protocol.UPGRADES[(protocol.POOLED_FOREST, 1)] is forest_v1.upgrade
    upgraded = forest_v1.upgrade(saved["forest"])
    assert upgraded["version"] == 2  # the version 2 layout; the version 2 reader then adds the task
    assert set(upgraded) == {"format", "version", *forest_format.PAYLOAD_FIELDS}
    # the upgrade keeps every distribution as float64 (it does not search for counts)
    assert upgraded["value_trees"].tolist() == list(range(10))


def test_an_upgraded_forest_is_sent_on_as_the_current_version(saved, tmp_path):
    forest = PooledForest.from_payload(saved["forest"], SENDER)
    assert forest.task == "classification"
    payload = forest.to_payload()
    assert payload["version"] == 4 and payload["value_trees"].size == 0  # counts found
    assert payload["task"] == "classification"
    assert_same_arrays(PooledForest.from_payload(payload), forest)
    # a model saved again holds the current version and is smaller
    model = PooledModel.from_payload(saved, SENDER)
    bundle = dict(saved, forest=model.forest.to_payload())
    bundle["intersection"] = model.intersection.to_payload()
    path = save_payload(tmp_path / "again.npz", bundle)
    assert path.stat().st_size < MODEL_V1.stat().st_size
    assert_same_arrays(load_model(path).forest, model.forest)


def test_a_version_1_payload_of_any_forest_loads(two_site_forest):
    forest = two_site_forest[0]
    back = PooledForest.from_payload(v1_payload(forest), SENDER)
    assert_same_arrays(back, forest)


def test_version_1_trees_in_another_depth_first_order_are_renumbered_into_preorder():
    # children after their parent (version 1's rule) but breadth first: 0 -> (1, 2), 1 -> (3, 4)
    fields = {
        "feature_names": ["a", "b"],
        "categories": {},
        "classes": np.array([0, 1]),
        "owners": ["s"],
        "tree_start": np.array([0, 5]),
        "tree_owner": np.array([0]),
        "children_left": np.array([1, 3, -1, -1, -1]),
        "children_right": np.array([2, 4, -1, -1, -1]),
        "feature": np.array([0, 1, -1, -1, -1]),
        "threshold": np.array([0.5, -0.25, 0.0, 0.0, 0.0]),
        "n_node_samples": np.array([10, 6, 4, 2, 4]),
        "missing_left": np.array([True, False, False, False, False]),
        "saw_missing": np.zeros(5, bool),
        "value": np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [1.0, 0.0], [0.25, 0.75]]),
    }
    bfs = PooledForest(**fields)
    back = PooledForest.from_payload(v1_payload(bfs), SENDER)
    # preorder: 0, 1, 3, 4, 2
    assert back.children_left.tolist() == [1, 2, -1, -1, -1]
    assert back.children_right.tolist() == [4, 3, -1, -1, -1]
    assert back.n_node_samples.tolist() == [10, 6, 2, 4, 4]
    assert back.value[1:4].tolist() == [[0.5, 0.5], [1.0, 0.0], [0.25, 0.75]]
    assert assert_same_predictions(back, bfs) > 0


def test_meaningless_version_1_values_become_their_defaults(two_site_forest):
    forest = two_site_forest[0]
    payload = v1_payload(forest)
    leaf = payload["feature"] < 0
    payload["threshold"] = np.where(leaf, 7.5, payload["threshold"])  # leaves never compare
    payload["surrogate_threshold"] = np.full(forest.n_nodes, 2.0)  # no node has a surrogate
    payload["surrogate_agreement"] = np.full(forest.n_nodes, 0.5)
    back = PooledForest.from_payload(payload, SENDER)
    assert_same_arrays(back, forest)
    assert assert_same_predictions(back, forest, strategies=("fpv", "mp", "ss")) > 0


def _set(i, v):
    def f(a):
        a = a.copy()
        a[i] = v
        return a

    return f


@pytest.mark.parametrize(
    "key, fn, message",
    [
        ("children_left", _set(0, 10**6), "children_left"),
        ("children_left", _set(0, 0), "not after their parent"),
        ("children_right", lambda a: a.astype(np.float64), "children_right"),
        ("feature", _set(0, 99), "feature"),
        ("threshold", _set(0, np.nan), "threshold"),
        ("threshold", _set(0, -np.inf), "threshold"),
        ("value", lambda a: a * 2, "value"),
        ("value", lambda a: a[:, :1], "columns"),
        ("n_node_samples", _set(0, 0), "n_node_samples"),
        ("tree_start", lambda a: a[::-1], "tree_start"),
        ("tree_owner", _set(0, 7), "tree_owner"),
        ("missing_left", lambda a: a.astype(np.int32), "missing_left"),
        ("surrogate_feature", _set(0, 55), "surrogate_feature"),
        ("value", lambda a: a.astype(object), "object"),
        ("saw_missing", lambda a: a[:-1], "length"),
        ("leaf_bits", lambda a: np.zeros(3, np.uint8), "unknown fields ['leaf_bits']"),
    ],
)
def test_malformed_version_1_payloads_are_refused(two_site_forest, key, fn, message):
    payload = v1_payload(two_site_forest[0])
    payload[key] = fn(payload[key]) if key in payload else fn(None)
    with pytest.raises(PayloadError, match=re.escape(message)) as err:
        PooledForest.from_payload(payload, sender=SENDER)
    text = str(err.value)
    assert text.startswith(f"payload from {SENDER!r} refused: version 1 cannot be upgraded: ")


def test_version_1_cycles_and_shared_children_are_refused(two_site_forest):
    payload = v1_payload(two_site_forest[0])
    left, right = payload["children_left"], payload["children_right"]
    # the root's right child is its left child too
    with pytest.raises(PayloadError, match="several parents"):
        PooledForest.from_payload(dict(payload, children_right=_set(0, left[0])(right)), SENDER)
    # a child pointing back up (a cycle)
    node = np.flatnonzero(payload["feature"] >= 0)[1]
    with pytest.raises(PayloadError, match="not after their parent"):
        PooledForest.from_payload(dict(payload, children_left=_set(node, 0)(left)), SENDER)


def test_a_version_1_forest_inside_a_version_1_model_is_refused_naming_its_place(saved):
    bundle = dict(saved, forest=dict(saved["forest"], feature=saved["forest"]["feature"] + 50))
    with pytest.raises(PayloadError) as err:
        PooledModel.from_payload(bundle, SENDER)
    text = str(err.value)
    assert text.startswith(f"payload from {SENDER!r} refused: forest: version 1 cannot be upgraded")
    assert "field 'feature'" in text
