"""Payload and model files: .npz without pickle, validated on load."""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fedforest import ImputerSet, PayloadError, PooledForest, PooledForestClassifier, fit_imputers
from fedforest.model.model_files import load_payload, save_payload
from fedforest.model.pooled_model import (
    MODEL_FORMAT,
    PooledModel,
    PredictionSettings,
    load_model,
)


# --------------------------------------------------------------------------- payloads
def nested_payload() -> dict:
    return {
        "ints": np.arange(5, dtype=np.int64),
        "int32": np.array([[1, -2], [3, 4]], dtype=np.int32),
        "uints": np.array([7, 8], dtype=np.uint8),
        "floats": np.array([0.5, -1.25, np.nan, np.inf]),
        "bools": np.array([True, False, True]),
        "strs": np.array(["age", "glucose", "é"]),
        "empty": np.zeros(0),
        "scalar": np.array(3.5),
        "nested": {"deeper": {"codes": np.array([2, 1, 0]), "name": "smoker"}, "n": 3},
        "items": [
            {"feature": "bmi", "coef": np.array([1.0, 2.0]), "score": 0.75},
            {"feature": "ldl", "coef": np.zeros(2), "score": None},
            [1, "two", 3.0, True, None],
        ],
        "plain": {"int": 42, "float": 2.5, "str": "text", "bool": False, "none": None},
        "numpy_scalars": [np.float64(1.25), np.int32(7), np.bool_(True), np.str_("x")],
        "tuple": (1, 2),
        "none": None,
    }


def assert_same(loaded, original) -> None:
    if isinstance(original, np.ndarray):
        assert isinstance(loaded, np.ndarray)
        assert loaded.dtype == original.dtype and loaded.shape == original.shape
        np.testing.assert_array_equal(loaded, original)
    elif isinstance(original, dict):
        assert isinstance(loaded, dict) and list(loaded) == [str(k) for k in original]
        for k, v in original.items():
            assert_same(loaded[str(k)], v)
    elif isinstance(original, (list, tuple)):
        assert isinstance(loaded, list) and len(loaded) == len(original)
        for a, b in zip(loaded, original, strict=True):
            assert_same(a, b)
    elif isinstance(original, np.generic):
        assert type(loaded) is type(original.item()) and loaded == original.item()
    else:
        assert type(loaded) is type(original) and loaded == original


def test_round_trip_of_a_nested_payload(tmp_path):
    payload = nested_payload()
    path = save_payload(tmp_path / "payload.npz", payload)
    assert path == tmp_path / "payload.npz" and path.is_file()
    loaded = load_payload(path)
    assert_same(loaded, payload)
    assert loaded["none"] is None and loaded["items"][1]["score"] is None
    assert isinstance(loaded["tuple"], list)  # tuples come back as lists


def test_the_file_is_a_plain_npz_without_object_arrays(tmp_path):
    path = save_payload(tmp_path / "p", nested_payload())
    with np.load(path, allow_pickle=False) as data:
        for name in data.files:
            assert data[name].dtype.kind in "iufbU"
        structure = json.loads(str(data["__structure__"]))
    assert structure["plain"] == {
        "int": 42,
        "float": 2.5,
        "str": "text",
        "bool": False,
        "none": None,
    }


@pytest.mark.parametrize(
    ("given", "expected"),
    [("model", "model.npz"), ("model.npz", "model.npz"), ("model.v1", "model.v1.npz")],
)
def test_npz_suffix_added(tmp_path, given, expected):
    path = save_payload(tmp_path / given, {"x": np.ones(2)})
    assert path == tmp_path / expected and path.is_file()
    np.testing.assert_array_equal(load_payload(path)["x"], np.ones(2))


def test_parent_folders_are_created(tmp_path):
    path = save_payload(tmp_path / "a" / "b" / "c", {"x": 1})
    assert path == tmp_path / "a" / "b" / "c.npz" and load_payload(path) == {"x": 1}


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"x": np.array([{"a": 1}], dtype=object)}, "payload.x"),
        ({"items": [{"ok": 1}, {"bad": np.array([None, 1])}]}, "payload.items[1].bad"),
        ({"x": np.array(["a", 1], dtype=object)}, "payload.x"),
        ({"c": np.array([1 + 2j])}, "payload.c"),
    ],
)
def test_object_and_other_arrays_refused_on_save(tmp_path, payload, where):
    with pytest.raises(TypeError, match="cannot be saved") as info:
        save_payload(tmp_path / "bad", payload)
    assert str(info.value).startswith(where)
    assert not (tmp_path / "bad.npz").exists()


@pytest.mark.parametrize("value", [{1, 2}, pd.DataFrame({"a": [1]}), RandomForestClassifier()])
def test_non_payload_values_refused_on_save(tmp_path, value):
    with pytest.raises(TypeError, match="payload.v: values of type .* cannot be saved"):
        save_payload(tmp_path / "bad", {"v": value})


def test_hand_written_npz_with_an_object_array_refused_on_load(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(
        path,
        __structure__=np.array(json.dumps({"x": {"__array__": "a0"}})),
        a0=np.array([{"code": "os.system"}], dtype=object),
    )
    with pytest.raises(PayloadError, match="pickle") as info:
        load_payload(path)
    assert str(path) in str(info.value)


class _Marker:
    """Unpickling this object would create a file: proof that code ran."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_a_pickle_file_is_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "code-ran"
    path = tmp_path / "model.npz"
    path.write_bytes(pickle.dumps({"forest": _Marker(marker)}))
    with pytest.raises(PayloadError, match="pickle"):
        load_payload(path)
    with pytest.raises(PayloadError, match="pickle"):
        load_model(path)
    assert not marker.exists()


def test_random_file_refused(tmp_path):
    path = tmp_path / "random.npz"
    path.write_bytes(np.random.default_rng(0).bytes(512))
    with pytest.raises(PayloadError) as info:
        load_payload(path)
    assert str(path) in str(info.value)


def test_a_zip_that_is_not_an_npz_refused(tmp_path):
    import zipfile

    path = tmp_path / "archive.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(PayloadError):
        load_payload(path)


def test_npy_file_refused(tmp_path):
    path = tmp_path / "array.npy"
    np.save(path, np.arange(3))
    with pytest.raises(PayloadError, match="not a fedforest payload file"):
        load_payload(path)


def test_npz_without_structure_refused(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, a0=np.arange(3))
    with pytest.raises(PayloadError, match="no structure entry"):
        load_payload(path)


@pytest.mark.parametrize(
    ("structure", "match"),
    [
        ("not json {", "not valid JSON"),
        (json.dumps({"x": {"__array__": "a7"}}), "entry 'a7' is missing"),
        (json.dumps({"x": {"__array__": ["a0"]}}), r"entry \['a0'\] is missing"),
    ],
)
def test_npz_with_a_broken_structure_refused(tmp_path, structure, match):
    path = tmp_path / "broken.npz"
    np.savez(path, __structure__=np.array(structure), a0=np.arange(3))
    with pytest.raises(PayloadError, match=match):
        load_payload(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_payload(tmp_path / "absent.npz")


# --------------------------------------------------------------------------- model bundles
COLS_A = ["x0", "x1", "x2", "c"]
COLS_B = ["x0", "x1", "x4", "x5"]
SHARED = ["x0", "x1"]
LEVELS = ["low", "mid", "high"]


@pytest.fixture(scope="module")
def parts():
    """Two sites with different columns (one categorical), pooled; imputers; intersection."""
    rng = np.random.RandomState(0)
    n = 600
    X = pd.DataFrame(rng.normal(size=(n, 5)), columns=["x0", "x1", "x2", "x4", "x5"])
    X["c"] = np.digitize(X["x0"] + rng.normal(scale=0.5, size=n), [-0.5, 0.5]).astype(float)
    y = ((X["x0"] + 0.8 * X["x2"] - 0.6 * X["x4"] + 0.3 * X["c"]) > 0).astype(int).to_numpy()
    X.loc[rng.rand(n) < 0.05, "x2"] = np.nan  # a few missing values seen in training
    a, b = slice(0, 300), slice(300, 600)
    cats = {"c": LEVELS}
    forests, inters, imputers = [], [], []
    for owner, rows, cols, seed in (("site-a", a, COLS_A, 1), ("site-b", b, COLS_B, 2)):
        Xs = X.iloc[rows][cols]
        own_cats = {k: v for k, v in cats.items() if k in cols}
        rf = RandomForestClassifier(n_estimators=12, max_depth=6, random_state=seed)
        rf.fit(Xs.to_numpy(np.float32), y[rows])
        forests.append(PooledForest.from_sklearn(rf, cols, owner, X=Xs, categories=own_cats))
        ri = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=seed)
        ri.fit(Xs[SHARED].to_numpy(np.float32), y[rows])
        inters.append(PooledForest.from_sklearn(ri, SHARED, owner))
        private = [c for c in cols if c not in SHARED]
        imputers.append(
            fit_imputers(Xs, private, SHARED, categories=own_cats, owner=owner, random_state=0)
        )
    forest = PooledForest.concat(forests)
    selected = ImputerSet.select(imputers)
    std = {c: float(X[c].std()) for c in ["x0", "x1", "x2", "x4", "x5"]}
    return {
        "forest": forest,
        "imputers": selected,
        "feature_std": std,
        "intersection": PooledForest.concat(inters),
        "X": X,
        "y": y,
    }


def bundle_of(parts, **changes) -> dict:
    bundle = PooledModel(
        parts["forest"],
        parts["imputers"],
        parts["feature_std"],
        parts["intersection"],
        PredictionSettings(depth_threshold=2, voting="soft", seed=0),
    ).to_payload()
    bundle.update(changes)
    return bundle


def test_bundle_parts_are_real(parts):
    assert parts["forest"].owners == ["site-a", "site-b"]
    assert set(parts["imputers"]) == {"x2", "c", "x4", "x5"}
    assert parts["imputers"]["c"].kind == "categorical" and parts["imputers"]["c"].n_levels == 3
    assert parts["forest"].categories == {"c": LEVELS}


@pytest.mark.parametrize("strategy", ["fpv", "pr", "mi", "ipr", "mp", "ss", "park", "local"])
def test_model_round_trip_gives_the_same_predictions(tmp_path, parts, strategy):
    path = save_payload(tmp_path / "pooled_model", bundle_of(parts))
    assert path.name == "pooled_model.npz"
    loaded = load_model(path)
    assert isinstance(loaded, PooledModel)
    assert [f.name for f in dataclasses.fields(loaded)] == [
        "forest",
        "imputers",
        "feature_std",
        "intersection",
        "settings",
        "deployment",
    ]
    # a model bundled outside a job: nothing chosen, nor any site's input mapping
    assert loaded.deployment is None
    assert loaded.settings == PredictionSettings(depth_threshold=2, voting="soft", seed=0)
    assert loaded.feature_std == parts["feature_std"]
    assert loaded.forest.owners == ["site-a", "site-b"]
    assert loaded.imputers.features == parts["imputers"].features

    X = parts["X"].iloc[450:][COLS_B]  # site-b's rows: no x2, no c
    kwargs = dict(strategy=strategy, depth_threshold=2, site="site-b", random_state=3)
    original = PooledForestClassifier(
        parts["forest"], imputers=parts["imputers"], feature_std=parts["feature_std"], **kwargs
    )
    rebuilt = PooledForestClassifier(
        loaded.forest, imputers=loaded.imputers, feature_std=loaded.feature_std, **kwargs
    )
    expected = original.predict_proba(X)
    np.testing.assert_array_equal(rebuilt.predict_proba(X), expected)
    np.testing.assert_array_equal(rebuilt.predict(X), original.predict(X))
    assert expected.shape == (len(X), 2)


def test_loaded_forest_arrays_equal_the_originals(tmp_path, parts):
    loaded = load_model(save_payload(tmp_path / "m", bundle_of(parts)))
    for name, before in (("forest", parts["forest"]), ("intersection", parts["intersection"])):
        a, b = before.to_payload(), getattr(loaded, name).to_payload()
        assert set(a) == set(b)
        for key, value in a.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(b[key], value)
                assert b[key].dtype == value.dtype
            else:
                assert b[key] == value
    assert loaded.imputers.to_payload()["imputers"][0]["feature"] == "x2"


def test_intersection_predictions_survive_the_round_trip(tmp_path, parts):
    loaded = load_model(save_payload(tmp_path / "m", bundle_of(parts)))
    X = parts["X"].iloc[:100][SHARED]
    a = PooledForestClassifier(parts["intersection"], strategy="fpv").predict_proba(X)
    b = PooledForestClassifier(loaded.intersection, strategy="fpv").predict_proba(X)
    np.testing.assert_array_equal(a, b)


def test_bundle_without_imputers_or_intersection(tmp_path, parts):
    bundle = PooledModel(parts["forest"]).to_payload()
    loaded = load_model(save_payload(tmp_path / "m", bundle))
    assert loaded.imputers is None and loaded.intersection is None
    assert loaded.feature_std == {} and loaded.settings == PredictionSettings()
    assert bundle["settings"] == {}


@pytest.mark.parametrize(
    "std",
    [
        {"x0": -1.0},
        {"x0": float("nan")},
        {"x0": float("inf")},
        {"x0": "wide"},
        {"x0": None},
        [1.0, 2.0],
    ],
    ids=["negative", "nan", "inf", "string", "none", "list"],
)
def test_bundle_with_bad_feature_std_refused(tmp_path, parts, std):
    bad = bundle_of(parts, feature_std=std)
    with pytest.raises(PayloadError, match="feature_std"):
        PooledModel.from_payload(bad)
    # written without validation (as a tampered file would be): refused on load, naming the file
    path = save_payload(tmp_path / "tampered", bad)
    with pytest.raises(PayloadError, match="feature_std") as info:
        load_model(path)
    assert str(path) in str(info.value)


def test_bundle_with_a_tampered_tree_refused_on_load(tmp_path, parts):
    bundle = bundle_of(parts)
    forest = dict(bundle["forest"])
    forest["leaf_bits"] = forest["leaf_bits"].copy()
    forest["leaf_bits"][0] ^= 0x80  # the first root becomes a leaf: tree 0 closes too early
    path = save_payload(tmp_path / "tampered", {**bundle, "forest": forest})
    with pytest.raises(PayloadError, match="leaf_bits") as info:
        load_model(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"format": "fedforest/forest"}, "format"),
        ({"version": 99}, "version 99 is not supported"),
        ({"extra": 1}, "unknown fields"),
        ({"settings": [1]}, "settings"),
        ({"imputers": {"format": "fedforest/imputers", "version": 1, "imputers": 3}}, "imputers"),
    ],
)
def test_malformed_bundles_refused(parts, changes, match):
    with pytest.raises(PayloadError, match=match):
        PooledModel.from_payload(bundle_of(parts, **changes), sender="peer")


def test_bundle_format_tag():
    assert MODEL_FORMAT == "fedforest/model"


# ------------------------------------------------------------ version 2 model files
MODEL_V2 = Path(__file__).resolve().parent / "data" / "model_v2.npz"


def test_a_version_2_model_file_still_loads_without_an_input_mapping():
    """``data/model_v2.npz``: a site's model as fedforest wrote it before ``inputs``
    (``data/make_model_v2.py``)."""
    raw = load_payload(MODEL_V2)
    assert raw["version"] == 2 and "inputs" not in raw and raw["deployment"]["site"] == "site-a"
    model = load_model(MODEL_V2)
    assert model.deployment.inputs is None
    assert model.deployment.strategy == "mp"
    assert model.deployment.calibrator.method == "sigmoid"
    assert model.settings.owner_weights == {"site-a": 150.0, "site-b": 150.0}
    PooledModel.from_payload(raw, sender="model_v2.npz")
    assert "inputs" not in raw and raw["version"] == 2  # the payload read is left as it was
