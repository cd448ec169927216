"""A table in a site's own words made the model's input (``federation/model_input.py``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.errors import SchemaError


# ------------------------------------------------ the model's input from a table in the site's words
def test_model_input_drops_renames_hides_and_encodes():
    from fedforest.federation.model_input import model_input
    from fedforest.model.site_inputs import SiteInputs

    rows = pd.DataFrame(
        {
            "pid": ["007", "008", "009"],
            "glucose_mg_dl": [90, 140, None],
            "smoker": ["never", "occasionally", "current"],
            "note": ["a", "b", "c"],
        }
    )
    inputs = SiteInputs(
        "site-2",
        "outcome",
        renames={"glucose_mg_dl": "glucose"},
        drop_columns=("pid",),
        hidden_levels={"smoker": ("occasionally",)},
    )
    levels = {"smoker": ["(other)", "current", "never"]}
    done = model_input(rows, inputs, ["age", "glucose", "smoker"], levels)
    assert list(done.X.columns) == ["glucose", "smoker"]
    assert done.X["smoker"].tolist() == [2.0, 0.0, 1.0]  # the hidden level is "(other)"
    assert np.isnan(done.X["glucose"].iloc[2]) and done.X["glucose"].dtype == float
    assert done.renamed == {"glucose_mg_dl": "glucose"} and done.dropped == ["pid"]
    assert done.ignored == ["note"] and done.absent == ["age"]
    # a rename given here wins for the same column and extends the others
    again = model_input(rows, inputs, ["glucose", "pid"], levels, {"pid": "pid", "note": "age"})
    assert again.dropped == [] and again.renamed == {"glucose_mg_dl": "glucose", "note": "age"}


def test_model_input_refuses_what_it_cannot_read_naming_the_column():
    from fedforest.federation.model_input import model_input
    from fedforest.model.site_inputs import SiteInputs

    inputs = SiteInputs("s", "y", renames={"glu": "glucose"}, hidden_levels={"c": ("z",)})
    both = pd.DataFrame({"glu": [1.0], "glucose": [2.0]})
    with pytest.raises(ValueError, match="column 'glu' is renamed to 'glucose', but the table"):
        model_input(both, inputs, ["glucose"], {})
    text = pd.DataFrame({"glu": ["1.5", "high"]})
    with pytest.raises(
        SchemaError, match=r"column 'glu' \(renamed to 'glucose'\) holds text such as \['high'\]"
    ):
        model_input(text, inputs, ["glucose"], {})
    unknown = pd.DataFrame({"c": ["a", "q"]})
    with pytest.raises(SchemaError, match=r"column 'c' has levels \['q'\] not in the schema's"):
        model_input(unknown, inputs, ["c"], {"c": ["(other)", "a"]})
    grouped = pd.DataFrame({"c": ["(other)", "z"]})
    with pytest.raises(ValueError, match="groups its rare levels under that name"):
        model_input(grouped, inputs, ["c"], {"c": ["(other)", "a"]})


def test_site_inputs_are_the_sites_yaml_rules(tmp_path):
    from fedforest.federation.config import SiteConfig
    from fedforest.federation.model_input import site_inputs

    config = SiteConfig.from_dict(
        {
            "site": "site-2",
            "data_path": "d.csv",
            "target": "outcome",
            "renames": {"glucose_mg_dl": "glucose"},
            "drop_columns": ["pid"],
            "label_map": {"no": 0, "yes": 1},
            "categorical": ["stage"],
        },
        source="site-2.yaml",
    )
    inputs = site_inputs(config, {"stage": ["4"], "empty": []}, np.array([0, 1]))
    assert inputs.renames == {"glucose_mg_dl": "glucose"} and inputs.drop_columns == ("pid",)
    assert inputs.label_map == (("no", 0), ("yes", 1)) and inputs.categorical == ("stage",)
    assert inputs.hidden_levels == {"stage": ("4",)} and inputs.positive_class == 1
    assert site_inputs(config, {}, [0, 1, 2]).positive_class is None
