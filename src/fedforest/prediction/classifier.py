"""Prediction with a pooled forest at a site that may lack some of its features."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
from sklearn.base import ClassifierMixin

from .. import rules
from ..model.forest import PooledForest
from ..vocabulary import DEFAULT_AUTO_METRIC
from .cache import PredictionMemo
from .calibration import Calibrator, check_calibration, fit_calibration, training_prior
from .diagnostics import on_classes
from .out_of_bag import memo_key
from .pooled import PooledForestBase
from .selection import choose_calibrated, default_candidates
from .weighting import check_guess_weight, fit_guess_weight, tree_weights

logger = logging.getLogger(__name__)


class PooledForestClassifier(ClassifierMixin, PooledForestBase):
    """Predict with a pooled forest, resolving splits on unavailable features.

    A feature is unavailable for a row when ``X`` has no column for it or the
    row's value is NaN. A node that saw missing values for its feature in
    training follows its learned direction; every other node on an
    unavailable feature is resolved by ``strategy``:

    ========== ============================================================
    ``fpv``    discard the tree for this row
    ``pr``     depth < ``depth_threshold``: discard; else go right with
               probability N_right / N_node
    ``mi``     compare the imputed value with the threshold (no imputer:
               ``pr``)
    ``ipr``    go right with probability sigmoid((imputed - t) / sigma)
               (categorical: imputer probability of the levels > t; no
               imputer: ``pr``)
    ``mp``     follow both children, weighted by the ``ipr`` probabilities
               (no imputer: N_right / N_node); never discards
    ``ss``     use the node's surrogate split (none: ``pr``)
    ``node``   stop at the node: its own class distribution is the tree's
               prediction (ForestFire's fallback); never discards
    ``wmp``    ``mp`` with a tree that had to guess for the row weighted
               ``guess_weight`` against 1 for a tree that did not (fitted on
               validation rows in :meth:`fit` by default;
               :mod:`fedforest.prediction.weighting`)
    ``park``   only the site's own trees and the trees whose every split
               feature the site has
    ``local``  only the site's own trees
    ``intersection`` only the ``intersection`` forest (its columns are
               every site's)
    ``auto``   choose the best of the others (except ``wmp``; with
               ``intersection`` when given) on validation rows in :meth:`fit`
    ========== ============================================================

    Parameters
    ----------
    forest : PooledForest
        The pooled trees.
    strategy : str, default="mp"
        One of the strategies above.
    imputers : ImputerSet, optional
        Imputers for features the site may lack (``mi``, ``ipr``, ``mp``).
    feature_std : mapping of str to float, optional
        Pooled standard deviation of numeric features (``ipr``, ``mp``).
    depth_threshold : int, default=2
        Depth above which ``pr`` (and the strategies falling back to it)
        discard a tree rather than guess.
    voting : {"soft", "hard"}, default="soft"
        ``soft`` averages leaf class distributions (as scikit-learn does),
        ``hard`` averages one-hot votes. ``mp`` always averages distributions.
    site : str, optional
        This site's name as in ``forest.owners`` (``park``, ``local``).
    random_state : int, numpy Generator or None, default=None
        Seed of the random routing of ``pr`` and ``ipr`` (and of ``mi`` and
        ``ss`` where they fall back to the ``pr`` rule): each branch is a hash
        of the seed, the tree, the depth and the row's own values
        (:mod:`fedforest.prediction.draws`), so a row's prediction depends on
        that row and the model only, whatever its batch. ``None`` is seed 0;
        a Generator gives one seed per prediction call.
    auto_candidates : sequence of str, optional
        Strategies tried by ``strategy="auto"`` (default: all that apply,
        :func:`~fedforest.prediction.selection.default_candidates`).
    auto_metric : str, default="log_loss"
        Metric ``strategy="auto"`` optimises (one of
        :data:`~fedforest.vocabulary.AUTO_METRICS`; lower is better for
        ``log_loss`` and ``brier``, proper scoring rules that see calibration).
    guess_weight : float in [0, 1] or "auto", default="auto"
        ``wmp`` only: weight of a tree that guesses against 1 for a tree
        that does not. ``auto`` fits it on the validation rows given to
        :meth:`fit`, from :data:`fedforest.prediction.weighting.GUESS_WEIGHTS`.
    calibration : {"none", "prior", "sigmoid", "isotonic", "auto"}, default="none"
        Site-side calibration of the probabilities, fitted on the validation
        rows given to :meth:`fit` after the strategy
        (:mod:`fedforest.prediction.calibration`: scikit-learn's
        ``CalibratedClassifierCV`` for ``sigmoid`` and ``isotonic``, Bayes'
        rule on the class priors for ``prior``; ``auto`` keeps the lowest
        cross-fitted validation log-loss). With ``strategy="auto"`` every
        candidate is calibrated before it is scored.
    owner_weights : mapping of str to float, optional
        Pooling weight of each site's trees (``forest.owners``): a row's trees
        are averaged with these weights (e.g. each site's training rows).
        Default: every tree counts the same.
    intersection : PooledForest, optional
        The intersection forest (trained on the columns every site has):
        ``strategy="intersection"`` predicts with it alone (``fpv`` on its
        columns), and ``auto`` counts it among its candidates. A DataFrame
        may then hold the columns of either forest.
    engine : {"auto", "numba", "numpy"}, default="auto"
        What runs the traversals scikit-learn's compiled trees cannot (``mp``
        and ``ipr`` with absent columns, rows with NaN in columns the site
        has, rows that fall back to ``mp``): ``numba``, compiled kernels
        (needs numba: ``pip install 'fedforest[fast]'``), or ``numpy``,
        vectorised numpy. ``auto`` uses numba when it can be imported and the
        traversal has at least :data:`AUTO_NUMBA_PAIRS` (row, tree) pairs.
        Both give the same probabilities bit for bit, draws included.

    Attributes
    ----------
    classes_ : ndarray
        Class labels, the column order of :meth:`predict_proba`.
    strategy_ : str
        The strategy in use (set by :meth:`fit`; for ``auto``, the winner).
    selection_scores_ : dict
        Validation score per candidate strategy (``auto`` only; cross-fitted
        when calibrated).
    runner_up_ : str or None
        The second best candidate (``auto`` only).
    calibrator_ : Calibrator
        The fitted calibration (identity for ``calibration="none"``).
    calibration_skipped_ : dict of str to str
        The calibration methods that could not be fitted on the validation rows
        (:attr:`~fedforest.prediction.calibration.CalibrationFit.skipped`), and why
        (``auto``: those of the strategy it chose).
    feature_names_in_ : ndarray of str
        The model's features (``forest.feature_names``): the names a DataFrame
        is matched by, and an ndarray's column order.
    n_features_in_ : int
        The number of the model's features.
    guess_weight_ : float
        The guess weight in use (``wmp`` only; fitted with ``"auto"``).
    guess_weight_scores_ : dict
        Validation Brier score per candidate guess weight (``wmp`` with
        ``guess_weight="auto"`` only).
    diagnostics_ : PredictionDiagnostics
        Details of the last :meth:`predict_proba` call.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from fedforest import PooledForest, PooledForestClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    >>> y = (X["a"] + X["c"] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=20, random_state=0).fit(X, y)
    >>> forest = PooledForest.from_sklearn(rf, ["a", "b", "c"], owner="site-1")
    >>> clf = PooledForestClassifier(forest, strategy="pr", random_state=0)
    >>> clf.predict_proba(X[["a", "b"]]).shape   # column "c" is not available here
    (200, 2)
    >>> bool(np.array_equal(clf.predict_proba(X), rf.predict_proba(X)))
    True
    >>> clf.feature_names_in_.tolist(), clf.n_features_in_
    (['a', 'b', 'c'], 3)
    """

    def __init__(
        self,
        forest: PooledForest,
        strategy: str = "mp",
        imputers=None,
        feature_std: Mapping[str, float] | None = None,
        depth_threshold: int = 2,
        voting: str = "soft",
        site: str | None = None,
        random_state=None,
        auto_candidates=None,
        auto_metric: str = DEFAULT_AUTO_METRIC,
        engine: str = "auto",
        guess_weight="auto",
        calibration: str = "none",
        owner_weights: Mapping[str, float] | None = None,
        intersection: PooledForest | None = None,
    ):
        self.forest = forest
        self.strategy = strategy
        self.imputers = imputers
        self.feature_std = feature_std
        self.depth_threshold = depth_threshold
        self.voting = voting
        self.site = site
        self.random_state = random_state
        self.auto_candidates = auto_candidates
        self.auto_metric = auto_metric
        self.engine = engine
        self.guess_weight = guess_weight
        self.calibration = calibration
        self.owner_weights = owner_weights
        self.intersection = intersection

    # -------------------------------------------------------------- setup
    @property
    def classes_(self) -> np.ndarray:
        """Class labels of the forest, in ``predict_proba`` column order."""
        return np.asarray(self.forest.classes)

    def _validate_task(self) -> None:
        check_calibration(self.calibration)

    def _intersection_estimator(self, forest: PooledForest, strategy: str):
        return PooledForestClassifier(
            forest, strategy=strategy, voting=self.voting, random_state=self.random_state
        )

    def _on_outputs(self, values: np.ndarray, other: PooledForestBase) -> np.ndarray:
        return on_classes(values, other.classes_, self.classes_)

    def fit(self, X=None, y=None, memo: PredictionMemo | None = None, in_bag=None):
        """Validate the parameters; fit what ``auto`` and ``wmp`` choose on validation rows.

        The pooled forest is already trained: ``fit`` trains nothing. For
        ``auto`` it scores every candidate strategy on the validation rows
        ``X``, ``y`` and keeps the best (:func:`fedforest.select_strategy`);
        for ``wmp`` with ``guess_weight="auto"`` it fits the guess weight
        (:func:`fedforest.prediction.weighting.fit_guess_weight`); the
        calibrator is fitted on the same rows.

        Parameters
        ----------
        X : DataFrame, optional
            Validation rows (required for ``auto`` and a fitted ``wmp``), or
            with ``in_bag`` the site's training rows.
        y : array-like, optional
            Their labels.
        memo : PredictionMemo, optional
            Predictions of ``X`` shared with other estimators of the same
            forest and settings (:mod:`fedforest.prediction.cache`).
        in_bag : InBag, optional
            Which trees trained on which rows of ``X``
            (:class:`~fedforest.prediction.out_of_bag.InBag`): everything is
            then fitted on out-of-bag predictions, each row scored by the
            trees that did not train on it. Rows without such a tree are left
            out (their number logged).

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np, pandas as pd
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from fedforest import PooledForest, PooledForestClassifier
        >>> from fedforest.model.in_bag import sample_counts
        >>> from fedforest.prediction.out_of_bag import InBag
        >>> rng = np.random.RandomState(0)
        >>> X = pd.DataFrame(rng.normal(size=(150, 2)), columns=["a", "b"])
        >>> y = (X["a"] > 0).astype(int)
        >>> rf = RandomForestClassifier(n_estimators=20, random_state=0).fit(X, y)
        >>> forest = PooledForest.from_sklearn(rf, ["a", "b"], owner="s1")
        >>> bag = InBag(sample_counts(rf, 150) > 0)
        >>> clf = PooledForestClassifier(forest, strategy="wmp").fit(X, y, in_bag=bag)
        >>> 0.0 <= clf.guess_weight_ <= 1.0
        True
        """
        X = self._input(X)
        X, y, memo, in_bag = self._out_of_bag_rows(X, y, memo, in_bag)
        calibrate = check_calibration(self.calibration) != "none"
        if calibrate and (X is None or y is None):
            raise ValueError(
                f"calibration={self.calibration!r} is fitted in fit(X_val, y_val) with "
                "validation rows; call it with them, or use calibration='none'"
            )
        self.calibrator_ = Calibrator("none", self.classes_)
        self.calibration_skipped_ = {}
        rule = rules.find(self.strategy)
        if rule is not None and rule.family == rules.CHOICE:
            return self._fit_choice(X, y, memo, in_bag)
        self._validate(self.strategy)
        self.strategy_ = self.strategy
        if rule.family == rules.WEIGHTED:
            self.guess_weight_ = self._fit_weight(X, y, memo, in_bag)
        if calibrate:
            fit = self._calibration_fit(X, y, self.strategy_, memo, in_bag)
            self.calibrator_ = fit.calibrator
            self.calibration_scores_ = fit.log_losses
            self.calibration_skipped_ = dict(fit.skipped)
        return self

    def _fit_choice(self, X, y, memo, in_bag=None) -> PooledForestClassifier:
        """``auto``: the best candidate on the validation rows, calibrated as asked."""
        if X is None or y is None:
            raise ValueError(
                f'strategy="{self.strategy}" needs fit(X_val, y_val) with validation rows'
            )
        candidates = self.auto_candidates
        if candidates is None:
            candidates = default_candidates(
                self.forest.owners, self.site, self.intersection is not None
            )
        chosen = choose_calibrated(
            lambda name: self._predict_values(X, name, memo=memo, in_bag=in_bag)[0],
            candidates,
            y,
            self.classes_,
            self.auto_metric,
            self.calibration,
            self._training_prior,
            self._seed(),
            fit_for=lambda name: self._calibration_fit(X, y, name, memo, in_bag),
            standard_error_ties=in_bag is None,
        )
        self.strategy_ = chosen.best
        self.runner_up_ = chosen.runner_up
        self.selection_scores_ = chosen.scores
        self.calibrator_ = chosen.fits[chosen.best].calibrator
        self.calibration_skipped_ = dict(chosen.fits[chosen.best].skipped)
        self.candidate_calibrations_ = {k: f.calibrator.method for k, f in chosen.fits.items()}
        return self

    def _fit_weight(self, X, y, memo, in_bag=None) -> float:
        """``wmp``'s guess weight: as given, or fitted on the validation rows."""
        weight = check_guess_weight(self.guess_weight)
        if not isinstance(weight, str):
            return weight
        if X is None or y is None:
            raise ValueError(
                f'strategy="{self.strategy}" with guess_weight="{weight}" needs fit(X_val, '
                "y_val) with validation rows, or a number as guess_weight"
            )
        y = np.asarray(y)
        if len(y) != len(X):
            raise ValueError(f"fit: X has {len(X)} rows but y has {len(y)} labels")
        parts = self._wmp_parts(X, self.strategy, memo, in_bag)
        weight, self.guess_weight_scores_ = fit_guess_weight(*parts[:4], y, self.classes_)
        return weight

    def _calibration_fit(self, X, y, strategy: str, memo=None, in_bag=None):
        """``strategy``'s calibration on the validation rows ``X``, ``y``.

        Shared through ``memo`` (:func:`~fedforest.federation.evaluation.evaluate_strategies`:
        the same rows, settings and seed give the same fit), so ``auto`` reuses
        what each strategy's own row fitted.
        """

        def compute():
            return fit_calibration(
                self._predict_values(X, strategy, memo=memo, in_bag=in_bag)[0],
                y,
                self.classes_,
                self.calibration,
                self._training_prior(strategy),
                self._seed(),
            )

        if memo is None:
            return compute()
        key = ("calibration", id(X), id(y), strategy, self.calibration) + memo_key(in_bag)
        return memo.get_or_compute(key, compute)

    def _training_prior(self, strategy: str) -> np.ndarray:
        """The class distribution the trees of ``strategy`` were trained on (weighted)."""
        rule = rules.get(strategy)
        if rule.needs_intersection:
            forest, weights = self.intersection, None
        else:
            forest, weights = self.forest, tree_weights(self.forest, self.owner_weights)
        trees = np.arange(forest.n_trees)
        if rule.needs_site:
            trees = np.flatnonzero(forest.owner_mask(self.site))
        prior = training_prior(
            forest.value, forest.tree_start[trees], None if weights is None else weights[trees]
        )
        return on_classes(prior[None, :], forest.classes, self.classes_)[0]

    # --------------------------------------------------------- prediction
    def predict_proba(self, X, memo: PredictionMemo | None = None, in_bag=None) -> np.ndarray:
        """Class probabilities, columns in :attr:`classes_` order.

        Parameters
        ----------
        X : DataFrame or ndarray of shape (n_rows, n_columns)
            Rows to predict, under the column rule: DataFrame columns are
            matched by name; the features it lacks are missing on every row,
            and its other columns are ignored (one warning names them). An
            ndarray must have :attr:`n_features_in_` columns, in
            :attr:`feature_names_in_` order.
        memo : PredictionMemo, optional
            Predictions of ``X`` shared with other estimators of the same
            forest and settings (:mod:`fedforest.prediction.cache`).
        in_bag : InBag, optional
            Predict each row out of bag: only by the trees that did not train
            on it (:mod:`fedforest.prediction.out_of_bag`). A row that every
            tree trained on gets NaN (``diagnostics_.unscored_rows``).

        Returns
        -------
        ndarray of shape (n_rows, n_classes)

        Raises
        ------
        ValueError
            A DataFrame with none of the model's features, or an ndarray with
            another number of columns.
        """
        X = self._input(X)
        proba, self.diagnostics_ = self._predict_values(
            X, self._strategy_in_use(), memo=memo, in_bag=in_bag
        )
        if check_calibration(self.calibration) != "none":
            if not hasattr(self, "calibrator_"):
                raise ValueError(
                    f"calibration={self.calibration!r} is fitted in fit(X_val, y_val); call fit "
                    "first"
                )
            unscored = self.diagnostics_.unscored_rows
            if unscored is None or not unscored.any():
                proba = self.calibrator_.transform(proba)
            else:  # rows without an out-of-bag prediction stay NaN
                proba = proba.copy()
                proba[~unscored] = self.calibrator_.transform(proba[~unscored])
        return proba

    def predict(self, X, memo: PredictionMemo | None = None) -> np.ndarray:
        """Most probable class of every row (ties: the first in :attr:`classes_`)."""
        proba = self.predict_proba(X, memo)
        return self.classes_[np.argmax(proba, axis=1)]


def select_strategy(forest, X_val, y_val, candidates=None, metric=DEFAULT_AUTO_METRIC, **params):
    """Score strategies on validation rows and return the best.

    Parameters
    ----------
    forest : PooledForest or PooledForestClassifier
        The pooled forest, or a classifier whose other parameters (imputers,
        feature_std, site, seed, ...) are used for every candidate.
    X_val : DataFrame
        Validation rows, with the site's columns.
    y_val : array-like
        Their labels.
    candidates : sequence of str, optional
        Strategies to try; default
        :func:`~fedforest.prediction.selection.default_candidates` (``park``
        and ``local`` only when ``site`` trained trees of the forest).
    metric : str, default="log_loss"
        Metric to optimise (one of :data:`~fedforest.vocabulary.AUTO_METRICS`).
    **params
        Classifier parameters when ``forest`` is a PooledForest.

    Returns
    -------
    best : str
        The best strategy (ties: the first in
        :func:`fedforest.rules.preference`).
    scores : dict of str to float
        Validation score of every candidate.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from fedforest import PooledForest, select_strategy
    >>> rng = np.random.RandomState(0)
    >>> X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    >>> y = (X["a"] + X["c"] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=20, random_state=0).fit(X[:200], y[:200])
    >>> forest = PooledForest.from_sklearn(rf, ["a", "b", "c"], owner="s1")
    >>> best, scores = select_strategy(forest, X[200:][["a", "b"]], y[200:],
    ...                                candidates=["fpv", "mp"], random_state=0)
    >>> best in ("fpv", "mp")
    True
    """
    if isinstance(forest, PooledForestClassifier):
        settings = {**forest.get_params(deep=False), **params}
    else:
        settings = {**params, "forest": forest}
    settings.update(strategy="auto", auto_candidates=candidates, auto_metric=metric)
    clf = PooledForestClassifier(**settings).fit(X_val, y_val)
    return clf.strategy_, clf.selection_scores_
