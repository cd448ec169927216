"""A fitted calibration map: prior, sigmoid and isotonic, and its payload."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from fedforest.model.calibrator import ISOTONIC_TIE_BREAK, Calibrator

BINARY = np.array([0, 1])


def test_none_and_prior():
    proba = np.array([[0.5, 0.5], [0.2, 0.8]])
    assert np.array_equal(Calibrator("none", BINARY).transform(proba), proba)
    prior = Calibrator("prior", BINARY, {"ratio": np.array([0.5, 1.5])})
    got = prior.transform(proba)
    assert np.allclose(got[0], [0.25, 0.75])
    assert np.allclose(got.sum(axis=1), 1.0) and got[1, 1] > 0.8
    zeroed = Calibrator("prior", BINARY, {"ratio": np.array([0.0, 1.0])})
    assert np.array_equal(zeroed.transform(np.array([[1.0, 0.0]])), [[1.0, 0.0]])


def test_a_binary_calibrator_maps_the_second_class_and_completes_the_first():
    proba = np.array([[0.9, 0.1], [0.4, 0.6]])
    sigmoid = Calibrator("sigmoid", BINARY, {"a": np.array([-2.0]), "b": np.array([0.5])})
    got = sigmoid.transform(proba)
    assert np.allclose(got.sum(axis=1), 1.0)
    assert np.all((got >= 0) & (got <= 1))
    assert np.allclose(got[:, 1], expit(2.0 * proba[:, 1] - 0.5))  # Platt: 1 / (1 + e^(a p + b))
    iso = Calibrator(
        "isotonic",
        BINARY,
        {"x": np.array([0.0, 1.0]), "y": np.array([0.2, 0.7]), "offsets": np.array([0, 2])},
    )
    assert np.allclose(iso.transform(proba)[:, 1], [0.25, 0.5])


def test_the_payload_round_trips():
    cal = Calibrator("sigmoid", BINARY, {"a": np.array([-2.0]), "b": np.array([0.5])})
    back = Calibrator.from_payload(cal.to_payload(), BINARY)
    assert back.method == "sigmoid"
    proba = np.array([[0.3, 0.7]])
    assert np.array_equal(back.transform(proba), cal.transform(proba))


@pytest.mark.parametrize(
    "payload",
    [
        "prior",
        {"method": "prior"},
        {"method": "prior", "params": {"ratio": np.array([np.nan, 1.0])}},
        {"method": "sigmoid", "params": {"a": np.array([1.0, 2.0]), "b": np.array([0.0])}},
    ],
)
def test_a_malformed_payload_is_refused(payload):
    with pytest.raises(ValueError, match="calibrator"):
        Calibrator.from_payload(payload, BINARY)


def test_sigmoid_parameters_read_as_platt_scaling():
    cal = Calibrator("sigmoid", BINARY, {"a": np.array([-2.0]), "b": np.array([0.5])})
    p = cal.transform(np.array([[0.4, 0.6]]))[0, 1]
    assert p == pytest.approx(1.0 / (1.0 + np.exp(-2.0 * 0.6 + 0.5)))


STEPS = {"x": np.array([0.0, 0.5, 0.5, 1.0]), "y": np.array([0.2, 0.2, 0.7, 0.7])}


def test_an_isotonic_file_without_a_tie_break_maps_by_its_steps_as_written():
    old = {"method": "isotonic", "params": {**STEPS, "offsets": np.array([0, 4])}}
    proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.2, 0.8]])
    steps = Calibrator.from_payload(old, BINARY).transform(proba)[:, 1]
    assert np.array_equal(steps, [0.2, 0.2, 0.7, 0.7])  # tied on each step
    new = {**old, "params": {**old["params"], "tie_break": np.array([ISOTONIC_TIE_BREAK])}}
    cal = Calibrator.from_payload(new, BINARY)
    broken = cal.transform(proba)[:, 1]
    assert np.all(np.diff(broken) > 0) and np.abs(broken - steps).max() <= ISOTONIC_TIE_BREAK
    back = Calibrator.from_payload(cal.to_payload(), BINARY)
    assert np.array_equal(back.transform(proba), cal.transform(proba))


@pytest.mark.parametrize(
    "tie_break, shown",
    [
        (np.array([-1e-6]), "[-1e-06]"),
        (np.array([0.5]), "[0.5]"),
        (np.array([1e-6, 1e-6]), "[1e-06, 1e-06]"),
        (np.array([np.inf]), None),
    ],
)
def test_a_tie_break_a_fit_cannot_give_is_refused(tie_break, shown):
    params = {**STEPS, "offsets": np.array([0, 4]), "tie_break": tie_break}
    with pytest.raises(ValueError, match="calibrator.params.tie_break") as raised:
        Calibrator.from_payload({"method": "isotonic", "params": params}, BINARY)
    if shown is not None:
        assert shown in str(raised.value) and "[0, 0.001]" in str(raised.value)


def test_only_an_isotonic_calibrator_takes_a_tie_break():
    params = {"a": np.array([-2.0]), "b": np.array([0.5]), "tie_break": np.array([1e-6])}
    with pytest.raises(ValueError, match="a sigmoid calibrator has \\['a', 'b'\\], expected"):
        Calibrator.from_payload({"method": "sigmoid", "params": params}, BINARY)
