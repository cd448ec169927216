"""Compact encodings of single payload arrays, lossless.

* integers in the smallest dtype that holds them (:func:`compact_ints`);
* flags packed eight to a byte (:func:`pack_bits`, :func:`read_bits`);
* float64 thresholds as the largest float32 not above them plus an 8-bit
  refinement (:func:`split_thresholds`, :func:`join_thresholds`), exact for
  every threshold but a rare few, which are sent as float64.

The readers (``read_*``) check a field's dtype, shape and range through a
:class:`~fedforest.validation.PayloadReader` before using it. The pooled-forest
payload (:mod:`fedforest.model.forest_format`) is written with these.
"""

from __future__ import annotations

import numpy as np

from ..validation import PayloadReader

#: ``threshold_fine`` counts steps of this fraction of a float32 spacing.
FINE_STEPS = 256


# ---------------------------------------------------------------- integers and bits
def smallest_int_dtype(values) -> np.dtype:
    """The smallest integer dtype holding every value (unsigned when none is negative).

    Examples
    --------
    >>> smallest_int_dtype([0, 255]), smallest_int_dtype([-1, 300]), smallest_int_dtype([])
    (dtype('uint8'), dtype('int16'), dtype('uint8'))
    """
    values = np.asarray(values)
    if values.size == 0:
        return np.dtype(np.uint8)
    lo, hi = int(values.min()), int(values.max())
    kinds = (np.uint8, np.uint16, np.uint32, np.uint64)
    if lo < 0:
        kinds = (np.int8, np.int16, np.int32, np.int64)
    for dtype in kinds:
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return np.dtype(dtype)
    raise ValueError(f"integers in [{lo}, {hi}] do not fit in 64 bits")


def compact_ints(values) -> np.ndarray:
    """``values`` in :func:`smallest_int_dtype` (a new array)."""
    values = np.asarray(values)
    return values.astype(smallest_int_dtype(values))


def pack_bits(flags) -> np.ndarray:
    """Booleans packed eight to a byte, first flag in the highest bit (``numpy.packbits``)."""
    return np.packbits(np.asarray(flags, dtype=bool).reshape(-1))


def read_bits(r: PayloadReader, key: str, n: int) -> np.ndarray:
    """Field ``key``: ``n`` flags packed by :func:`pack_bits`, as a bool array.

    The field must be a 1-d uint8 array of exactly ``ceil(n / 8)`` bytes whose
    padding bits (after the ``n``-th) are 0.
    """
    value = r.get(key)
    n_bytes = (n + 7) // 8
    if (
        not isinstance(value, np.ndarray)
        or isinstance(value, np.ma.MaskedArray)
        or value.dtype != np.uint8
        or value.ndim != 1
        or value.shape[0] != n_bytes
    ):
        r.refuse(
            key, value, f"a uint8 array of {n_bytes} bytes ({n} flags packed by numpy.packbits)"
        )
    bits = np.unpackbits(np.asarray(value).view(np.ndarray))
    if bits[n:].any():
        r.fail(
            f"field {key!r} has padding bits set after its {n} flags; expected 0 there "
            "(numpy.packbits pads with 0)"
        )
    return bits[:n].astype(bool)


def read_positions(r: PayloadReader, key: str, size: int) -> np.ndarray:
    """Field ``key``: distinct positions in ``[0, size)``, strictly increasing."""
    at = r.read_array(key, "i", max_len=size, lo=0, hi=size - 1)
    if at.size > 1 and np.any(np.diff(at) <= 0):
        r.fail(f"field {key!r} must hold strictly increasing positions")
    return at


# ---------------------------------------------------------------- thresholds
def float32_floor(t) -> np.ndarray:
    """The largest float32 not above each value (``-inf`` where there is none).

    For every float32 ``x`` (NaN and infinities included), ``x <= t`` holds
    exactly when ``x <= float32_floor(t)``: if ``x <= f`` then ``x <= f <= t``;
    if ``x <= t``, ``x`` is a float32 not above ``t``, so not above the largest
    one. NaN stays NaN.

    Examples
    --------
    >>> float(float32_floor(0.1)[()]) <= 0.1 < float(np.nextafter(np.float32(0.1), 1))
    True
    """
    t = np.asarray(t, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.asarray(t.astype(np.float32))
        above = f.astype(np.float64) > t
    if above.any():
        with np.errstate(over="ignore"):  # inf -> FLT_MAX
            f[above] = np.nextafter(f[above], np.float32(-np.inf))
    return f


def join_thresholds(f32: np.ndarray, fine: np.ndarray) -> np.ndarray:
    """Float64 thresholds ``f + fine * (next float32 after f - f) / 256`` (``f`` where fine is 0).

    Every step is exact in float64: the spacing of two adjacent float32 values
    is a power of two, and ``f`` plus at most 8 more bits below its last bit
    needs at most 32 significant bits.
    """
    f64 = f32.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        step = (np.nextafter(f32, np.float32(np.inf)).astype(np.float64) - f64) / FINE_STEPS
        return np.where(fine == 0, f64, f64 + fine * step)


def split_thresholds(t) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Float64 thresholds as (float32 floor, fine steps, positions sent exactly, their values).

    ``join_thresholds(f32, fine)`` gives back every threshold bit for bit
    except at the returned positions, whose thresholds (those that need more
    than 8 bits below the float32's last bit, lie beyond the float32 range, or
    are NaN or -inf) are returned as float64; their float32 and fine entries
    are 0.
    """
    t = np.asarray(t, dtype=np.float64)
    f32 = float32_floor(t)
    f64 = f32.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        step = (np.nextafter(f32, np.float32(np.inf)).astype(np.float64) - f64) / FINE_STEPS
        q = (t - f64) / step
    ok = np.isfinite(q) & (q >= 0) & (q < FINE_STEPS) & (q == np.floor(q))
    fine = np.where(ok, q, 0.0).astype(np.int64)
    same = join_thresholds(f32, fine).view(np.uint64) == t.view(np.uint64)
    same &= ~np.isnan(f32) & ~np.isneginf(f32)
    at = np.flatnonzero(~same)
    f32[at] = 0.0
    fine[at] = 0
    return f32, fine.astype(np.uint8), at, t[at].copy()


def read_thresholds(r: PayloadReader, n_inner: int) -> np.ndarray:
    """Fields ``threshold``, ``threshold_fine``, ``threshold_exact_at`` and
    ``threshold_exact``: ``n_inner`` float64 thresholds (:func:`split_thresholds`)."""
    value = r.get("threshold")
    if (
        not isinstance(value, np.ndarray)
        or isinstance(value, np.ma.MaskedArray)
        or value.dtype != np.float32
    ):
        r.refuse(
            "threshold", value, "a float32 array (the largest float32 not above each threshold)"
        )
    f32 = r.read_array("threshold", "f", length=n_inner, finite=False).astype(np.float32)
    if np.any(np.isnan(f32) | np.isneginf(f32)):
        r.fail("field 'threshold' holds NaN or -inf")
    fine = r.read_array("threshold_fine", "i", length=n_inner, lo=0, hi=FINE_STEPS - 1)
    at = read_positions(r, "threshold_exact_at", n_inner)
    exact = r.read_array("threshold_exact", "f", length=at.size, finite=False)
    with np.errstate(over="ignore"):
        no_next = np.nextafter(f32, np.float32(np.inf)) == np.inf  # FLT_MAX and +inf
    if np.any(fine[no_next] != 0):
        r.fail("field 'threshold_fine' must be 0 where 'threshold' has no larger finite float32")
    if np.any(f32[at] != 0) or np.any(fine[at] != 0):
        r.fail(
            "fields 'threshold' and 'threshold_fine' must be 0 at the positions in "
            "'threshold_exact_at'"
        )
    out = join_thresholds(f32, fine)
    out[at] = exact
    return out
