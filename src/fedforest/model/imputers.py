"""Imputation models for features a site does not have (paper section III-B3).

Each site fits, for every one of its private features, a linear model that
predicts the feature from the shared features: a linear regression for a
numeric feature (score: mean 3-fold cross-validated R^2) and a multinomial
logistic regression on standardized inputs for a categorical feature (score:
mean 3-fold cross-validated macro F1). Only the coefficients travel; no
estimator object is ever kept or sent. Sites pool their imputers and keep, per
feature, the one with the highest score (:meth:`ImputerSet.select`).

At inference an :class:`Imputer` reads the predictors from a matrix in the
global feature order (NaN = missing; a missing predictor is replaced by its
training mean) and returns the imputed value (``mi`` strategy) or, for a
categorical feature, the probability of every global level (``ipr``, ``mp``).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import f1_score, r2_score
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score

from .. import protocol
from ..validation import PayloadReader
from ..vocabulary import FEATURE_KINDS as KINDS
from .imputer_bounds import imputer_problem
from .payload_checks import MAX_FEATURES, MAX_LEVELS, MAX_ROWS

logger = logging.getLogger(__name__)

FORMAT = protocol.IMPUTERS
VERSION = protocol.FORMATS[FORMAT]


#: Fewer observed rows than this and no imputer is fitted for a target.
MIN_ROWS = 6

_ITEM_FIELDS = (
    "feature",
    "kind",
    "predictors",
    "intercept",
    "coef",
    "center",
    "scale",
    "levels",
    "n_levels",
    "score",
    "n_train",
    "owner",
)


@dataclass
class Imputer:
    """Coefficients of one imputation model, in the global feature space.

    Numeric feature (linear regression, raw inputs)::

        x_f = intercept[0] + x_filled @ coef

    Categorical feature (multinomial logistic regression, standardized inputs)::

        z = intercept + ((x_filled - center) / scale) @ coef.T
        P(f = levels[k]) = softmax(z)[k]

    where ``x_filled`` is the row's predictor values with every NaN replaced by
    the corresponding ``center`` (the training mean).

    Parameters
    ----------
    feature : str
        The imputed feature (global name).
    kind : {"numeric", "categorical"}
    predictors : list of str
        Global names of the input features, in the order of ``coef``'s columns.
    intercept : ndarray of shape (1,) (numeric) or (K,) (categorical)
    coef : ndarray of shape (p,) (numeric) or (K, p) (categorical)
    center : ndarray of shape (p,)
        Training means of the predictors (NaN fill value; standardization).
    scale : ndarray of shape (p,)
        Training standard deviations (categorical; 1 where the std is 0) or
        ones (numeric).
    levels : ndarray of int, shape (K,)
        The category codes the model can output (categorical); empty (numeric).
    n_levels : int
        Number of global levels of the feature (categorical); 0 (numeric).
    score : float
        Cross-validated quality: R^2 (numeric) or macro F1 (categorical).
    n_train : int
        Rows the model was fitted on.
    owner : str
        Site that fitted the model.

    Examples
    --------
    >>> import numpy as np
    >>> imp = Imputer(
    ...     feature="b", kind="numeric", predictors=["a"], intercept=np.array([1.0]),
    ...     coef=np.array([2.0]), center=np.array([0.5]), scale=np.ones(1),
    ...     levels=np.zeros(0, int), n_levels=0, score=0.9, n_train=50, owner="s1",
    ... )
    >>> Xg = np.array([[3.0, np.nan], [np.nan, np.nan]])
    >>> imp.predict(Xg, {"a": 0, "b": 1})
    array([7., 2.])
    """

    feature: str
    kind: str
    predictors: list[str]
    intercept: np.ndarray
    coef: np.ndarray
    center: np.ndarray
    scale: np.ndarray
    levels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    n_levels: int = 0
    score: float = 0.0
    n_train: int = 1
    owner: str = "site"

    def __post_init__(self) -> None:
        self.predictors = [str(p) for p in self.predictors]
        self.intercept = np.asarray(self.intercept, dtype=np.float64)
        self.coef = np.asarray(self.coef, dtype=np.float64)
        self.center = np.asarray(self.center, dtype=np.float64)
        self.scale = np.asarray(self.scale, dtype=np.float64)
        self.levels = np.asarray(self.levels, dtype=np.int64).reshape(-1)
        self.n_levels = int(self.n_levels)
        self.score = float(self.score)
        self.n_train = int(self.n_train)
        if self.kind not in KINDS:
            raise ValueError(f"imputer for {self.feature!r}: kind {self.kind!r} not in {KINDS}")
        p = len(self.predictors)
        if self.center.shape != (p,) or self.scale.shape != (p,):
            raise ValueError(
                f"imputer for {self.feature!r}: center and scale must have shape ({p},), got "
                f"{self.center.shape} and {self.scale.shape}"
            )
        if self.kind == "numeric":
            expected = {"intercept": (1,), "coef": (p,), "levels": (0,)}
        else:
            k = self.levels.shape[0]
            expected = {"intercept": (k,), "coef": (k, p)}
            if k < 1 or self.n_levels < 1:
                raise ValueError(f"imputer for {self.feature!r}: a categorical model needs levels")
        for name, shape in expected.items():
            if getattr(self, name).shape != shape:
                raise ValueError(
                    f"imputer for {self.feature!r}: {name} has shape "
                    f"{getattr(self, name).shape}, expected {shape}"
                )

    # -------------------------------------------------------------- inference
    def _inputs(self, Xg, feature_index: Mapping[str, int]) -> np.ndarray:
        Xg = np.asarray(Xg)
        if Xg.ndim != 2:
            raise ValueError(f"Xg must be 2-dimensional, got shape {Xg.shape}")
        missing = [p for p in self.predictors if p not in feature_index]
        if missing:
            raise KeyError(
                f"imputer for {self.feature!r} needs predictors {missing} that are not in "
                "feature_index"
            )
        cols = np.array([feature_index[p] for p in self.predictors], dtype=np.int64)
        if cols.size and (cols.min() < 0 or cols.max() >= Xg.shape[1]):
            raise ValueError(
                f"feature_index maps predictors of {self.feature!r} to columns {cols.tolist()} "
                f"outside Xg's {Xg.shape[1]} columns"
            )
        Xp = Xg[:, cols].astype(np.float64)
        return np.where(np.isnan(Xp), self.center, Xp)

    def _logits(self, Xp: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):  # extreme coefficients give inf or NaN, handled below
            return self.intercept + ((Xp - self.center) / self.scale) @ self.coef.T

    def _clean_logits(self, z: np.ndarray) -> np.ndarray:
        """Logits that may have overflowed, made usable: +inf levels share the row, NaN
        levels get probability 0, and a row with no finite information is uniform."""
        z = np.where(np.isnan(z), -np.inf, z)
        top = np.isposinf(z)
        rows = top.any(axis=1)
        if rows.any():
            z[rows] = np.where(top[rows], 0.0, -np.inf)
        z[np.isneginf(z).all(axis=1)] = 0.0
        return z

    def _softmax(self, z: np.ndarray) -> np.ndarray:
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, Xg, feature_index: Mapping[str, int]) -> np.ndarray:
        """Imputed value of the feature for every row.

        Parameters
        ----------
        Xg : ndarray of shape (n_rows, n_features)
            Rows in the global feature order; NaN means missing.
        feature_index : mapping of str to int
            Column of each global feature name in ``Xg``.

        Returns
        -------
        ndarray of shape (n_rows,), float64
            The regression's prediction (numeric; NaN where it is undefined
            because the coefficients overflow) or the most probable level code
            (categorical).

        Raises
        ------
        KeyError
            If a predictor is not in ``feature_index``.
        """
        Xp = self._inputs(Xg, feature_index)
        if self.kind == "numeric":
            with np.errstate(all="ignore"):
                return self.intercept[0] + Xp @ self.coef
        z = self._clean_logits(self._logits(Xp))
        return self.levels[np.argmax(z, axis=1)].astype(np.float64)

    def predict_proba(self, Xg, feature_index: Mapping[str, int]) -> np.ndarray:
        """Probability of every global level code (categorical imputers only).

        Returns
        -------
        ndarray of shape (n_rows, n_levels)
            Column ``c`` is the probability of level code ``c``; codes the model
            never saw in training get probability 0. Rows sum to 1.
        """
        if self.kind != "categorical":
            raise ValueError(
                f"predict_proba is for categorical imputers; {self.feature!r} is numeric"
            )
        proba = self._softmax(self._clean_logits(self._logits(self._inputs(Xg, feature_index))))
        out = np.zeros((proba.shape[0], self.n_levels))
        out[:, self.levels] = proba
        return out

    # ---------------------------------------------------------------- payload
    def to_dict(self) -> dict:
        """This imputer as a dict of plain values and numpy arrays."""
        return {
            "feature": self.feature,
            "kind": self.kind,
            "predictors": list(self.predictors),
            "intercept": self.intercept.astype(np.float64),
            "coef": self.coef.astype(np.float64),
            "center": self.center.astype(np.float64),
            "scale": self.scale.astype(np.float64),
            "levels": self.levels.astype(np.int64),
            "n_levels": int(self.n_levels),
            "score": float(self.score),
            "n_train": int(self.n_train),
            "owner": self.owner,
        }


class ImputerSet(Mapping):
    """Imputers keyed by the feature they impute.

    Behaves as a read-only mapping ``feature -> Imputer``; iterating yields the
    feature names.

    Parameters
    ----------
    imputers : iterable of Imputer
        At most one per feature.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40)})
    >>> X["c"] = 2 * X["a"] - X["b"] + 1
    >>> s1 = fit_imputers(X, ["c"], ["a", "b"], owner="s1", random_state=0)
    >>> s2 = fit_imputers(X.iloc[:20], ["c"], ["a", "b"], owner="s2", random_state=0)
    >>> best = ImputerSet.select([s1, s2])
    >>> best.features, best["c"].n_train
    (['c'], 40)
    >>> ImputerSet.from_payload(best.to_payload(), sender="s1").features
    ['c']
    """

    def __init__(self, imputers: Iterable[Imputer] = ()):
        self._by_feature: dict[str, Imputer] = {}
        for imp in imputers:
            if not isinstance(imp, Imputer):
                raise TypeError(f"ImputerSet holds Imputer objects, got {type(imp).__name__}")
            if imp.feature in self._by_feature:
                raise ValueError(f"two imputers for feature {imp.feature!r}")
            self._by_feature[imp.feature] = imp

    def __getitem__(self, feature: str) -> Imputer:
        return self._by_feature[feature]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_feature)

    def __len__(self) -> int:
        return len(self._by_feature)

    def __contains__(self, feature: object) -> bool:
        return feature in self._by_feature

    @property
    def features(self) -> list[str]:
        """Names of the imputed features."""
        return list(self._by_feature)

    def __repr__(self) -> str:
        body = ", ".join(
            f"{f}: {imp.kind} by {imp.owner!r} (score {imp.score:.3g}, n={imp.n_train})"
            for f, imp in self._by_feature.items()
        )
        return f"ImputerSet({{{body}}})"

    @classmethod
    def select(cls, sets: Sequence[ImputerSet]) -> ImputerSet:
        """Keep, per feature, the best imputer over several sets.

        The highest ``score`` wins; ties go to the larger ``n_train``, then to
        the ``owner`` name that sorts first. A NaN score ranks below every
        other score.

        Parameters
        ----------
        sets : sequence of ImputerSet

        Returns
        -------
        ImputerSet
            Features in order of first appearance.

        Raises
        ------
        ValueError
            If the sets disagree on a feature's kind or number of levels.

        Examples
        --------
        >>> import numpy as np
        >>> def imp(owner, score, n):
        ...     return Imputer("x", "numeric", [], np.zeros(1), np.zeros(0), np.zeros(0),
        ...                    np.zeros(0), score=score, n_train=n, owner=owner)
        >>> a = ImputerSet([imp("s1", 0.5, 10)])
        >>> b = ImputerSet([imp("s2", 0.5, 30)])
        >>> ImputerSet.select([a, b])["x"].owner
        's2'
        """
        best: dict[str, Imputer] = {}
        for s in sets:
            if not isinstance(s, ImputerSet):
                raise TypeError(f"select needs ImputerSet objects, got {type(s).__name__}")
            for feature, imp in s.items():
                cur = best.get(feature)
                if cur is None:
                    best[feature] = imp
                    continue
                if (cur.kind, cur.n_levels) != (imp.kind, imp.n_levels):
                    raise ValueError(
                        f"imputers for {feature!r} disagree: {cur.kind} with {cur.n_levels} "
                        f"levels from {cur.owner!r}, {imp.kind} with {imp.n_levels} levels "
                        f"from {imp.owner!r}"
                    )
                if _rank(imp) < _rank(cur):
                    best[feature] = imp
        return cls(best.values())

    # ---------------------------------------------------------------- payload
    def to_payload(self) -> dict:
        """The imputers as a dict of plain values and numpy arrays (no pickle).

        Returns
        -------
        dict
            ``{"format": "fedforest/imputers", "version": 1, "imputers": [...]}``,
            accepted by :meth:`from_payload`.
        """
        return {
            "format": FORMAT,
            "version": VERSION,
            "imputers": [imp.to_dict() for imp in self._by_feature.values()],
        }

    @classmethod
    def from_payload(
        cls, payload: Mapping, sender: str | None = None, *, where: str = ""
    ) -> ImputerSet:
        """Rebuild imputers from :meth:`to_payload` output, validating everything.

        Parameters
        ----------
        payload : dict
            The received payload.
        sender : str, optional
            Who sent it; named in every error message.
        where : str, optional
            Where the payload sits in a larger one (``"imputers"`` in a model
            bundle); named in every error message.

        Raises
        ------
        fedforest.PayloadError
            If a field is missing, ``None``, unknown, of the wrong type, dtype
            or shape, holds non-finite numbers, an unknown kind, level codes
            outside ``[0, n_levels)``, ``n_train < 1``, or a feature appears
            twice. Nothing else is raised.
        """
        r = PayloadReader(payload, FORMAT, sender, where)
        r.check_keys({"imputers"})
        items = r.get("imputers")
        if not isinstance(items, (list, tuple)):
            r.refuse("imputers", items, "a list of imputer entries")
        if len(items) > MAX_FEATURES:
            r.fail(f"field 'imputers' has {len(items)} entries, more than {MAX_FEATURES}")
        imputers = []
        seen: set[str] = set()
        for i, item in enumerate(items):
            imp = _read_imputer(r, item, i)
            if imp.feature in seen:
                r.fail(
                    f"field 'imputers' has two imputers for feature {imp.feature!r}; expected "
                    "one per feature"
                )
            seen.add(imp.feature)
            imputers.append(imp)
        return cls(imputers)


def _rank(imp: Imputer) -> tuple:
    score = -math.inf if math.isnan(imp.score) else imp.score
    return (-score, -imp.n_train, imp.owner)


def _read_imputer(parent: PayloadReader, item: Any, index: int) -> Imputer:
    r = parent.entry(item, f"imputers[{index}]")
    named = r.get("feature", None)
    if isinstance(named, str):
        r.where += f" (feature {named!r})"
    r.check_keys(set(_ITEM_FIELDS))
    feature = r.read_string("feature")
    kind = r.read_choice("kind", KINDS)
    predictors = r.read_str_list("predictors", MAX_FEATURES)
    if feature in predictors:
        r.fail(
            f"field 'predictors' contains the imputed feature {feature!r} itself; expected "
            "other features"
        )
    p = len(predictors)
    center = r.read_array("center", "f", length=p)
    scale = r.read_array("scale", "f", length=p)
    if np.any(scale <= 0):
        r.refuse("scale", scale, "positive values only")
    levels = r.read_array("levels", "i", max_len=MAX_LEVELS, lo=0, hi=MAX_LEVELS - 1)
    if kind == "numeric":
        n_levels = r.read_integer("n_levels", 0, 0)
        if levels.shape[0] != 0:
            r.fail("field 'levels' must be empty for a numeric imputer")
        intercept = r.read_array("intercept", "f", length=1)
        coef = r.read_array("coef", "f", length=p)
    else:
        n_levels = r.read_integer("n_levels", 1, MAX_LEVELS)
        k = levels.shape[0]
        if k < 1 or k > n_levels:
            r.fail(f"field 'levels' has {k} entries, expected 1 to n_levels={n_levels}")
        if levels.max() >= n_levels:
            r.fail(f"field 'levels' has codes outside [0, {n_levels}); expected codes in it")
        if np.any(np.diff(levels) <= 0):
            r.fail(
                "field 'levels' must be strictly increasing (no duplicates); expected sorted codes"
            )
        intercept = r.read_array("intercept", "f", length=k)
        coef = r.read_array("coef", "f", ndim=2, length=k, width=p)
    score = r.read_number("score", hi=1.0)
    n_train = r.read_integer("n_train", 1, MAX_ROWS)
    owner = r.read_string("owner")
    imp = Imputer(
        feature=feature,
        kind=kind,
        predictors=predictors,
        intercept=intercept,
        coef=coef,
        center=center,
        scale=scale,
        levels=levels,
        n_levels=n_levels,
        score=score,
        n_train=n_train,
        owner=owner,
    )
    problem = imputer_problem(imp)  # what no fit on a site's values gives
    if problem is not None:
        r.fail(problem)
    return imp


# ---------------------------------------------------------------------- fitting
def fit_imputers(
    X: pd.DataFrame,
    targets: Sequence[str],
    predictors: Sequence[str],
    *,
    categories: Mapping[str, Sequence[str]] | None = None,
    owner: str = "site",
    cv: int | None = 3,
    random_state: int | None = None,
) -> ImputerSet:
    """Fit one imputer per target column from the predictor columns.

    For each target, the rows where it is observed are used; a missing
    predictor value is replaced by the predictor's mean over those rows. A
    numeric target gets a ``LinearRegression`` scored by the mean ``cv``-fold
    cross-validated R^2 (shuffled ``KFold``). A categorical target (named in
    ``categories``; the column holds integer codes ``0 .. K-1``) gets a
    multinomial ``LogisticRegression(max_iter=1000)`` on standardized inputs,
    scored by the mean cross-validated macro F1 (``StratifiedKFold`` when
    every observed level has at least ``cv`` rows, else ``KFold``).

    Special cases:

    * fewer than 6 observed rows: no imputer for that target (logged);
    * a categorical target with one observed level: a constant model (zero
      coefficients, probability 1 for that level) with score 0.0, so that any
      informative imputer from another site is preferred;
    * cross-validation that cannot run (a training fold with a single level,
      or any fold failing): the model fitted on all rows is scored in-sample,
      and this is logged;
    * no predictors: a model of the target's marginal (mean or level
      frequencies).

    Parameters
    ----------
    X : DataFrame
        The site's rows, columns named by global feature name.
    targets : sequence of str
        Columns to build imputers for (the site's private features).
    predictors : sequence of str
        Input columns (the shared features).
    categories : mapping of str to list of str, optional
        Levels of categorical features; a target named here is categorical.
    owner : str
        Site name recorded in each imputer.
    cv : int or None
        Number of cross-validation folds (at least 2). ``None`` skips
        cross-validation and scores each model in-sample: the score only
        matters when several sites offer an imputer for the same feature, so
        skip it only when each feature has a single candidate.
    random_state : int, optional
        Seed of the fold shuffling.

    Returns
    -------
    ImputerSet

    Raises
    ------
    ValueError
        If a target or predictor is not a column of ``X``, a name is both a
        target and a predictor, a column is not numeric, or a categorical
        column holds codes outside ``0 .. K-1``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60)})
    >>> X["y"] = 2 * X["a"] - X["b"] + 1
    >>> X["c"] = (X["a"] > 0).astype(int)
    >>> imps = fit_imputers(X, ["y", "c"], ["a", "b"], categories={"c": ["lo", "hi"]},
    ...                     owner="s1", random_state=0)
    >>> np.round(imps["y"].coef, 3), np.round(imps["y"].intercept, 3)
    (array([ 2., -1.]), array([1.]))
    >>> imps["c"].kind, imps["c"].n_levels
    ('categorical', 2)
    """
    if not isinstance(X, pd.DataFrame):
        raise ValueError(f"X must be a pandas DataFrame, got {type(X).__name__}")
    targets = [str(t) for t in targets]
    predictors = [str(p) for p in predictors]
    categories = {str(k): list(v) for k, v in (categories or {}).items()}
    if cv is not None and (isinstance(cv, bool) or not isinstance(cv, (int, np.integer)) or cv < 2):
        raise ValueError(f"cv must be an integer >= 2 or None, got {cv!r}")
    cols = [str(c) for c in X.columns]
    if len(set(cols)) != len(cols):
        raise ValueError(
            f"X has duplicate columns {sorted({c for c in cols if cols.count(c) > 1})}"
        )
    for what, names in (("targets", targets), ("predictors", predictors)):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{what} has duplicates: {dup}")
    unknown = [n for n in targets + predictors if n not in cols]
    if unknown:
        raise ValueError(f"columns {unknown} are not in X; X has {cols}")
    both = sorted(set(targets) & set(predictors))
    if both:
        raise ValueError(f"{both} are both targets and predictors")
    frame = X.set_axis(cols, axis=1)
    not_numeric = [
        n
        for n in targets + predictors
        if not (pd.api.types.is_numeric_dtype(frame[n].dtype) or frame[n].dtype == bool)
    ]
    if not_numeric:
        raise ValueError(
            f"columns {not_numeric} are not numeric; encode categorical columns as integer "
            "codes 0 .. K-1"
        )
    P = frame[predictors].to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isinf(P).any():
        raise ValueError("predictor columns hold infinite values")

    out = []
    for target in targets:
        y = frame[target].to_numpy(dtype=np.float64, na_value=np.nan)
        if np.isinf(y).any():
            raise ValueError(f"target column {target!r} holds infinite values")
        observed = ~np.isnan(y)
        n = int(observed.sum())
        if n < MIN_ROWS:
            logger.info(
                "no imputer for %r at %s: %d observed rows, need at least %d",
                target,
                owner,
                n,
                MIN_ROWS,
            )
            continue
        Xt, center = _fill_with_mean(P[observed], predictors, target)
        yt = y[observed]
        if target in categories:
            imp = _fit_categorical(
                target, Xt, yt, center, predictors, categories[target], owner, cv, random_state
            )
        else:
            imp = _fit_numeric(target, Xt, yt, center, predictors, owner, cv, random_state)
        problem = imputer_problem(imp)
        if problem is not None:  # no receiver would read it
            logger.warning("no imputer for %r at %s: the fit's %s", target, owner, problem)
            continue
        out.append(imp)
    return ImputerSet(out)


def _fill_with_mean(P: np.ndarray, predictors: list[str], target: str):
    """Replace NaN by the column mean; an all-NaN column gets mean 0."""
    nan = np.isnan(P)
    counts = (~nan).sum(axis=0)
    sums = np.where(nan, 0.0, P).sum(axis=0)
    center = np.divide(sums, counts, out=np.zeros(P.shape[1]), where=counts > 0)
    empty = [predictors[j] for j in np.flatnonzero(counts == 0)]
    if empty:
        logger.info("predictors %s are missing on every row with %r observed", empty, target)
    return np.where(nan, center, P), center


def _design(Xt: np.ndarray) -> np.ndarray:
    """Model input: a single constant column when there are no predictors."""
    return Xt if Xt.shape[1] else np.zeros((Xt.shape[0], 1))


def _cv_scores(estimator, X, y, splitter, scoring: str) -> np.ndarray:
    """Cross-validated scores; NaN where a fold failed or the folds cannot be made."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return cross_val_score(
                estimator, X, y, cv=splitter, scoring=scoring, error_score=np.nan
            )
        except ValueError:  # e.g. more folds than rows
            return np.array([np.nan])


def _fit_numeric(target, Xt, yt, center, predictors, owner, cv, random_state) -> Imputer:
    D = _design(Xt)
    model = LinearRegression().fit(D, yt)
    p = Xt.shape[1]
    coef = np.asarray(model.coef_, dtype=np.float64).reshape(-1)[:p]
    if cv is None:
        scores = np.array([r2_score(yt, model.predict(D))])
    else:
        splitter = KFold(cv, shuffle=True, random_state=random_state)
        scores = _cv_scores(LinearRegression(), D, yt, splitter, "r2")
    if np.all(np.isfinite(scores)):
        score = float(scores.mean())
    else:
        score = float(r2_score(yt, model.predict(D)))
        logger.info(
            "imputer for %r at %s: cross-validation failed; using the in-sample R^2 %.3f",
            target,
            owner,
            score,
        )
    return Imputer(
        feature=target,
        kind="numeric",
        predictors=list(predictors),
        intercept=np.array([float(model.intercept_)]),
        coef=coef,
        center=center,
        scale=np.ones(p),
        levels=np.zeros(0, dtype=np.int64),
        n_levels=0,
        score=score,
        n_train=int(yt.shape[0]),
        owner=owner,
    )


def _fit_categorical(
    target, Xt, yt, center, predictors, level_names, owner, cv, random_state
) -> Imputer:
    n_levels = len(level_names)
    ok = (yt == np.round(yt)) & (yt >= 0) & (yt < n_levels)
    if not ok.all():
        bad = sorted(set(yt[~ok].tolist()))[:5]
        raise ValueError(
            f"categorical column {target!r} has {n_levels} levels; its codes must be integers "
            f"in [0, {n_levels - 1}], got {bad}"
        )
    codes = yt.astype(np.int64)
    levels, counts = np.unique(codes, return_counts=True)
    p = Xt.shape[1]
    std = Xt.std(axis=0)
    scale = np.where(std > 0, std, 1.0)
    common = dict(
        feature=target,
        kind="categorical",
        predictors=list(predictors),
        center=center,
        scale=scale,
        levels=levels,
        n_levels=n_levels,
        n_train=int(codes.shape[0]),
        owner=owner,
    )
    if levels.shape[0] == 1:
        logger.info(
            "imputer for %r at %s: a single observed level %d; constant model with score 0",
            target,
            owner,
            int(levels[0]),
        )
        return Imputer(intercept=np.zeros(1), coef=np.zeros((1, p)), score=0.0, **common)

    Z = _design((Xt - center) / scale)
    model = LogisticRegression(max_iter=1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(Z, codes)
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):
        logger.warning("imputer for %r at %s: logistic regression did not converge", target, owner)
    coef = np.asarray(model.coef_, dtype=np.float64)[:, :p]
    intercept = np.asarray(model.intercept_, dtype=np.float64)
    if levels.shape[0] == 2:  # scikit-learn stores one row for the second level
        coef = np.vstack([np.zeros((1, p)), coef])
        intercept = np.array([0.0, intercept[0]])

    if cv is None:
        scores = np.array([f1_score(codes, model.predict(Z), average="macro")])
    else:
        if counts.min() >= cv:
            splitter = StratifiedKFold(cv, shuffle=True, random_state=random_state)
        else:
            splitter = KFold(cv, shuffle=True, random_state=random_state)
        scores = _cv_scores(LogisticRegression(max_iter=1000), Z, codes, splitter, "f1_macro")
    if np.all(np.isfinite(scores)):
        score = float(scores.mean())
    else:
        score = float(f1_score(codes, model.predict(Z), average="macro"))
        logger.info(
            "imputer for %r at %s: too few rows per level for %d-fold cross-validation; "
            "using the in-sample macro F1 %.3f",
            target,
            owner,
            cv,
            score,
        )
    return Imputer(intercept=intercept, coef=coef, score=score, **common)
