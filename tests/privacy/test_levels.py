"""Rare category levels (privacy/levels.py) and what a schema still discloses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.federation.schema import GlobalSchema, SiteSchema
from fedforest.privacy.audit import disclosed_rare_levels
from fedforest.privacy.levels import OTHER_LEVEL, hide_levels, hide_rare_levels, rare_levels


# ------------------------------------------------------------------ levels
def level_table():
    cat = ["x"] * 10 + ["y"] * 2 + ["z"] + [None] * 2
    code = [1.0] * 10 + [2.0] * 3 + [7.0] * 2
    return pd.DataFrame(
        {"ward": cat, "code": code, "age": np.arange(15.0), "label": ["r"] * 5 + ["s"] * 10}
    )


def test_rare_levels_are_sent_as_one_other_level():
    frame = level_table()
    hidden = rare_levels(frame, ["code", "label"], 3, target="label")
    assert hidden == {"ward": ["y", "z"], "code": ["7"]}
    assert rare_levels(frame, ["code"], 0, target="label") == {}
    out, hidden2 = hide_rare_levels(frame, ["code"], 3, target="label")
    assert hidden2 == hidden
    assert list(out["ward"][10:13]) == [OTHER_LEVEL] * 3 and out["ward"].isna().sum() == 2
    assert list(out["code"][13:]) == [OTHER_LEVEL] * 2 and out["code"][0] == "1"
    assert list(out["label"]) == list(frame["label"])  # the target is never touched
    schema = SiteSchema.from_frame("s1", out, "label", ["code"])
    assert schema.levels == {"code": ["1", "2", OTHER_LEVEL], "ward": [OTHER_LEVEL, "x"]}
    raw = SiteSchema.from_frame("s1", frame, "label", ["code"])
    assert disclosed_rare_levels(raw.levels, frame, 3) == {"code": ["7"], "ward": ["y", "z"]}
    assert disclosed_rare_levels(schema.levels, frame, 3) == {}
    # the rewritten table encodes with the global schema of two sites
    other_site = SiteSchema.from_frame("s2", frame, "label", ["code"])
    glob = GlobalSchema.build([schema, other_site])
    codes = glob.encode(out, ["ward", "code"])
    assert codes["ward"][11] == glob.categories["ward"].index(OTHER_LEVEL)
    # rows with a hidden level at a new table map the same way; NaN instead when asked
    assert hide_levels(frame, hidden, other=None)["ward"].isna().sum() == 5
    clash = frame.assign(ward=[OTHER_LEVEL] * 15)
    with pytest.raises(ValueError, match="already has a level"):
        hide_levels(clash, {"ward": ["x"]})
