"""Compact encodings of single payload arrays: thresholds exact as float32 plus 8 bits."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.model import compact_arrays as ca

F32 = np.float32
F32_MAX = float(np.finfo(F32).max)
TINY = float(np.finfo(F32).smallest_subnormal)


# ------------------------------------------------------------------ thresholds
def _thresholds() -> np.ndarray:
    """Thresholds of every kind: float32 values, midpoints, values between two float32,
    huge, tiny, negative, signed zeros, beyond the float32 range, categorical ones."""
    rng = np.random.default_rng(0)
    a = rng.normal(scale=10.0 ** rng.integers(-6, 7, 2000), size=2000).astype(F32)
    b = np.nextafter(a, F32(np.inf))
    c = (a * F32(1.5)).astype(F32)
    midpoints = a.astype(np.float64) / 2 + b.astype(np.float64) / 2  # exactly between two
    far = a.astype(np.float64) / 2 + c.astype(np.float64) / 2  # scikit-learn's rule
    between = np.nextafter(a.astype(np.float64), np.inf)  # 1 float64 ulp above a float32
    special = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        -0.1,
        1 / 3,
        F32_MAX,
        -F32_MAX,
        np.nextafter(F32_MAX, np.inf),
        np.nextafter(-F32_MAX, -np.inf),
        1e39,
        -1e39,
        1e300,
        -1e300,
        TINY,
        -TINY,
        TINY / 2,
        1e-320,
        -1e-320,
        np.inf,
    ]
    categorical = [k + 0.5 for k in range(-1, 12)] + list(range(-1, 13))
    return np.concatenate(
        [a, midpoints, far, between, rng.normal(size=500) * 1e3, special, categorical]
    ).astype(np.float64)


@pytest.mark.filterwarnings("ignore:overflow encountered in nextafter")
def test_the_float32_floor_decides_every_comparison_of_a_float32_value():
    t = _thresholds()
    f = ca.float32_floor(t)
    assert f.dtype == F32
    assert np.all(f.astype(np.float64) <= t)
    # the largest such float32: the next one is above t
    up = np.nextafter(f, F32(np.inf)).astype(np.float64)
    assert np.all((up > t) | (f == F32_MAX) | np.isposinf(t))
    # every float32 near each threshold, and the special ones
    near = [f]
    for _ in range(3):
        near.append(np.nextafter(near[-1], F32(np.inf)))
        near.insert(0, np.nextafter(near[0], F32(-np.inf)))
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, F32_MAX, -F32_MAX, TINY, -TINY, 1.0, -1.0], F32
    )
    for x in [*near, *(np.full(t.shape, s, F32) for s in specials)]:
        # the engine compares float32 rows with float64 thresholds (numpy promotes x)
        np.testing.assert_array_equal(x <= t, x <= f)
        np.testing.assert_array_equal(x > t, x > f)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32).view(F32)
    for ti in rng.choice(t, size=40):
        fi = ca.float32_floor(np.array([ti]))[0]
        np.testing.assert_array_equal(x <= ti, x <= fi)


def test_float32_floor_edge_cases():
    cases = {
        0.0: 0.0,
        1.0: 1.0,  # exactly representable: itself
        0.1: float(np.nextafter(F32(0.1), F32(0))) if float(F32(0.1)) > 0.1 else float(F32(0.1)),
        1e300: F32_MAX,
        np.inf: np.inf,
        -1e300: -np.inf,  # no float32 is <= -1e300
        TINY / 2: 0.0,
        -TINY / 2: -TINY,
    }
    for t, expected in cases.items():
        assert ca.float32_floor(np.array([t]))[0] == F32(expected), t
    negzero = ca.float32_floor(np.array([-0.0]))[0]
    assert negzero == 0 and np.signbit(negzero)  # -0.0 stays -0.0
    assert np.isnan(ca.float32_floor(np.array([np.nan]))[0])


def test_thresholds_are_split_and_joined_bit_for_bit():
    t = np.concatenate([_thresholds(), [np.nan, -np.inf]])
    f32, fine, at, exact = ca.split_thresholds(t)
    assert f32.dtype == F32 and fine.dtype == np.uint8 and exact.dtype == np.float64
    joined = ca.join_thresholds(f32, fine)
    joined[at] = exact
    assert np.array_equal(joined.view(np.uint64), t.view(np.uint64))  # -0.0 and NaN too
    assert np.all(f32[at] == 0) and np.all(fine[at] == 0)
    # only what needs it is sent in full: float32 values, midpoints of two float32 values
    # (scikit-learn's thresholds) need no more; one float64 ulp above a float32 does
    assert np.all(at >= 3 * 2000)
    assert np.isin(np.arange(3 * 2000, 4 * 2000), at).all()
    sent = t[at]
    assert np.isnan(sent).any() and np.isneginf(sent).any() and 1e300 in sent


def test_categorical_thresholds_keep_their_level_codes():
    for k in range(1, 12):
        t = np.array([-1.0, *[c + 0.5 for c in range(-1, k)], *range(k + 1)], dtype=np.float64)
        f32, fine, at, _ = ca.split_thresholds(t)
        assert at.size == 0 and not fine.any()  # small halves are float32 values
        assert np.array_equal(f32.astype(np.float64), t)
        # and the floor never changes the code a rule computes from a threshold
        f = ca.float32_floor(t + 1e-9).astype(np.float64)
        assert np.array_equal(np.floor(np.clip(f, -1, k)), np.floor(np.clip(t + 1e-9, -1, k)))
