"""What a local selector reads (election/selector_inputs.py): tables and targets, checked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sksurv.util import Surv

from fedforest.election.selector_inputs import _numeric_target, _prepare, _survival_array
from fedforest.election.selectors import select_features


@pytest.fixture(scope="module")
def surv_table() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x": rng.normal(size=500), "cat": rng.integers(0, 3, size=500)})
    time = rng.exponential(np.exp(-X["x"].to_numpy()))
    return X, Surv.from_arrays(event=rng.random(500) < 0.7, time=time)


def test_a_survival_target_is_prepared_as_events_and_times(surv_table):
    X, y = surv_table
    data = _prepare(X, y, ["cat"], task="survival")
    assert data.survival and not data.regression and data.classes.size == 0
    assert data.y.dtype.names == ("event", "time")
    np.testing.assert_array_equal(data.y["event"], y["event"])
    np.testing.assert_array_equal(data.y["time"], y["time"])
    assert data.is_cat.tolist() == [False, True]
    # sksurv's own field names (here WHAS500's) are read by position
    whas = np.array([(True, 3.0), (False, 5.0)], dtype=[("fstat", bool), ("lenfol", "f8")])
    target = _survival_array(whas, "y")
    assert target.dtype.names == ("event", "time") and target["time"].tolist() == [3.0, 5.0]


def test_a_regression_target_is_numbers():
    assert _numeric_target([1, 2.5], "y").tolist() == [1.0, 2.5]
    with pytest.raises(ValueError, match="holds booleans"):
        _numeric_target([True, False], "y")


def _fields(event, time):
    """A survival array of fields ``e`` and ``t`` of the dtypes of ``event`` and ``time``."""
    out = np.empty(len(event), dtype=[("e", event.dtype), ("t", time.dtype)])
    out["e"], out["t"] = event, time
    return out


def _with_times(y, times):
    out = y.copy()
    out["time"] = times
    return out


@pytest.mark.parametrize(
    "make_y, match",
    [
        (lambda y: y["time"], r"y must be a survival target: a structured array"),
        (
            lambda y: _with_times(y, -y["time"]),
            r"y \(event field 'event', time field 'time'\): times must be finite and at least 0",
        ),
        (lambda y: _with_times(y, np.r_[np.nan, y["time"][1:]]), r"at least 0; found \[nan\]"),
        (lambda y: _with_times(y, np.r_[np.inf, y["time"][1:]]), r"at least 0; found \[inf\]"),
        (lambda y: _fields(np.zeros(len(y), bool), y["time"]), "has no event among its 500 rows"),
        (
            lambda y: _fields(y["event"].astype(int) * 2, y["time"]),
            r"event field 'e', time field 't'\): events must be 0/1 or booleans; found \[2",
        ),
        (lambda y: y[:-1], "y has 499 values but X has 500 rows"),
    ],
)
def test_invalid_survival_targets(surv_table, make_y, match):
    X, y = surv_table
    with pytest.raises(ValueError, match=match):
        select_features(X, make_y(y), "cox_univariate", task="survival")
