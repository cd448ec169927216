"""The global schema built from site descriptions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest import PayloadError
from fedforest.federation.schema import GlobalSchema, SchemaError, SiteSchema


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
