"""The known ways a hostile or careless payload got through or crashed a receiver.

One test per failure, on real scikit-learn forests (``hostile.py``): required
fields sent as None, numpy arrays in place of strings, children with more
training rows than their parent, thresholds that break prediction, odd keys,
integer overflow, and model files that inflate or carry unknown entries.
"""

from __future__ import annotations

import copy
import io
import json
import re
import time
import zipfile
from collections.abc import Mapping

import numpy as np
import pandas as pd
import pytest

from fedforest import ImputerSet, PayloadError, PooledForest, PooledForestClassifier
from fedforest.model import forest_format
from fedforest.model.forest import NODE_FIELDS
from fedforest.model.imputers import Imputer
from fedforest.model.model_files import MAX_MODEL_BYTES, load_payload, save_payload
from fedforest.model.pooled_model import PooledModel, PredictionSettings, load_model
from fedforest.model.traversal import CompiledForest
from fedforest.prediction.cache import ForestCache
from fedforest.prediction.strategies import Strategy
from fedforest.rules import get as get_rule
from fedforest.validation import PayloadReader
from fedforest.vocabulary import STRATEGIES

from .hostile import (
    append_raw_entry,
    assert_valid_predictions,
    bundle,
    deflate_bomb,
    forest_payload,
    imputers_payload,
    npz_entries,
    parts,
    set_declared_size,
    write_zip,
)

SENDER = "site-3"
#: Fields of a pooled-forest payload (version 2).
FOREST_FIELDS = list(forest_format.PAYLOAD_FIELDS)


def refused(read, payload, *fragments: str) -> str:
    """``read(payload)`` raises PayloadError naming the sender and every fragment."""
    with pytest.raises(PayloadError) as info:
        read(payload)
    message = str(info.value)
    assert message.startswith(f"payload from {SENDER!r} refused: "), message
    for fragment in fragments:
        assert fragment in message, message
    return message


def read_forest(payload):
    return PooledForest.from_payload(payload, SENDER)


def forest_arrays(forest: PooledForest | None = None) -> dict:
    """The keyword arguments of ``PooledForest`` of ``forest`` (default: the real one)."""
    forest = parts()["forest"] if forest is None else forest
    keys = ("feature_names", "classes", "owners", "categories", "tree_start", "tree_owner")
    return {k: getattr(forest, k) for k in (*keys, "value", *NODE_FIELDS)}


def forest_with(**arrays) -> PooledForest:
    """The real forest with some arrays replaced, built without a reader."""
    fields = forest_arrays()
    fields.update({k: np.array(v, copy=True) for k, v in arrays.items()})
    return PooledForest(**fields)


def payload_with(**arrays) -> dict:
    """The payload a sender holding :func:`forest_with` sends."""
    return forest_with(**arrays).to_payload()


def read_imputers(payload):
    return ImputerSet.from_payload(payload, SENDER)


def read_bundle(payload):
    return PooledModel.from_payload(payload, SENDER)


def _entry(payload: dict, kind: str) -> dict:
    return next(item for item in payload["imputers"] if item["kind"] == kind)


# ------------------------------------------------------------------ None fields
@pytest.mark.parametrize(
    "field",
    FOREST_FIELDS,
)
def test_a_required_forest_field_sent_as_none_is_refused(field):
    payload = dict(forest_payload(), **{field: None})
    message = refused(read_forest, payload, f"field {field!r} is None; expected")
    assert "truth value" not in message


@pytest.mark.parametrize(
    "field", ["levels", "center", "scale", "intercept", "coef", "predictors", "n_levels"]
)
@pytest.mark.parametrize("kind", ["numeric", "categorical"])
def test_an_imputer_field_sent_as_none_is_refused(kind, field):
    payload = copy.deepcopy(imputers_payload())
    _entry(payload, kind)[field] = None
    refused(read_imputers, payload, "imputers[", f"field {field!r} is None; expected")


@pytest.mark.parametrize("part", ["forest", "intersection"])
def test_a_model_whose_forest_value_is_none_is_refused(part):
    payload = bundle()
    payload[part] = dict(payload[part], value=None)
    refused(read_bundle, payload, f"{part}: field 'value' is None; expected")


def test_read_array_never_returns_none_for_a_required_field():
    r = PayloadReader({"a": None}, None, SENDER)
    with pytest.raises(PayloadError, match="field 'a' is None"):
        r.read_array("a", "i")
    with pytest.raises(PayloadError, match="field 'b' is missing"):
        r.read_array("b", "i")
    # only an explicitly optional field may be None (or absent)
    assert r.read_array("a", "i", default=None) is None
    assert r.read_array("b", "i", default=None) is None


# ------------------------------------------------------------------ arrays in place of strings
ODD_STRINGS = [
    np.array("fedforest/pooled-forest"),
    np.array(["fedforest/pooled-forest"]),
    np.array(["fedforest/pooled-forest", "x"]),
    ["fedforest/pooled-forest"],
    None,
    b"fedforest/pooled-forest",
]


@pytest.mark.parametrize("value", ODD_STRINGS, ids=repr)
@pytest.mark.parametrize(
    "read, payload",
    [
        (read_forest, forest_payload),
        (read_imputers, imputers_payload),
        (read_bundle, bundle),
    ],
    ids=["forest", "imputers", "model"],
)
def test_a_format_that_is_not_a_string_is_refused(read, payload, value):
    message = refused(read, dict(payload(), format=value), "field 'format' is")
    assert "truth value" not in message


@pytest.mark.parametrize(
    "value",
    [np.array("numeric"), np.array(["numeric", "categorical"]), ["numeric"], 1, None, True],
    ids=repr,
)
@pytest.mark.parametrize("kind", ["numeric", "categorical"])
def test_an_imputer_kind_that_is_not_a_string_is_refused(kind, value):
    payload = copy.deepcopy(imputers_payload())
    _entry(payload, kind)["kind"] = value
    message = refused(read_imputers, payload, "field 'kind' is")
    assert "truth value" not in message


@pytest.mark.parametrize("field", ["feature", "owner"])
@pytest.mark.parametrize("value", [np.array("x2"), np.array(["x2"]), 3, ["x2"], ""], ids=repr)
def test_imputer_names_must_be_strings(field, value):
    payload = copy.deepcopy(imputers_payload())
    payload["imputers"][0][field] = value
    refused(read_imputers, payload, f"field {field!r} is")


@pytest.mark.parametrize(
    "value", [np.array([1]), np.array(1), True, 1.0, 2**70, -1, "1", None], ids=repr
)
def test_a_version_that_is_not_a_positive_integer_is_refused(value):
    refused(read_forest, dict(forest_payload(), version=value), "version")


@pytest.mark.parametrize(
    "field, value, fragment",
    [
        ("feature_names", ["x0", 1, "x2"], "field 'feature_names'"),
        ("feature_names", [["x0"], "x1"], "field 'feature_names'"),
        ("feature_names", np.array([["x0", "x1"]]), "field 'feature_names'"),
        ("owners", [None], "field 'owners'"),
        ("categories", {"c": ["low", 1, "high"]}, "categories['c']"),
        ("categories", {"c": "low"}, "categories['c']"),
        ("categories", {"c": []}, "categories['c']"),
        ("categories", {"c": ["x"] * 10_001}, "categories['c']"),
        ("categories", {1: ["a"]}, "field 'categories'"),
        ("categories", [["c", ["low"]]], "field 'categories'"),
        ("classes", [0, True], "field 'classes'"),
        ("classes", [0, 2**70], "field 'classes'"),
        ("classes", [0, "1"], "field 'classes'"),
        ("classes", np.array([0, 1]), "field 'classes'"),
        ("classes", [[0], [1]], "field 'classes'"),
    ],
)
def test_lists_and_dicts_holding_the_wrong_things_are_refused(field, value, fragment):
    refused(read_forest, dict(forest_payload(), **{field: value}), fragment)


# ------------------------------------------------------------------ keys
class _Unreadable(Mapping):
    def __getitem__(self, key):
        raise RuntimeError("boom")

    def __iter__(self):
        raise RuntimeError("boom")

    def __len__(self):
        return 1


@pytest.mark.parametrize("key", [1, None, ("a",), 2.5, b"format", frozenset()], ids=repr)
def test_keys_that_are_not_strings_are_refused(key):
    payload = dict(forest_payload())
    payload[key] = 1
    refused(read_forest, payload, "field names must be strings")
    payload = copy.deepcopy(imputers_payload())
    payload["imputers"][0][key] = 1
    refused(read_imputers, payload, "imputers[0]", "field names must be strings")


def test_a_mapping_that_cannot_be_read_is_refused():
    refused(read_forest, _Unreadable(), "its items cannot be read")
    refused(read_bundle, dict(bundle(), settings=_Unreadable()), "field 'settings'")


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        np.bool_(True),
        2**70,
        10**400,
        -(10**400),
        float("nan"),
        float("inf"),
        np.array([1, 2]),
        np.array(1.5),
        "1",
        [1],
        {"a": 1},
        {1: 2},
        object(),
        np.array([None], dtype=object),
        np.arange(3, dtype=np.uint64) + np.uint64(2**63),
        np.zeros((2, 2)),
        _Unreadable(),
    ],
    ids=lambda value: re.sub(r" at 0x[0-9a-f]+", "", repr(value)),  # the same ids in every process
)
def test_the_reader_raises_nothing_but_payload_error(value):
    r = PayloadReader({"v": value}, None, SENDER)
    readers = [
        lambda: r.read_array("v", "i"),
        lambda: r.read_array("v", "f", ndim=2, width=2, lo=0, hi=1),
        lambda: r.read_array("v", "b", length=2),
        lambda: r.read_array("v", "U"),
        lambda: r.read_integer("v", 0, 10),
        lambda: r.read_number("v", 0, 10),
        lambda: r.read_boolean("v"),
        lambda: r.read_string("v"),
        lambda: r.read_choice("v", ("numeric", "categorical")),
        lambda: r.read_str_list("v", 10),
        lambda: r.read_labels("v", 10),
        lambda: r.read_mapping("v"),
        lambda: PayloadReader(value, "fedforest/pooled-forest", SENDER),
        lambda: PayloadReader({"format": value, "version": 1}, "fedforest/imputers", SENDER),
        lambda: PayloadReader(
            {"format": "fedforest/imputers", "version": value}, "fedforest/imputers", SENDER
        ),
    ]
    for read in readers:
        try:
            read()
        except PayloadError as err:
            assert SENDER in str(err)


# ------------------------------------------------------------------ sizes and overflow
def test_tree_start_that_wraps_around_in_int64_is_refused():
    payload = forest_payload()
    n = int(payload["tree_start"][-1])
    bad = np.array([0, 9 * 10**18, -9 * 10**18, n], dtype=np.int64)
    refused(read_forest, dict(payload, tree_start=bad), "field 'tree_start'")


@pytest.mark.parametrize("field", ["feature", "tree_owner", "leaf_samples", "leaf_counts"])
def test_unsigned_integers_beyond_int64_are_refused(field):
    payload = forest_payload()
    bad = payload[field].astype(np.uint64)
    bad.reshape(-1)[0] = np.uint64(2**64 - 1)
    refused(read_forest, dict(payload, **{field: bad}), f"field {field!r}")


def test_n_node_samples_beyond_int32_are_refused():
    payload = forest_payload()
    n = payload["leaf_samples"].astype(np.int64)
    n[:] = 2**40  # would wrap around when the forest is sent on as int32
    refused(read_forest, dict(payload, leaf_samples=n), "field 'leaf_samples'")
    # and internal nodes whose sum of children would
    n[:] = 2**30
    refused(read_forest, dict(payload, leaf_samples=n), "n_node_samples outside [1, 2147483647]")


def test_leaf_counts_whose_total_is_too_large_or_zero_are_refused():
    payload = forest_payload()
    counts = payload["leaf_counts"].astype(np.int64)
    counts[0] = 2**30  # each within range, the total (2**31) is not
    refused(read_forest, dict(payload, leaf_counts=counts), "total count in [1, 2147483647]")
    counts[0] = 0
    refused(read_forest, dict(payload, leaf_counts=counts), "total count")


def test_owners_shorter_than_the_tree_owner_indices_are_refused():
    payload = forest_payload()
    assert payload["owners"] == ["site-a", "site-b"]
    refused(read_forest, dict(payload, owners=["site-a"]), "field 'tree_owner'")


@pytest.mark.parametrize("field", ["n_levels", "n_train"])
@pytest.mark.parametrize("value", [-1, 2**63, 10**400, True, 1.5, np.int64(-5)], ids=repr)
def test_imputer_sizes_that_are_huge_negative_or_not_integers_are_refused(field, value):
    payload = copy.deepcopy(imputers_payload())
    _entry(payload, "categorical")[field] = value
    refused(read_imputers, payload, f"field {field!r}")


# ------------------------------------------------------------------ what would break prediction
def _child_larger_than_parent():
    forest = parts()["forest"]
    n = forest.n_node_samples.copy()
    n[forest.children_left[0]] = n[0] + 5
    return n


def test_a_child_with_more_rows_than_its_parent_is_refused():
    bad = payload_with(n_node_samples=_child_larger_than_parent())
    assert bad["samples_delta"].size  # sent as a difference from the sum of the children
    refused(read_forest, bad, "field 'n_node_samples'", "more training rows than its parent")


def test_children_need_not_add_up_to_their_parent():
    n = parts()["forest"].n_node_samples.copy()
    n[0] += 10  # the children now hold fewer rows than the root: accepted
    forest = read_forest(payload_with(n_node_samples=n))
    assert forest.n_node_samples[0] == n[0]
    assert_valid_predictions(forest, parts()["imputers"], parts()["feature_std"])


def test_right_fraction_is_clipped_even_for_a_forest_built_without_a_reader():
    forest = forest_with(n_node_samples=_child_larger_than_parent())  # no validation
    cf = CompiledForest.build(forest)
    assert cf.right_fraction.min() >= 0 and cf.right_fraction.max() <= 1
    X = parts()["X"].iloc[:40][["x0", "x3"]]
    for strategy in ("pr", "mp"):
        proba = PooledForestClassifier(forest, strategy=strategy, random_state=0).predict_proba(X)
        assert np.isfinite(proba).all() and (proba >= 0).all()
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)


@pytest.mark.parametrize(
    "change, fragment",
    [
        (lambda v, internal: v.__setitem__((internal, 0), -0.25), "field 'value'"),
        (lambda v, internal: v.__setitem__((internal, 1), 7.0), "field 'value'"),
        (lambda v, internal: v.__setitem__((internal, 0), np.nan), "field 'value'"),
        (lambda v, internal: v.__setitem__((internal, 0), np.inf), "field 'value'"),
        # in range but not a distribution: the node strategy predicts with internal rows
        (lambda v, internal: v.__setitem__(internal, [1.0, 1.0]), "internal nodes alike"),
        (lambda v, internal: v.__setitem__(internal, [0.0, 0.0]), "internal nodes alike"),
    ],
    ids=["negative", "above-one", "nan", "inf", "sum-two", "sum-zero"],
)
def test_internal_node_distributions_are_checked_too(change, fragment):
    forest = parts()["forest"]
    internal = int(np.flatnonzero(forest.feature >= 0)[0])
    value = forest.value.copy()
    change(value, internal)
    payload = payload_with(value=value)
    assert payload["value_trees"].tolist() == [0]  # not counts: sent as float64
    refused(read_forest, payload, fragment)


def test_leaf_distributions_must_sum_to_one():
    forest = parts()["forest"]
    leaf = int(np.flatnonzero(forest.feature < 0)[0])
    value = forest.value.copy()
    value[leaf] = [0.5, 0.49]
    refused(read_forest, payload_with(value=value), "summing to 1")


def _categorical_node() -> int:
    forest = parts()["forest"]
    c = forest.feature_names.index("c")
    nodes = np.flatnonzero((forest.feature == c) & ~forest.saw_missing)
    assert nodes.size
    return int(nodes[0])


def _with_threshold(node: int, threshold: float) -> np.ndarray:
    thr = parts()["forest"].threshold.copy()
    thr[node] = threshold
    return thr


@pytest.mark.parametrize("threshold", [1e300, -1e300, 3.5, -1.5])
def test_thresholds_of_categorical_features_outside_the_levels_are_refused(threshold):
    payload = payload_with(threshold=_with_threshold(_categorical_node(), threshold))
    refused(read_forest, payload, "categorical features outside [-1, K]")


@pytest.mark.parametrize("threshold", [-1.0, -0.5, 2.5, 3.0])
def test_degenerate_categorical_thresholds_predict_valid_probabilities(threshold):
    forest = read_forest(payload_with(threshold=_with_threshold(_categorical_node(), threshold)))
    assert_valid_predictions(forest, parts()["imputers"], parts()["feature_std"])


def test_a_categorical_threshold_far_outside_the_levels_still_predicts_in_range():
    """The engine clips before casting to int (a forest built without a reader)."""
    node = _categorical_node()
    p = parts()
    X = p["X"].iloc[:30][["x0", "x1", "x3"]]  # 'c' absent: its imputer decides
    for threshold, expected_right in ((1e300, 0.0), (-1e300, 1.0)):
        forest = forest_with(threshold=_with_threshold(node, threshold))
        for strategy in ("ipr", "mp"):
            clf = PooledForestClassifier(
                forest, strategy, p["imputers"], p["feature_std"], random_state=0
            )
            proba = clf.predict_proba(X)
            assert np.isfinite(proba).all() and (proba >= 0).all() and (proba <= 1).all()
        # every level code is <= 1e300 (all go left) and none is <= -1e300 (all go right)
        c = forest.feature_names.index("c")
        Xg = np.full((1, forest.n_features), np.nan, np.float32)
        imputed = Xg.copy()
        imputed[0, c] = 1.0
        level_cdf = {c: np.array([[0.2, 0.7, 1.0]])}
        sigma = np.ones(forest.n_features)
        rules = Strategy(
            get_rule("ipr").routing,
            forest,
            CompiledForest.build(forest),
            Xg,
            imputed,
            level_cdf,
            sigma,
            0,
            np.random.default_rng(0),
            ForestCache(),
        )
        assert rules.right_probability(np.array([node]), np.array([0])).tolist() == [expected_right]


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_surrogate_thresholds_are_refused(value):
    payload = forest_payload()
    st = payload["surrogate_threshold"].copy()
    st[int(np.flatnonzero(payload["surrogate_feature"] >= 0)[0])] = value
    refused(read_forest, dict(payload, surrogate_threshold=st), "field 'surrogate_threshold'")


@pytest.mark.parametrize("field", ["coef", "intercept", "scale"])
def test_imputer_numbers_no_fit_gives_are_refused(field):
    payload = copy.deepcopy(imputers_payload())
    item = payload["imputers"][0]
    item[field] = np.full_like(item[field], 1e-300 if field == "scale" else 1e300)
    refused(read_imputers, payload, f"'{field}'", "expected")


def test_extreme_imputer_coefficients_predict_valid_probabilities():
    # numbers no payload reader accepts, built in memory: predictions stay valid all the same
    imputers = ImputerSet(
        Imputer(
            **{
                **vars(imp),
                "coef": np.full_like(imp.coef, 1e300),
                "intercept": np.full_like(imp.intercept, -1e300),
                "scale": np.full_like(imp.scale, 1e-300),
            }
        )
        for imp in read_imputers(imputers_payload()).values()
    )
    p = parts()
    tiny_std = {k: 1e-320 for k in p["feature_std"]}  # 1 / sigma overflows
    for std in (p["feature_std"], tiny_std):
        assert assert_valid_predictions(p["forest"], imputers, std) == 2 * len(STRATEGIES)


def test_an_imputer_whose_kind_contradicts_the_forest_is_not_used():
    p = parts()
    numeric_c = Imputer(
        feature="c",
        kind="numeric",
        predictors=["x0"],
        intercept=np.zeros(1),
        coef=np.ones(1),
        center=np.zeros(1),
        scale=np.ones(1),
    )
    imputers = ImputerSet([numeric_c])
    assert_valid_predictions(p["forest"], imputers, p["feature_std"])
    # and a model bundle carrying it is refused
    payload = bundle()
    payload["imputers"] = imputers.to_payload()
    refused(read_bundle, payload, "imputer for 'c' is numeric")


def test_a_model_whose_imputer_levels_differ_from_the_forest_is_refused():
    payload = bundle()
    payload["imputers"] = copy.deepcopy(payload["imputers"])
    _entry(payload["imputers"], "categorical")["n_levels"] = 7
    refused(read_bundle, payload, "imputer for 'c' is categorical with 7 levels")


def test_a_model_without_the_std_of_an_imputed_numeric_feature_is_refused():
    payload = bundle()
    payload["feature_std"] = {k: v for k, v in payload["feature_std"].items() if k != "x2"}
    refused(read_bundle, payload, "field 'feature_std' has no entry for 'x2'")


@pytest.mark.parametrize(
    "settings, fragment",
    [
        ({"depth_threshold": -1}, "settings.depth_threshold"),
        ({"depth_threshold": True}, "settings.depth_threshold"),
        ({"depth_threshold": 2.0}, "settings.depth_threshold"),
        ({"voting": "loud"}, "settings.voting"),
        ({"voting": np.array("soft")}, "settings.voting"),
        ({"seed": 2**40}, "settings.seed"),
        ({"seed": -1}, "settings.seed"),
        ({"seed": "0"}, "settings.seed"),
        ({"surprise": 1}, "unknown settings"),
        ([("seed", 0)], "field 'settings'"),
    ],
)
def test_model_settings_are_validated(settings, fragment):
    refused(read_bundle, dict(bundle(), settings=settings), fragment)


def test_valid_model_settings_are_kept():
    model = read_bundle(dict(bundle(), settings={"seed": None, "voting": "hard"}))
    assert model.settings == PredictionSettings(seed=None, voting="hard")


# ------------------------------------------------------------------ model files
@pytest.fixture()
def model_file(tmp_path):
    return save_payload(tmp_path / "model.npz", bundle())


def test_the_default_limit_is_two_gib():
    assert MAX_MODEL_BYTES == 2 * 1024**3


def test_an_npz_that_inflates_to_three_gb_is_refused_before_decompressing(model_file):
    local, central = deflate_bomb("a999.npy", 3 * 2**30)
    data = append_raw_entry(model_file.read_bytes(), local, central)
    assert len(data) < 4 * 2**20  # a 4 MB file ...
    with zipfile.ZipFile(io.BytesIO(data)) as zf:  # ... that declares 3 GB
        assert sum(i.file_size for i in zf.infolist()) > 3 * 2**30
    model_file.write_bytes(data)
    start = time.perf_counter()
    with pytest.raises(PayloadError) as info:
        load_model(model_file)
    assert time.perf_counter() - start < 2.0  # nothing was inflated
    message = str(info.value)
    assert str(model_file) in message
    assert "more than the limit of 2147483648 bytes" in message
    assert "refused before decompressing anything" in message


def test_an_entry_that_inflates_beyond_its_declared_size_is_cut_at_that_size(tmp_path):
    """The declared sizes bound what is inflated, whatever the compressed stream holds."""
    structure = io.BytesIO()
    np.lib.format.write_array(structure, np.array(json.dumps({"x": {"__array__": "a0"}})))
    data = write_zip([("__structure__.npy", structure.getvalue())])
    local, central = deflate_bomb("a0.npy", 3 * 2**30, declared=4096)  # 3 GB claiming 4 KB
    path = tmp_path / "cut.npz"
    path.write_bytes(append_raw_entry(data, local, central))
    start = time.perf_counter()
    try:
        payload = load_payload(path, max_bytes=1 << 20)
    except PayloadError as err:  # a zip library that checks the whole stream refuses it
        assert str(path) in str(err)
    else:
        assert payload["x"].dtype == np.uint8 and payload["x"].nbytes < 4096
    assert time.perf_counter() - start < 2.0  # the 3 GB were never inflated


def test_model_files_are_compressed_and_the_limit_counts_uncompressed_bytes(model_file):
    with zipfile.ZipFile(model_file) as zf:
        infos = zf.infolist()
    assert {info.compress_type for info in infos} == {zipfile.ZIP_DEFLATED}
    inflated = sum(info.file_size for info in infos)
    assert model_file.stat().st_size < inflated
    # a limit between the file's size and its inflated size refuses it
    with pytest.raises(PayloadError, match="uncompressed, more than the limit"):
        load_model(model_file, max_bytes=model_file.stat().st_size)


def test_the_size_limit_is_a_parameter(model_file):
    size = sum(len(blob) for _, blob in npz_entries(model_file))
    assert load_model(model_file, max_bytes=size).forest.n_trees == 8
    with pytest.raises(PayloadError, match=f"declare {size} bytes .* limit of {size - 1} bytes"):
        load_model(model_file, max_bytes=size - 1)
    with pytest.raises(ValueError, match="max_bytes"):
        load_payload(model_file, max_bytes=-1)


@pytest.mark.parametrize("name", ["a999.npy", "readme.txt", "a01.npy", "../a0.npy", "x/"])
def test_unknown_entries_are_refused_naming_the_entry_and_the_file(model_file, name):
    entries = npz_entries(model_file)
    model_file.write_bytes(write_zip([*entries, (name, entries[1][1])]))
    with pytest.raises(PayloadError) as info:
        load_model(model_file)
    message = str(info.value)
    assert str(model_file) in message and f"unknown entry {name!r}" in message


def test_a_duplicate_entry_is_refused(model_file):
    entries = npz_entries(model_file)
    model_file.write_bytes(write_zip([*entries, entries[2]]))
    with pytest.raises(PayloadError, match=f"entry {entries[2][0]!r} appears twice"):
        load_model(model_file)


@pytest.mark.parametrize("delta", [1, -1, 10**6])
def test_an_entry_whose_declared_size_differs_from_its_header_is_refused(model_file, delta):
    entries = npz_entries(model_file)
    i = next(i for i, (name, _) in enumerate(entries) if name != "__structure__.npy")
    data = set_declared_size(model_file.read_bytes(), i, len(entries[i][1]) + delta)
    model_file.write_bytes(data)
    with pytest.raises(PayloadError) as info:
        load_model(model_file)
    message = str(info.value)
    assert str(model_file) in message and f"entry {entries[i][0]!r}" in message
    if delta > 0:  # (a shorter declared size may already fail the entry's CRC check)
        assert "declares" in message and "its header describes" in message


def test_an_object_array_entry_is_refused_without_unpickling(model_file):
    entries = npz_entries(model_file)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    entries[1] = (entries[1][0], buf.getvalue())
    model_file.write_bytes(write_zip(entries))
    with pytest.raises(PayloadError, match="needs pickle to load; refused"):
        load_model(model_file)


def test_a_structure_nested_too_deeply_is_refused(tmp_path):
    path = tmp_path / "deep.npz"
    np.savez(path, __structure__=np.array("[" * 200_000 + "]" * 200_000))
    with pytest.raises(PayloadError) as info:
        load_payload(path)
    assert str(path) in str(info.value)


def test_a_structure_that_is_not_a_string_is_refused(tmp_path):
    path = tmp_path / "meta.npz"
    np.savez(path, __structure__=np.arange(3))
    with pytest.raises(PayloadError, match="structure entry is not a string"):
        load_payload(path)


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.999])
def test_a_truncated_file_is_refused(model_file, cut):
    data = model_file.read_bytes()
    model_file.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(PayloadError, match="model.npz"):
        load_model(model_file)


def test_a_tampered_model_file_is_refused_naming_the_field(model_file, tmp_path):
    payload = bundle()
    payload["forest"] = dict(payload["forest"], leaf_samples=None)
    path = save_payload(tmp_path / "tampered.npz", payload)
    with pytest.raises(PayloadError) as info:
        load_model(path)
    message = str(info.value)
    assert message.startswith(f"payload from {str(path)!r} refused: forest: ")
    assert "field 'leaf_samples' is None" in message


def test_a_json_structure_with_huge_numbers_is_refused(tmp_path):
    structure = json.loads(json.dumps({"format": "fedforest/model", "version": 1}))
    text = json.dumps(structure).replace("1}", "1" + "0" * 5000 + "}")
    path = tmp_path / "huge.npz"
    np.savez(path, __structure__=np.array(text))
    with pytest.raises(PayloadError):
        load_model(path)


def test_a_frame_with_every_column_absent_but_one_still_predicts():
    p = parts()
    X = pd.DataFrame({"x1": p["X"]["x1"].iloc[:10].to_numpy()})
    for strategy in STRATEGIES:
        clf = PooledForestClassifier(
            p["forest"], strategy, p["imputers"], p["feature_std"], site="site-a", guess_weight=0.3
        )
        proba = clf.predict_proba(X)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
