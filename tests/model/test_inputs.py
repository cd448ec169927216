"""The column rule (``model_columns``) and how long lists of names are told."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest.model.inputs import MAX_LISTED, model_columns, names_text


def test_names_are_cut_after_the_limit():
    names = [f"c{i}" for i in range(25)]
    assert names_text(names) == ", ".join(names[:MAX_LISTED]) + " and 5 more"
    assert names_text(names[:MAX_LISTED]) == ", ".join(names[:MAX_LISTED])
    assert names_text([]) == ""


def test_a_frame_is_matched_by_name_and_its_other_columns_are_named():
    frame = pd.DataFrame({"pid": [1, 2], "b": [0.5, 0.1], "a": [1.0, 2.0]})
    X, ignored = model_columns(frame, ["a", "b", "c"])
    assert list(X.columns) == ["b", "a"] and ignored == ["pid"]
    same, none = model_columns(frame[["a"]], ["a", "b"])
    assert none == [] and same is not None
    # with an intersection forest's names known too
    X, ignored = model_columns(frame, ["a"], known=["a", "pid"])
    assert list(X.columns) == ["pid", "a"] and ignored == ["b"]


def test_a_frame_without_a_feature_is_refused_naming_both_sides():
    frame = pd.DataFrame({"pid": [1], "site_code": [2]})
    with pytest.raises(ValueError, match="X has none of the model's features: it has pid, "):
        model_columns(frame, ["a", "b"])
    with pytest.raises(ValueError, match="it has no columns; the model expects some of a, b"):
        model_columns(pd.DataFrame(index=[0]), ["a", "b"])


@pytest.mark.parametrize("shape", [(3, 2), (3, 4), (3,), (2, 3, 1)])
def test_an_array_must_have_every_feature_in_order(shape):
    with pytest.raises(ValueError, match="one column per feature of the model, 3 \\(a, b, c\\)"):
        model_columns(np.zeros(shape), ["a", "b", "c"])
    X, ignored = model_columns(np.zeros((2, 3)), ["a", "b", "c"])
    assert X.shape == (2, 3) and ignored == []
