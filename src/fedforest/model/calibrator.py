"""A fitted calibration map, as a site saves it beside its model.

:class:`Calibrator` applies a calibration fitted by
:mod:`fedforest.prediction.calibration` (scikit-learn fits the sigmoid and
isotonic maps there) and reads and writes it as plain arrays, so that a saved
model carries its site's calibrator without pickle. Its
:meth:`~Calibrator.transform` gives what scikit-learn's
``CalibratedClassifierCV.predict_proba`` gives for the same map (tested), but
for the isotonic map's tie-break: 1e-6 of each row's own probability
(:data:`ISOTONIC_TIE_BREAK`), so that rows the trees ranked apart are not tied
by a flat step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..vocabulary import CALIBRATION_METHODS
from .payload_checks import MAX_ROWS

#: Largest prior ratio ``π_site / π_train`` a site's fit gives (it clips there): a larger one
#: would make a class the trees almost never saw outweigh every other.
MAX_PRIOR_RATIO = 1e6
#: Smallest prior ratio: the site's prior is smoothed (``(n_c + 1) / (n + K)``), so no class
#: gets a ratio of 0 (a class made impossible), nor one below ``1 / (MAX_ROWS + K)``.
MIN_PRIOR_RATIO = 1.0 / (MAX_ROWS + 1e6)
#: Share of the uncalibrated probability in an isotonic map's output: the step function's
#: flat blocks give every row of a block one risk, and this much of the row's own
#: probability keeps the rows in the trees' order (a strictly increasing map, so the
#: calibration never ties two rows the trees ranked apart; risks move by at most this).
ISOTONIC_TIE_BREAK = 1e-6
#: Largest tie-break a saved isotonic calibrator may carry (the fit writes
#: :data:`ISOTONIC_TIE_BREAK`; a larger share would move risks visibly).
MAX_ISOTONIC_TIE_BREAK = 1e-3
#: Largest ``|a|`` and ``|b|`` of a sigmoid map a site keeps (its fit skips a steeper one): a
#: map this steep turns risks within 1e-3 of each other into 0 and 1.
MAX_SIGMOID_PARAMETER = 1e4


@dataclass
class Calibrator:
    """A fitted calibration map from probabilities to probabilities.

    Attributes
    ----------
    method : str
        One of :data:`~fedforest.vocabulary.CALIBRATION_METHODS`.
    classes : ndarray
        The class labels, the column order of the probabilities.
    params : dict of str to ndarray
        ``prior``: ``ratio`` (n_classes,), ``π_site / π_train``.
        ``sigmoid``: ``a`` and ``b`` (one per calibrated column).
        ``isotonic``: ``x`` and ``y`` (breakpoints, concatenated) and
        ``offsets`` (where each calibrated column's breakpoints start), and
        ``tie_break`` (one number, :data:`ISOTONIC_TIE_BREAK` from the fit):
        the map is the step function with that share of the probability itself
        mixed in, so it is strictly increasing. Without ``tie_break`` (a
        calibrator saved before it) the map is the step function alone, as it
        was written.
        Two classes calibrate one column (the second class), more calibrate
        each.

    Examples
    --------
    >>> import numpy as np
    >>> cal = Calibrator("prior", np.array([0, 1]), {"ratio": np.array([0.5, 1.5])})
    >>> cal.transform(np.array([[0.5, 0.5]]))
    array([[0.25, 0.75]])
    """

    method: str
    classes: np.ndarray
    params: dict = field(default_factory=dict)

    def transform(self, proba: np.ndarray) -> np.ndarray:
        """Calibrated probabilities of ``proba`` (columns in :attr:`classes` order)."""
        proba = np.asarray(proba, dtype=float)
        if self.method == "none":
            return proba
        if self.method == "prior":
            adjusted = proba * self.params["ratio"][None, :]
            total = adjusted.sum(axis=1, keepdims=True)
            # a row whose every class the ratio zeroes keeps its probabilities
            return np.divide(adjusted, total, out=proba.copy(), where=total > 0)
        n_classes = len(self.classes)
        columns = [1] if n_classes == 2 else list(range(n_classes))
        out = np.zeros_like(proba)
        for k, col in enumerate(columns):
            out[:, col] = self._map(k, proba[:, col])
        if n_classes == 2:
            out[:, 0] = 1.0 - out[:, 1]
        else:
            total = out.sum(axis=1, keepdims=True)
            out = np.divide(out, total, out=np.full_like(out, 1 / n_classes), where=total != 0)
        out[(out > 1.0) & (out <= 1.0 + 1e-5)] = 1.0
        return out

    def _map(self, k: int, values: np.ndarray) -> np.ndarray:
        if self.method == "sigmoid":
            a, b = self.params["a"][k], self.params["b"][k]
            z = -(a * values + b)
            with np.errstate(over="ignore"):  # exp overflows to inf: the risk is 0, exactly
                return 1.0 / (1.0 + np.exp(-z))
        start, stop = self.params["offsets"][k], self.params["offsets"][k + 1]
        steps = np.interp(values, self.params["x"][start:stop], self.params["y"][start:stop])
        tie_break = self.params.get("tie_break")
        if tie_break is None:  # saved before the tie-break: the steps, as they were
            return steps
        # ties broken by the trees' own order (ISOTONIC_TIE_BREAK)
        share = float(tie_break[0])
        return (1.0 - share) * steps + share * values

    # ------------------------------------------------------------ payload
    def to_payload(self) -> dict:
        """The calibrator as plain values and arrays (no pickle)."""
        return {
            "method": self.method,
            "params": {k: np.asarray(v, dtype=np.float64) for k, v in self.params.items()},
        }

    @classmethod
    def from_payload(cls, payload, classes, where: str = "calibrator") -> Calibrator:
        """Read and validate :meth:`to_payload`'s output; ``ValueError`` names ``where``."""
        classes = np.asarray(classes)
        if not isinstance(payload, Mapping) or set(payload) != {"method", "params"}:
            raise ValueError(f"{where} must be a mapping with keys 'method' and 'params'")
        method = payload["method"]
        if method not in CALIBRATION_METHODS:
            raise ValueError(
                f"{where}.method is {method!r}; expected one of {list(CALIBRATION_METHODS)}"
            )
        raw = payload["params"]
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where}.params must be a mapping of name to array")
        expected = {
            "none": set(),
            "prior": {"ratio"},
            "sigmoid": {"a", "b"},
            "isotonic": {"x", "y", "offsets"},
        }[method]
        optional = {"tie_break"} if method == "isotonic" else set()
        if not expected <= set(raw) <= expected | optional:
            also = f" (and optionally {sorted(optional)})" if optional else ""
            raise ValueError(
                f"{where}.params has {sorted(raw)}; a {method} calibrator has {sorted(expected)}"
                f"{also}, expected those"
            )
        params = {}
        for name, value in raw.items():
            arr = np.asarray(value)
            if arr.ndim != 1 or arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)):
                raise ValueError(f"{where}.params.{name} must be a 1-D array of finite numbers")
            params[name] = arr.astype(np.float64)
        n_cal = 1 if len(classes) == 2 else len(classes)
        if method == "prior":
            ratio = params["ratio"]
            if ratio.shape != (len(classes),):
                raise ValueError(
                    f"{where}.params.ratio must hold {len(classes)} numbers (one per class)"
                )
            bad = (ratio < MIN_PRIOR_RATIO) | (ratio > MAX_PRIOR_RATIO)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise ValueError(
                    f"{where}.params.ratio is {float(ratio[k])!r} for class "
                    f"{classes[k].item()!r}; "
                    f"expected numbers in [{MIN_PRIOR_RATIO:.3g}, {MAX_PRIOR_RATIO:g}] (a ratio "
                    "of 0 makes a class impossible, and a site's fit gives neither 0 nor more "
                    f"than {MAX_PRIOR_RATIO:g})"
                )
        elif method == "sigmoid":
            if params["a"].shape != (n_cal,) or params["b"].shape != (n_cal,):
                raise ValueError(f"{where}.params.a and .b must hold {n_cal} numbers each")
            for name in ("a", "b"):
                big = np.abs(params[name]) > MAX_SIGMOID_PARAMETER
                if big.any():
                    raise ValueError(
                        f"{where}.params.{name} holds {float(params[name][big][0])!r}; expected "
                        f"numbers of magnitude at most {MAX_SIGMOID_PARAMETER:g} (a steeper map "
                        "turns every risk into 0 or 1, and a site's fit keeps none)"
                    )
            if np.any(params["a"] >= 0):
                raise ValueError(
                    f"{where}.params.a holds {float(params['a'][params['a'] >= 0][0])!r}; "
                    "expected negative slopes (a slope >= 0 reverses the order of the risks, "
                    "and a site's fit keeps none)"
                )
        elif method == "isotonic":
            off = params["offsets"]
            x, y = params["x"], params["y"]
            if (
                off.shape != (n_cal + 1,)
                or off[0] != 0
                or off[-1] != len(x)
                or len(y) != len(x)
                or np.any(np.diff(off) < 1)
                or np.any(off != np.round(off))
            ):
                raise ValueError(
                    f"{where}.params.offsets must start at 0, end at len(x) = len(y) and give "
                    f"each of the {n_cal} calibrated columns at least one breakpoint"
                )
            params["offsets"] = off.astype(np.int64)
            for k in range(n_cal):
                seg = slice(int(off[k]), int(off[k + 1]))
                if np.any(np.diff(x[seg]) < 0) or np.any(np.diff(y[seg]) < 0):
                    raise ValueError(f"{where}.params: isotonic breakpoints must be increasing")
            if np.any((x < 0) | (x > 1)):
                raise ValueError(
                    f"{where}.params.x must lie within [0, 1] (a site's fit puts its breakpoints "
                    "at predicted probabilities)"
                )
            if np.any((y <= 0) | (y >= 1)):
                raise ValueError(
                    f"{where}.params.y must lie strictly between 0 and 1 (a site's fit keeps its "
                    "steps within [1 / (n + 2), (n + 1) / (n + 2)] for n validation rows; a "
                    "step at 0 or 1 makes a risk certain)"
                )
            tie_break = params.get("tie_break")
            if tie_break is not None and (
                tie_break.shape != (1,) or not 0 <= tie_break[0] <= MAX_ISOTONIC_TIE_BREAK
            ):
                raise ValueError(
                    f"{where}.params.tie_break is {tie_break.tolist()!r}; expected one number in "
                    f"[0, {MAX_ISOTONIC_TIE_BREAK:g}] (a site's fit writes "
                    f"{ISOTONIC_TIE_BREAK:g}: the share of each risk kept to break the steps' "
                    "ties)"
                )
        return cls(method, classes, params)
