"""Time to event with a pooled forest at a site that may lack some of its features."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from .. import rules
from ..model.forest import PooledForest
from ..survival_metrics import (
    brier_losses,
    check_survival_target,
    score_survival,
    survival_target,
)
from ..vocabulary import SURVIVAL_AUTO_METRIC, SURVIVAL_AUTO_METRICS
from .cache import PredictionMemo
from .pooled import PooledForestBase
from .weighting import check_guess_weight, fit_guess_weight

logger = logging.getLogger(__name__)


class PooledForestSurvival(PooledForestBase):
    """Predict survival curves with pooled survival trees, resolving splits on unavailable features.

    The survival counterpart of :class:`~fedforest.PooledForestClassifier`,
    with the same strategies and engines. A survival tree's leaf holds two
    curves on the forest's time grid (:attr:`PooledForest.times`): the
    cumulative hazard (Nelson-Aalen) and the survival probability
    (Kaplan-Meier) of its training rows, as scikit-survival's
    ``RandomSurvivalForest`` keeps them. Where the classifier averages class
    distributions, every strategy averages these curves: ``mp`` gives every
    reachable leaf's curves weighted by the probability of reaching it,
    ``node`` stops at the node and takes its curves, ``wmp`` weighs the
    guessing trees' curves, and so on. ``wmp``'s weight and ``auto``'s choice
    are fitted by the integrated Brier score (``auto_metric``; or a
    concordance index).

    With every feature present, every strategy gives scikit-survival's
    ``predict_cumulative_hazard_function`` and ``predict_survival_function``
    of the same trees at the grid's times, and on a grid of the forest's
    event times its ``predict``.

    Parameters
    ----------
    forest : PooledForest
        Pooled survival trees (``forest.task == "survival"``).
    strategy : str, default="mp"
    imputers : ImputerSet, optional
    feature_std : mapping of str to float, optional
    depth_threshold : int, default=2
    site : str, optional
        This site's name as in ``forest.owners`` (``park``, ``local``).
    random_state : int, numpy Generator or None, default=None
        Seed of the random routing: a row's prediction depends on that row and
        the model only.
    auto_candidates : sequence of str, optional
        Strategies tried by ``strategy="auto"`` (default: all that apply).
    engine : {"auto", "numba", "numpy"}, default="auto"
    guess_weight : float in [0, 1] or "auto", default="auto"
    owner_weights : mapping of str to float, optional
    intersection : PooledForest, optional
        The intersection forest (survival trees on the shared columns, on the
        same grid).
    auto_metric : {"ibs", "cindex", "uno_cindex"}, default="ibs"
        What ``auto`` optimises (:data:`fedforest.vocabulary.SURVIVAL_AUTO_METRICS`);
        ``ibs`` compares candidates by their per-row integrated Brier scores,
        ties within one standard error going to the preferred on held-out
        rows (out of bag the lowest wins).

    The parameters mean what they mean for
    :class:`~fedforest.PooledForestClassifier`; a survival estimator has no
    classes, no voting (tree curves are averaged) and no calibration.

    Attributes
    ----------
    times_ : ndarray of shape (n_times,)
        The time grid of the curves (``forest.times``); ``unique_times_`` is
        the same array, named as scikit-survival names it.
    strategy_ : str
        The strategy in use (set by :meth:`fit`; for ``auto``, the winner).
    selection_scores_ : dict
        ``auto_metric`` per candidate (``auto`` only).
    runner_up_ : str or None
        The second best candidate (``auto`` only).
    guess_weight_ : float
        The guess weight in use (``wmp`` only).
    guess_weight_scores_ : dict
        Integrated Brier score per candidate guess weight.
    diagnostics_ : PredictionDiagnostics
        Details of the last prediction.
    feature_names_in_ : ndarray of str
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sksurv.ensemble import RandomSurvivalForest
    >>> from fedforest import PooledForest, PooledForestSurvival
    >>> from fedforest.survival_metrics import survival_target
    >>> rng = np.random.RandomState(0)
    >>> X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    >>> y = survival_target(rng.exponential(np.exp(-X["a"])), rng.rand(200) < 0.8)
    >>> rsf = RandomSurvivalForest(n_estimators=10, random_state=0).fit(X, y)
    >>> grid = rsf.unique_times_[rsf.is_event_time_]
    >>> forest = PooledForest.from_sksurv(rsf, ["a", "b", "c"], "site-1", times=grid)
    >>> est = PooledForestSurvival(forest, strategy="mp")
    >>> est.predict_survival_function(X[["a", "b"]], return_array=True).shape  # "c" absent
    (200, 159)
    >>> bool(np.allclose(est.predict(X), rsf.predict(X), rtol=1e-12))
    True
    """

    task = "survival"

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
        auto_metric: str = SURVIVAL_AUTO_METRIC,
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
        self.auto_metric = auto_metric

    @property
    def times_(self) -> np.ndarray:
        """The time grid of the predicted curves."""
        return self.forest.times

    @property
    def unique_times_(self) -> np.ndarray:
        """The time grid, as scikit-survival names a forest's times."""
        return self.forest.times

    def _validate_task(self) -> None:
        if self.auto_metric not in SURVIVAL_AUTO_METRICS:
            raise ValueError(
                f"auto_metric={self.auto_metric!r} is not one of {list(SURVIVAL_AUTO_METRICS)}"
            )

    def _on_outputs(self, values: np.ndarray, other: PooledForestBase) -> np.ndarray:
        if not np.array_equal(other.forest.times, self.forest.times):
            raise ValueError(
                "the intersection forest's curves are on another time grid than the pooled "
                "forest's; build both on the grid the sites agreed"
            )
        return values

    def _intersection_estimator(self, forest: PooledForest, strategy: str):
        return PooledForestSurvival(forest, strategy=strategy, random_state=self.random_state)

    def fit(self, X=None, y=None, memo: PredictionMemo | None = None, in_bag=None):
        """Validate the parameters; fit what ``auto`` and ``wmp`` choose on validation rows.

        The pooled forest is already trained: ``fit`` trains nothing. For
        ``auto`` it scores every candidate on the rows ``X``, ``y`` by
        ``auto_metric`` and keeps the best; for ``wmp`` with
        ``guess_weight="auto"`` it fits the guess weight by the integrated
        Brier score.

        Parameters
        ----------
        X : DataFrame, optional
            Validation rows (required for ``auto`` and a fitted ``wmp``).
        y : structured ndarray, optional
            Their survival target (:func:`fedforest.survival_metrics.survival_target`).
        memo : PredictionMemo, optional
            Predictions of ``X`` shared with other estimators of the same forest.
        in_bag : InBag, optional
            Which trees trained on which rows of ``X``: everything is then
            fitted on out-of-bag predictions.

        Returns
        -------
        self
        """
        X = self._input(X)
        X, y, memo, in_bag = self._out_of_bag_rows(X, y, memo, in_bag)
        self._validate_task()
        rule = rules.find(self.strategy)
        if rule is not None and rule.family == rules.CHOICE:
            y = self._targets(X, y, f'strategy="{self.strategy}"')
            metric = self.auto_metric

            def score_candidates(values):
                if metric != "ibs":
                    return {n: self._score(metric, y, v) for n, v in values.items()}, None
                # the integrated Brier score is the mean of the per-row losses: computed once
                losses = {
                    n: brier_losses(y, self._survival(v), self.times_) for n, v in values.items()
                }
                return {n: float(np.mean(loss)) for n, loss in losses.items()}, losses

            return self._fit_choice(X, metric, score_candidates, memo, in_bag)
        self._validate(self.strategy)
        if rule.family == rules.WEIGHTED:
            weight = check_guess_weight(self.guess_weight)
            if isinstance(weight, str):
                y = self._targets(X, y, f'strategy="{self.strategy}" with guess_weight="{weight}"')
                parts = self._wmp_parts(X, self.strategy, memo, in_bag)

                def loss(values: np.ndarray) -> float:
                    return float(np.mean(brier_losses(y, self._survival(values), self.times_)))

                weight, self.guess_weight_scores_ = fit_guess_weight(
                    *parts[:4], None, None, loss=loss
                )
            self.guess_weight_ = weight
        self.strategy_ = self.strategy
        return self

    def _score(self, metric: str, y, values: np.ndarray) -> float:
        return score_survival(
            metric, y, risk=self._risk(values), survival=self._survival(values), grid=self.times_
        )

    @staticmethod
    def _targets(X, y, what: str) -> np.ndarray:
        if X is None or y is None:
            raise ValueError(f"{what} needs fit(X_val, y_val) with validation rows")
        event, time = check_survival_target(y)
        if len(time) != len(X):
            raise ValueError(f"fit: X has {len(X)} rows but y has {len(time)} targets")
        return survival_target(time, event)

    # ------------------------------------------------------------ outputs
    def _curves(self, X, memo=None, in_bag=None, outputs=None) -> np.ndarray:
        X = self._input(X)
        values, self.diagnostics_ = self._predict_values(
            X, self._strategy_in_use(), memo=memo, in_bag=in_bag, outputs=outputs
        )
        return values

    def _half(self, X, which: str, memo=None, in_bag=None) -> np.ndarray:
        """Every row's cumulative hazard (``which="hazard"``) or survival curve.

        Alone, only that half of the leaves' curves is averaged (the same
        numbers, in about half the arithmetic); with a ``memo`` both curves
        are predicted once and shared with the other calls on the same table.
        """
        n = self.forest.n_times
        if memo is not None:
            values = self._curves(X, memo, in_bag)
            return self._hazard(values) if which == "hazard" else self._survival(values)
        return self._curves(X, None, in_bag, (0, n) if which == "hazard" else (n, 2 * n))

    def _hazard(self, values: np.ndarray) -> np.ndarray:
        return values[:, : self.forest.n_times]

    def _survival(self, values: np.ndarray) -> np.ndarray:
        return values[:, self.forest.n_times :]

    def _risk(self, values: np.ndarray) -> np.ndarray:
        return self._hazard(values).sum(axis=1)

    def predict(self, X, memo: PredictionMemo | None = None, in_bag=None) -> np.ndarray:
        """The risk score of every row: its cumulative hazard summed over the time grid.

        As scikit-survival's ``RandomSurvivalForest.predict`` (the expected
        number of events, summed over the forest's event times): equal to it
        on a grid of those times. A higher score means an earlier event.

        Parameters
        ----------
        X : DataFrame or ndarray of shape (n_rows, n_columns)
            DataFrame columns are matched by name; the features it lacks are
            missing on every row.
        memo : PredictionMemo, optional
        in_bag : InBag, optional
            Predict each row out of bag (rows without an out-of-bag tree get NaN).

        Returns
        -------
        ndarray of shape (n_rows,)
        """
        return self._half(X, "hazard", memo, in_bag).sum(axis=1)

    def predict_cumulative_hazard_function(
        self, X, return_array: bool = False, memo: PredictionMemo | None = None
    ):
        """Every row's cumulative hazard on the time grid.

        Parameters
        ----------
        X : DataFrame or ndarray
        return_array : bool, default=False
            An array of shape ``(n_rows, n_times)`` (the curve at :attr:`times_`),
            or, as scikit-survival returns by default, one
            ``sksurv.functions.StepFunction`` per row.
        memo : PredictionMemo, optional
            Predictions of ``X`` shared with other calls (both curves predicted
            once).

        Returns
        -------
        ndarray
        """
        return self._as_functions(self._half(X, "hazard", memo), return_array)

    def predict_survival_function(
        self, X, return_array: bool = False, memo: PredictionMemo | None = None
    ):
        """Every row's survival probability on the time grid.

        Parameters
        ----------
        X : DataFrame or ndarray
        return_array : bool, default=False
            As for :meth:`predict_cumulative_hazard_function`.
        memo : PredictionMemo, optional
            As for :meth:`predict_cumulative_hazard_function`.

        Returns
        -------
        ndarray
        """
        return self._as_functions(self._half(X, "survival", memo), return_array)

    def _as_functions(self, curves: np.ndarray, return_array: bool):
        if return_array:
            return curves
        from sksurv.functions import StepFunction

        return np.array([StepFunction(x=self.times_, y=row) for row in curves])

    def score(self, X, y) -> float:
        """Harrell's concordance index of :meth:`predict` on ``X`` against ``y``.

        Returns
        -------
        float
        """
        return score_survival("cindex", y, risk=self.predict(X))
