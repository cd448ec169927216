"""What a site's imputer fit can give: the bounds every imputer read or kept must respect.

An imputer travels as numbers (:class:`~fedforest.model.imputers.Imputer`:
``intercept``, ``coef``, ``center``, ``scale``, ``score``). A payload or an
edited model file can hold numbers that no fit on a site's table gives; this
module says which, from how the fit is made. A site's values lie within
float32's range (:data:`~fedforest.model.inputs.FLOAT32_MAX`: the trees split
on float32, and a table or an input with a larger magnitude is refused), so:

* ``center`` is the mean of a predictor's observed values: its magnitude is
  at most ``FLOAT32_MAX``;
* ``scale`` is 1 for every predictor of a numeric imputer (its inputs are
  not standardised) and, for a categorical one, the predictor's standard
  deviation (1 for a constant column): in ``(0, FLOAT32_MAX]``;
* a numeric imputer is a least-squares fit with an intercept, which passes
  through the means: ``intercept + center @ coef`` is the mean of the
  feature's observed values, within float32's range; and its value on any
  row within float32's range is a float64 number:
  ``|intercept| + FLOAT32_MAX * sum(|coef|)`` is finite (a fit that is not
  is not kept: :func:`~fedforest.model.imputers.fit_imputers` drops it and
  says why);
* a categorical imputer is scikit-learn's L2-penalised logistic regression
  (``C = 1``) on standardised inputs, started at zero, whose objective
  (the log-loss summed over the ``n`` training rows plus ``||W||² / 2``)
  never rises above its value at the start, ``n ln k`` for ``k`` observed
  levels. So ``||W||`` (Frobenius) is at most ``sqrt(2 n ln k)``; every
  training row's loss is at most ``n ln k``, so two levels' intercepts differ
  by at most ``n (ln k + 2 sqrt(2 p ln k))`` for ``p`` predictors (a
  standardised value is at most ``sqrt(n)`` in magnitude), and, as the
  intercepts sum to 0 (two levels: ``[0, b]``), none exceeds that;
* ``score`` is a cross-validated R² (at most 1) or macro F1 (in [0, 1]).

:func:`imputer_problem` names the first bound an imputer breaks (the
payload readers refuse it, naming the field); the bounds carry a relative
slack of :data:`SLACK` for rounding.
"""

from __future__ import annotations

import math

import numpy as np

from .inputs import FLOAT32_MAX

#: Relative slack of every bound (float64 rounding of the fit and of the check).
SLACK = 1e-6
#: The largest finite float64.
FLOAT64_MAX = float(np.finfo(np.float64).max)


def _loose(bound: float) -> float:
    return bound * (1 + SLACK) + 1e-9


def _first(values: np.ndarray, bad: np.ndarray) -> str:
    return f"{float(np.asarray(values)[bad].flat[0])!r}"


def imputer_problem(imp) -> str | None:
    """The first bound of the module docstring that ``imp`` breaks, as a message, or None.

    The message names the field, the value found, the bound and why no fit gives more.
    """
    center, scale = np.asarray(imp.center, float), np.asarray(imp.scale, float)
    coef, intercept = np.asarray(imp.coef, float), np.asarray(imp.intercept, float)
    bad = ~(np.abs(center) <= FLOAT32_MAX)
    if bad.any():
        return (
            f"field 'center' holds {_first(center, bad)}; expected magnitudes at most "
            f"{FLOAT32_MAX:.7g} (a predictor's mean over a site's values, which lie within "
            "float32's range)"
        )
    if imp.kind == "numeric":
        bad = scale != 1.0
        if bad.any():
            return (
                f"field 'scale' holds {_first(scale, bad)}; expected 1 for every predictor (a "
                "numeric imputer's inputs are not standardised)"
            )
        with np.errstate(all="ignore"):
            reach = abs(float(intercept[0])) + FLOAT32_MAX * float(np.abs(coef).sum())
            at_mean = float(intercept[0] + center @ coef)
            size = abs(float(intercept[0])) + float(np.abs(center) @ np.abs(coef))
        given = (
            f"fields 'intercept' ({float(intercept[0])!r}) and 'coef' (largest magnitude "
            f"{float(np.abs(coef).max(initial=0.0))!r})"
        )
        if not math.isfinite(reach):
            return (
                f"{given} give |intercept| + {FLOAT32_MAX:.7g} * sum(|coef|) beyond float64's "
                "range; expected an imputer whose value on every row within float32's range "
                "(a site's values) is a finite number"
            )
        if not abs(at_mean) <= FLOAT32_MAX * (1 + SLACK) + 1e-9 * size:
            return (
                f"{given} give {at_mean!r} at the predictors' means "
                f"('center'); expected a magnitude at most {FLOAT32_MAX:.7g} (a least-squares "
                "fit with an intercept passes through the means: its value there is the mean "
                "of the feature's observed values)"
            )
        return None
    bad = ~((scale > 0) & (scale <= FLOAT32_MAX))
    if bad.any():
        return (
            f"field 'scale' holds {_first(scale, bad)}; expected numbers in (0, "
            f"{FLOAT32_MAX:.7g}] (a predictor's standard deviation over a site's values, or 1)"
        )
    n, k, p = int(imp.n_train), int(len(imp.levels)), int(coef.shape[1])
    log_k = math.log(k) if k > 1 else 0.0
    norm_bound = math.sqrt(2.0 * n * log_k)
    with np.errstate(all="ignore"):
        norm = float(np.sqrt(np.sum(coef * coef)))
    if not norm <= _loose(norm_bound):
        return (
            f"field 'coef' has norm {norm!r}; expected at most {norm_bound:.6g} = sqrt(2 n ln k) "
            f"for n_train = {n} rows and k = {k} levels (an L2-penalised logistic regression "
            "started at zero never reaches a larger one)"
        )
    spread_bound = n * (log_k + 2.0 * math.sqrt(2.0 * p * log_k))
    spread = float(intercept.max() - intercept.min())
    largest = float(np.abs(intercept).max())
    if not (spread <= _loose(spread_bound) and largest <= _loose(spread_bound)):
        shown = largest if spread <= _loose(spread_bound) else spread
        what = "a magnitude" if spread <= _loose(spread_bound) else "a spread (largest - smallest)"
        return (
            f"field 'intercept' has {what} of {shown!r}; expected at most {spread_bound:.6g} = "
            f"n (ln k + 2 sqrt(2 p ln k)) for n_train = {n} rows, k = {k} levels and p = {p} "
            "predictors (what the log-loss of the fit's own rows allows; its intercepts sum "
            "to 0)"
        )
    if not 0.0 <= imp.score <= 1.0:
        return f"field 'score' is {imp.score!r}; expected a macro F1 in [0, 1]"
    return None
