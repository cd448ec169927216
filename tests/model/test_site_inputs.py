"""A site's input mapping (``inputs`` of a saved model): round trip, inverse labels, refusals."""

from __future__ import annotations

import pytest

from fedforest.errors import PayloadError
from fedforest.model.site_inputs import SiteInputs
from fedforest.validation import PayloadReader

INPUTS = SiteInputs(
    "site-2",
    "outcome",
    renames={"glucose_mg_dl": "glucose", "years": "age"},
    drop_columns=("pid",),
    categorical=("stage",),
    label_map=(("no", 0), ("yes", 1)),
    hidden_levels={"smoker": ("occasionally",)},
    positive_class=1,
)


def read(payload, forest):
    return SiteInputs.read(PayloadReader(payload, None, "model.npz", "inputs"), forest)


def test_the_mapping_round_trips(two_site_forest):
    forest, _, _ = two_site_forest
    back = read(INPUTS.to_payload(), forest)
    assert back == INPUTS
    assert back.local_name("glucose") == "glucose_mg_dl" and back.local_name("x0") == "x0"
    assert back.local_labels(forest.classes) == ["no", "yes"]


def test_local_labels_invert_the_label_map():
    merged = SiteInputs("s", "y", label_map=(("a", 0), ("b", 0), ("c", 1)))
    assert merged.local_labels([0, 1, 2]) == ["a or b", "c", 2]
    # a class no entry maps onto keeps its label, told apart when it reads like another
    shifted = SiteInputs("s", "y", label_map=((1, 0),))
    assert shifted.local_labels([0, 1]) == [1, "1 (model class 1)"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("site", "", "field 'site' is ''"),
        ("site", 3, "field 'site' is 3"),
        ("target", " outcome", "without surrounding spaces"),
        ("target", "x0", "a feature of the forest"),
        ("renames", {"a": "g", "b": "g"}, "maps several columns onto \\['g'\\]"),
        ("renames", {"a": 5}, "renames.a"),
        ("renames", [["a", "b"]], "field 'renames'"),
        ("drop_columns", ["pid", "pid"], "drop_columns"),
        ("drop_columns", ["years"], "which 'renames' renames"),
        ("categorical", "stage", "categorical"),
        ("label_map", {"no": 0}, "\\[local, global\\] pairs"),
        ("label_map", [["no"]], "label_map\\[0\\]"),
        ("label_map", [["no", True]], "label_map\\[0\\]"),
        ("label_map", [["no", "0"]], "not a class of the forest"),
        ("label_map", [["no", 2**70]], "an integer label in \\[-9223372036854775808"),
        ("label_map", [["no", 0], ["no", 1]], "a second time"),
        ("hidden_levels", {"smoker": [""]}, "hidden_levels.smoker"),
        ("hidden_levels", {"smoker": "rare"}, "hidden_levels.smoker"),
        ("positive_class", 0, "the forest's second class"),
        ("positive_class", "1", "the forest's second class"),
        ("positive_class", None, "the forest's second class"),
        ("extra", 1, "unknown fields \\['extra'\\]"),
    ],
)
def test_an_edited_mapping_is_refused_naming_the_field(two_site_forest, field, value, message):
    forest, _, _ = two_site_forest
    payload = {**INPUTS.to_payload(), field: value}
    with pytest.raises(PayloadError, match=message) as err:
        read(payload, forest)
    assert "model.npz" in str(err.value) and "inputs" in str(err.value)


def test_a_missing_field_is_refused(two_site_forest):
    forest, _, _ = two_site_forest
    payload = INPUTS.to_payload()
    del payload["label_map"]
    with pytest.raises(PayloadError, match="field 'label_map' is missing"):
        read(payload, forest)


def test_regression_trees_take_no_labels(table):
    from sklearn.ensemble import RandomForestRegressor

    from fedforest import PooledForest

    X, y = table
    rf = RandomForestRegressor(n_estimators=3, random_state=0).fit(X, X["x0"])
    forest = PooledForest.from_sklearn(rf, list(X.columns), owner="a")
    plain = SiteInputs("a", "days")
    assert read(plain.to_payload(), forest) == plain
    with pytest.raises(PayloadError, match="must be empty for regression trees"):
        read({**plain.to_payload(), "label_map": [["a", 1]]}, forest)
    with pytest.raises(PayloadError, match="expected null"):
        read({**plain.to_payload(), "positive_class": 1}, forest)
