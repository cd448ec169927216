"""Regression with a pooled forest at a site that may lack some of its features."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
from sklearn.base import RegressorMixin

from .. import rules
from ..metrics import score_values, squared_errors
from ..model.forest import PooledForest
from ..vocabulary import REGRESSION_AUTO_METRIC
from .cache import PredictionMemo
from .pooled import PooledForestBase
from .weighting import check_guess_weight, fit_guess_weight

logger = logging.getLogger(__name__)


class PooledForestRegressor(RegressorMixin, PooledForestBase):
    """Predict a number with pooled regression trees, resolving splits on unavailable features.

    The regression counterpart of :class:`~fedforest.PooledForestClassifier`,
    with the same strategies (``fpv``, ``pr``, ``mi``, ``ipr``, ``mp``,
    ``ss``, ``node``, ``wmp``, ``park``, ``local``, ``intersection``,
    ``auto``) and the same engines. A tree's prediction is the mean target of
    the leaf a row reaches; where the strategies average class distributions,
    they average these means:

    ========== ============================================================
    ``fpv``    the mean of the trees that reach a leaf without guessing
    ``pr``     as ``fpv`` above ``depth_threshold``, a random branch
               (P(right) = N_right / N_node) below it
    ``mi``     the imputed value routes the row
    ``ipr``    a random branch with the imputer's probabilities
    ``mp``     every reachable leaf's mean, weighted by the probability of
               reaching it (the ``ipr`` probabilities, or N_right / N_node):
               the expected leaf value
    ``ss``     the node's surrogate split
    ``node``   stop at the node: the mean of its training rows is the tree's
               prediction
    ``wmp``    ``mp`` with trees that guessed weighted ``guess_weight``
               (fitted on validation rows by squared error)
    ``park``, ``local``, ``intersection``: as for the classifier
    ``auto``   the candidate with the lowest validation RMSE (on held-out
               rows, ties within one standard error of the per-row
               squared errors: the preferred; out of bag the lowest)
    ========== ============================================================

    With every feature present, every strategy gives
    ``RandomForestRegressor.predict`` of the same trees, bit for bit.

    Parameters
    ----------
    forest : PooledForest
        Pooled regression trees (``forest.task == "regression"``).
    strategy : str, default="mp"
    imputers : ImputerSet, optional
    feature_std : mapping of str to float, optional
    depth_threshold : int, default=2
    site : str, optional
        This site's name as in ``forest.owners`` (``park``, ``local``).
    random_state : int, numpy Generator or None, default=None
        Seed of the random routing, as for the classifier: a row's prediction
        depends on that row and the model only.
    auto_candidates : sequence of str, optional
        Strategies tried by ``strategy="auto"`` (default: all that apply).
    engine : {"auto", "numba", "numpy"}, default="auto"
    guess_weight : float in [0, 1] or "auto", default="auto"
    owner_weights : mapping of str to float, optional
    intersection : PooledForest, optional
        The intersection forest (regression trees on the shared columns).

    The parameters mean what they mean for
    :class:`~fedforest.PooledForestClassifier`; a regressor has no classes,
    no voting (tree means are averaged) and no calibration.

    Attributes
    ----------
    strategy_ : str
        The strategy in use (set by :meth:`fit`; for ``auto``, the winner).
    selection_scores_ : dict
        Validation RMSE per candidate (``auto`` only).
    runner_up_ : str or None
        The second best candidate (``auto`` only).
    guess_weight_ : float
        The guess weight in use (``wmp`` only).
    guess_weight_scores_ : dict
        Validation mean squared error per candidate guess weight.
    diagnostics_ : PredictionDiagnostics
        Details of the last :meth:`predict` call.
    feature_names_in_ : ndarray of str
        The model's features (``forest.feature_names``): the names a DataFrame
        is matched by, and an ndarray's column order.
    n_features_in_ : int
        The number of the model's features.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from fedforest import PooledForest, PooledForestRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    >>> y = 2 * X["a"] - X["c"] + rng.normal(scale=0.1, size=200)
    >>> rf = RandomForestRegressor(n_estimators=20, random_state=0).fit(X, y)
    >>> forest = PooledForest.from_sklearn(rf, ["a", "b", "c"], owner="site-1")
    >>> reg = PooledForestRegressor(forest, strategy="mp")
    >>> reg.predict(X[["a", "b"]]).shape   # column "c" is not available here
    (200,)
    >>> bool(np.array_equal(reg.predict(X), rf.predict(X)))
    True
    >>> reg.n_features_in_
    3
    """

    task = "regression"

    def __init__(
        self,
        forest: PooledForest,
        strategy: str = "mp",
        imputers=None,
        feature_std: Mapping[str, float] | None = None,
        depth_threshold: int = 2,
        site: str | None = None,
        random_state=None,
        auto_candidates=None,
        engine: str = "auto",
        guess_weight="auto",
        owner_weights: Mapping[str, float] | None = None,
        intersection: PooledForest | None = None,
    ):
        self.forest = forest
        self.strategy = strategy
        self.imputers = imputers
        self.feature_std = feature_std
        self.depth_threshold = depth_threshold
        self.site = site
        self.random_state = random_state
        self.auto_candidates = auto_candidates
        self.engine = engine
        self.guess_weight = guess_weight
        self.owner_weights = owner_weights
        self.intersection = intersection

    def fit(self, X=None, y=None, memo: PredictionMemo | None = None, in_bag=None):
        """Validate the parameters; fit what ``auto`` and ``wmp`` choose on validation rows.

        The pooled forest is already trained: ``fit`` trains nothing. For
        ``auto`` it scores every candidate on the validation rows ``X``, ``y``
        by RMSE and keeps the best; for ``wmp`` with ``guess_weight="auto"`` it
        fits the guess weight by the mean squared error.

        Parameters
        ----------
        X : DataFrame, optional
            Validation rows (required for ``auto`` and a fitted ``wmp``).
        y : array-like, optional
            Their targets.
        memo : PredictionMemo, optional
            Predictions of ``X`` shared with other estimators of the same
            forest and settings (:mod:`fedforest.prediction.cache`).
        in_bag : InBag, optional
            Which trees trained on which rows of ``X``: everything is then
            fitted on out-of-bag predictions (as for the classifier; rows
            without an out-of-bag tree are left out, their number logged).

        Returns
        -------
        self
        """
        X = self._input(X)
        X, y, memo, in_bag = self._out_of_bag_rows(X, y, memo, in_bag)
        rule = rules.find(self.strategy)
        if rule is not None and rule.family == rules.CHOICE:
            y = self._targets(X, y, f'strategy="{self.strategy}"')

            def score_candidates(values):
                predicted = {name: v[:, 0] for name, v in values.items()}
                scores = {
                    n: score_values(REGRESSION_AUTO_METRIC, y, p) for n, p in predicted.items()
                }
                return scores, {n: squared_errors(y, p) for n, p in predicted.items()}

            return self._fit_choice(X, REGRESSION_AUTO_METRIC, score_candidates, memo, in_bag)
        self._validate(self.strategy)
        if rule.family == rules.WEIGHTED:
            weight = check_guess_weight(self.guess_weight)
            if isinstance(weight, str):
                y = self._targets(X, y, f'strategy="{self.strategy}" with guess_weight="{weight}"')
                parts = self._wmp_parts(X, self.strategy, memo, in_bag)
                weight, self.guess_weight_scores_ = fit_guess_weight(*parts[:4], y, None)
            self.guess_weight_ = weight
        self.strategy_ = self.strategy
        return self

    @staticmethod
    def _targets(X, y, what: str) -> np.ndarray:
        if X is None or y is None:
            raise ValueError(f"{what} needs fit(X_val, y_val) with validation rows")
        y = np.asarray(y, dtype=float)
        if len(y) != len(X):
            raise ValueError(f"fit: X has {len(X)} rows but y has {len(y)} targets")
        if not np.isfinite(y).all():
            raise ValueError("fit: y has missing or infinite targets")
        return y

    def predict(self, X, memo: PredictionMemo | None = None, in_bag=None) -> np.ndarray:
        """The predicted number of every row.

        Parameters
        ----------
        X : DataFrame or ndarray of shape (n_rows, n_columns)
            Under the column rule: DataFrame columns are matched by name; the
            features it lacks are missing on every row, and its other columns
            are ignored (one warning names them). An ndarray must have
            :attr:`n_features_in_` columns, in :attr:`feature_names_in_` order.
        memo : PredictionMemo, optional
            Predictions of ``X`` shared with other estimators of the same
            forest and settings (:mod:`fedforest.prediction.cache`).
        in_bag : InBag, optional
            Predict each row out of bag (:mod:`fedforest.prediction.out_of_bag`);
            a row that every tree trained on gets NaN.

        Returns
        -------
        ndarray of shape (n_rows,)
        """
        X = self._input(X)
        values, self.diagnostics_ = self._predict_values(
            X, self._strategy_in_use(), memo=memo, in_bag=in_bag
        )
        return values[:, 0]
