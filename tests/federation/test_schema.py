"""The global schema built from site descriptions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest import PayloadError
from fedforest.federation.schema import GlobalSchema, SchemaError, SiteSchema, lacking_classes
from fedforest.model.payload_checks import MAX_LEVELS


def frames():
    a = pd.DataFrame(
        {
            "age": [50, 60, 70, 80],
            "sex": ["f", "m", "f", "m"],
            "hba1c": [5.1, 6.2, np.nan, 7.0],
            "y": [0, 1, 0, 1],
        }
    )
    b = pd.DataFrame(
        {"age": [40, 45, 50], "sex": ["m", "m", "x"], "stage": [1, 2, 3], "y": [1, 0, 1]}
    )
    return a, b


def test_build_unions_features_and_codes_levels_globally():
    a, b = frames()
    sa = SiteSchema.from_frame("a", a, "y")
    sb = SiteSchema.from_frame("b", b, "y", categorical=["stage"])
    assert sa.kinds == {"age": "numeric", "sex": "categorical", "hba1c": "numeric"}
    assert sa.levels == {"sex": ["f", "m"]} and sa.classes == [0, 1] and sa.n_rows == 4
    schema = GlobalSchema.build([sa, sb])
    assert schema.features == ["age", "hba1c", "sex", "stage"]
    assert schema.categories == {"sex": ["f", "m", "x"], "stage": ["1", "2", "3"]}
    assert schema.shared == ["age", "sex"]
    assert schema.classes == [0, 1]
    assert schema.site_columns == {"a": ["age", "hba1c", "sex"], "b": ["age", "sex", "stage"]}
    enc = schema.encode(b)
    assert enc["sex"].tolist() == [1.0, 1.0, 2.0] and enc["stage"].tolist() == [0.0, 1.0, 2.0]
    enc_a = schema.encode(a)
    assert np.isnan(enc_a["hba1c"][2]) and enc_a["sex"].tolist() == [0.0, 1.0, 0.0, 1.0]


def test_contradictions_name_the_site_and_column():
    a, b = frames()
    b = b.assign(hba1c=["low", "high", "low"])
    with pytest.raises(SchemaError, match="'hba1c' is categorical at site 'b' but numeric"):
        GlobalSchema.build([SiteSchema.from_frame("a", a, "y"), SiteSchema.from_frame("b", b, "y")])
    c = b.drop(columns="hba1c").assign(y=["p", "q", "p"])
    with pytest.raises(SchemaError, match="class labels"):
        GlobalSchema.build([SiteSchema.from_frame("a", a, "y"), SiteSchema.from_frame("c", c, "y")])
    with pytest.raises(SchemaError, match="duplicate site"):
        GlobalSchema.build([SiteSchema.from_frame("a", a, "y")] * 2)


def test_bad_tables():
    a, _ = frames()
    with pytest.raises(SchemaError, match="target column 'outcome'"):
        SiteSchema.from_frame("a", a, "outcome")
    with pytest.raises(SchemaError, match="missing values"):
        SiteSchema.from_frame("a", a.assign(y=[0, np.nan, 1, 0]), "y")
    with pytest.raises(SchemaError, match="categorical columns"):
        SiteSchema.from_frame("a", a, "y", categorical=["nope"])
    schema = GlobalSchema.build([SiteSchema.from_frame("a", a, "y")])
    with pytest.raises(SchemaError, match="levels"):
        schema.encode(a.assign(sex=["f", "m", "q", "f"]))


def test_payload_round_trips_and_refusals():
    a, b = frames()
    sa = SiteSchema.from_frame("a", a, "y")
    back = SiteSchema.from_payload(sa.to_payload(), sender="a")
    assert back == sa
    schema = GlobalSchema.build([sa, SiteSchema.from_frame("b", b, "y")])
    assert GlobalSchema.from_payload(schema.to_payload()) == schema
    bad = dict(sa.to_payload(), kinds=["numeric", "text", "numeric"])
    with pytest.raises(PayloadError, match="kinds"):
        SiteSchema.from_payload(bad, sender="a")
    bad = dict(sa.to_payload(), levels={"age": ["1"]})
    with pytest.raises(PayloadError, match="levels"):
        SiteSchema.from_payload(bad, sender="a")


# --------------------------------------------------------------------------- class labels
def site(name, classes, columns=("age",), **kw) -> SiteSchema:
    columns = list(columns)
    return SiteSchema(name, columns, dict.fromkeys(columns, "numeric"), classes=classes, **kw)


def test_labels_differing_only_by_case_are_refused_with_a_label_map_fix():
    with pytest.raises(SchemaError) as info:
        GlobalSchema.build(
            [site("a", ["no", "yes"]), site("b", ["No", "Yes"]), site("c", ["no", "yes "])]
        )
    msg = str(info.value)
    assert msg.startswith(
        "class labels differ only by case, spaces, invisible characters or Unicode form"
    )
    assert "'No' at 'b', 'no' at 'a'" in msg and "'Yes' at 'b', 'yes' at 'a', 'yes ' at 'c'" in msg
    assert "(per site: a: ['no', 'yes']; b: ['No', 'Yes']; c: ['no', 'yes '])" in msg
    assert (
        "allowed: one spelling per class label at every site: map the labels with label_map" in msg
    )
    assert "site 'b': {'No': 'no', 'Yes': 'yes'}; site 'c': {'yes ': 'yes'}" in msg


def test_a_coding_difference_is_refused_naming_both_sites():
    with pytest.raises(SchemaError) as info:
        GlobalSchema.build([site("a", [0, 1]), site("b", [1, 2])])
    msg = str(info.value)
    assert "sites 'a' (labels [0, 1]) and 'b' (labels [1, 2]) have class labels that differ" in msg
    assert "('a' lacks [2], 'b' lacks [0]): a coding difference such as 0/1 against 1/2" in msg
    assert "allowed: label sets of which one contains the other (a site may lack a class)" in msg
    assert "label_map: {local label: global label}" in msg


def test_disjoint_labels_are_refused():
    with pytest.raises(SchemaError) as info:
        GlobalSchema.build([site("a", ["neg", "pos"]), site("b", ["alive", "dead"])])
    msg = str(info.value)
    assert "sites 'a' (labels ['neg', 'pos']) and 'b' (labels ['alive', 'dead'])" in msg
    assert "have no class label in common" in msg and "label_map" in msg


def test_a_site_lacking_a_class_is_allowed_and_named():
    sites = [site("a", [0, 1, 2]), site("b", [0, 1]), site("c", [1, 2])]
    with pytest.raises(SchemaError, match="'b' .* and 'c' "):  # b and c: neither contains the other
        GlobalSchema.build(sites)
    sites = sites[:2]
    schema = GlobalSchema.build(sites)
    assert schema.classes == [0, 1, 2]
    assert lacking_classes(sites) == {"b": [2]}
    assert lacking_classes([sites[0]]) == {}
    # the versioned payload holds no per-site classes
    assert set(schema.to_payload()) == {
        "format",
        "version",
        "features",
        "categories",
        "classes",
        "shared",
        "site_columns",
        "site_rows",
        "times",
    }


# --------------------------------------------------------------------------- names and levels
def test_column_names_differing_only_by_case_are_refused():
    with pytest.raises(SchemaError) as info:
        GlobalSchema.build([site("a", [0, 1], ["age", "bmi"]), site("b", [0, 1], ["Age", "bmi"])])
    msg = str(info.value)
    assert msg.startswith(
        "column names differ only by case, spaces, invisible characters or Unicode form"
    )
    assert "'Age' at 'b', 'age' at 'a'" in msg and "renames" in msg


def test_levels_differing_only_by_case_are_refused():
    a = SiteSchema("a", ["smoker"], {"smoker": "categorical"}, {"smoker": ["never", "yes"]}, [0, 1])
    b = SiteSchema("b", ["smoker"], {"smoker": "categorical"}, {"smoker": ["Never", "yes"]}, [0, 1])
    with pytest.raises(SchemaError) as info:
        GlobalSchema.build([a, b])
    msg = str(info.value)
    assert "levels of categorical column 'smoker' differ only by case" in msg
    assert "'Never' at 'b', 'never' at 'a'" in msg


def test_the_union_of_levels_is_limited_to_max_levels():
    half = MAX_LEVELS // 2 + 1
    a = SiteSchema(
        "a",
        ["code", "age"],
        {"code": "categorical", "age": "numeric"},
        {"code": [f"a{i}" for i in range(half)]},
        [0, 1],
    )
    b = SiteSchema(
        "b",
        ["code", "age"],
        {"code": "categorical", "age": "numeric"},
        {"code": [f"b{i}" for i in range(half)]},
        [0, 1],
    )
    GlobalSchema.build([a])  # each site alone is within the limit
    with pytest.raises(SchemaError) as info:
        GlobalSchema.build([a, b])
    msg = str(info.value)
    assert f"categorical column 'code' has {2 * half} distinct levels over all sites" in msg
    assert f"(a: {half}, b: {half}), more than MAX_LEVELS = {MAX_LEVELS}" in msg
    assert f"allowed: at most {MAX_LEVELS} levels" in msg and "drop_columns" in msg


def test_a_text_column_with_too_many_levels_is_refused_when_described():
    frame = pd.DataFrame(
        {"note": [f"n{i}" for i in range(MAX_LEVELS + 1)], "y": [0, 1] * (MAX_LEVELS // 2) + [0]}
    )
    with pytest.raises(SchemaError) as info:
        SiteSchema.from_frame("a", frame, "y")
    msg = str(info.value)
    assert f"column 'note' has {MAX_LEVELS + 1} distinct values, more than MAX_LEVELS" in msg
    assert "free text or an identifier" in msg


@pytest.mark.parametrize(
    ("values", "hint"),
    [
        (["True", "False"], "'False' is a boolean, not a number"),
        (["2024-01-02", "2024-01-03"], "is a date, not a number"),
        (["22,5", "23,5"], "decimal comma"),
        (["never", "former"], ""),
    ],
)
def test_a_column_of_two_kinds_names_the_values_read_as_text_and_what_they_look_like(values, hint):
    numbers = pd.DataFrame({"x": np.linspace(0, 1, 10), "y": [0, 1] * 5})
    words = pd.DataFrame({"x": values * 5, "y": [0, 1] * 5})
    sites = [SiteSchema.from_frame("a", numbers, "y"), SiteSchema.from_frame("b", words, "y")]
    with pytest.raises(SchemaError) as info:
        GlobalSchema.build(sites)
    text = str(info.value)
    assert "column 'x' is categorical at site 'b' but numeric at site 'a'" in text
    assert f"(its values at 'b': {', '.join(map(repr, sorted(values)))}" in text and hint in text
    assert "allowed: one kind at every site" in text
