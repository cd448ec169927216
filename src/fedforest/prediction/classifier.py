"""Prediction with a pooled forest at a site that may lack some of its features."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin

from ..model.forest import PooledForest
from ..model.imputers import ImputerSet
from ..model.inputs import to_global_matrix
from ..model.traversal import CompiledForest
from ..vocabulary import DEFAULT_AUTO_METRIC, ENGINES, TREE_SELECTION, VOTING
from . import fastpath
from .calibration import Calibrator, check_calibration, fit_calibration, training_prior
from .diagnostics import PredictionDiagnostics, on_classes
from .engines import AUTO_NUMBA_PAIRS, load_kernels, marginal, resolved_leaves
from .routing import average_leaves
from .selection import CANDIDATES, choose_calibrated, default_candidates
from .strategies import STATIC, Strategy
from .weighting import (
    check_guess_weight,
    fit_guess_weight,
    tree_weights,
    weighted_marginal,
)

logger = logging.getLogger(__name__)

_F32_MAX = float(np.finfo(np.float32).max)


class PooledForestClassifier(ClassifierMixin, BaseEstimator):
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
        Seed of the random routing of ``pr`` and ``ipr``: the same seed gives
        the same predictions.
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
        Both give the same probabilities bit for bit, and the same draws for
        the same ``random_state``.

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

    def _validate(self, strategy: str) -> None:
        if not isinstance(self.forest, PooledForest):
            raise TypeError(
                f"forest must be a fedforest.PooledForest, got {type(self.forest).__name__}"
            )
        if strategy not in CANDIDATES:
            raise ValueError(f"strategy={strategy!r} is not one of {list(CANDIDATES) + ['auto']}")
        check_calibration(self.calibration)
        if strategy == "intersection" and not isinstance(self.intersection, PooledForest):
            raise ValueError(
                'strategy="intersection" needs intersection=<the intersection PooledForest>'
            )
        tree_weights(self.forest, self.owner_weights)
        if self.voting not in VOTING:
            raise ValueError(f"voting={self.voting!r} is not one of {list(VOTING)}")
        if not isinstance(self.engine, str) or self.engine not in ENGINES:
            raise ValueError(f"engine={self.engine!r} is not one of {list(ENGINES)}")
        if self.engine == "numba":
            self._kernels()  # numba must be importable
        if strategy == "wmp":
            check_guess_weight(self.guess_weight)
        if (
            isinstance(self.depth_threshold, bool)
            or not isinstance(self.depth_threshold, (int, np.integer))
            or self.depth_threshold < 0
        ):
            raise ValueError(f"depth_threshold={self.depth_threshold!r} must be an integer >= 0")
        if strategy in TREE_SELECTION:
            if self.site is None:
                raise ValueError(f"strategy={strategy!r} needs site=<this site's name>")
            if self.site not in self.forest.owners:
                raise ValueError(
                    f"site={self.site!r} trained no tree of this forest; owners are "
                    f"{self.forest.owners}"
                )
        if self.imputers is not None:
            if not isinstance(self.imputers, ImputerSet):
                raise TypeError(
                    f"imputers must be a fedforest.ImputerSet, got {type(self.imputers).__name__}"
                )
        if self.feature_std is not None:
            for name, value in dict(self.feature_std).items():
                if not np.isfinite(value) or value < 0:
                    raise ValueError(f"feature_std[{name!r}]={value!r} must be finite and >= 0")

    def fit(self, X=None, y=None):
        """Validate the parameters; fit what ``auto`` and ``wmp`` choose on validation rows.

        The pooled forest is already trained: ``fit`` trains nothing. For
        ``auto`` it scores every candidate strategy on the validation rows
        ``X``, ``y`` and keeps the best (:func:`fedforest.select_strategy`);
        for ``wmp`` with ``guess_weight="auto"`` it fits the guess weight
        (:func:`fedforest.prediction.weighting.fit_guess_weight`).

        Parameters
        ----------
        X : DataFrame, optional
            Validation rows (required for ``auto`` and a fitted ``wmp``).
        y : array-like, optional
            Their labels.

        Returns
        -------
        self
        """
        calibrate = check_calibration(self.calibration) != "none"
        if calibrate and (X is None or y is None):
            raise ValueError(
                f"calibration={self.calibration!r} is fitted in fit(X_val, y_val) with "
                "validation rows; call it with them, or use calibration='none'"
            )
        self.calibrator_ = Calibrator("none", self.classes_)
        if self.strategy == "auto":
            if X is None or y is None:
                raise ValueError('strategy="auto" needs fit(X_val, y_val) with validation rows')
            candidates = self.auto_candidates
            if candidates is None:
                candidates = default_candidates(self.forest.owners, self.site)
                if self.intersection is not None:
                    candidates = [*candidates, "intersection"]
            chosen = choose_calibrated(
                lambda name: self._predict_proba(X, name)[0],
                candidates,
                y,
                self.classes_,
                self.auto_metric,
                self.calibration,
                self._training_prior,
                self._seed(),
                fit_for=lambda name: self._calibration_fit(X, y, name),
            )
            self.strategy_ = chosen.best
            self.runner_up_ = chosen.runner_up
            self.selection_scores_ = chosen.scores
            self.calibrator_ = chosen.fits[chosen.best].calibrator
            self.candidate_calibrations_ = {k: f.calibrator.method for k, f in chosen.fits.items()}
            return self
        if self.strategy == "wmp":
            self._validate(self.strategy)
            weight = check_guess_weight(self.guess_weight)
            if weight == "auto":
                if X is None or y is None:
                    raise ValueError(
                        'strategy="wmp" with guess_weight="auto" needs fit(X_val, y_val) with '
                        "validation rows, or a number as guess_weight"
                    )
                y = np.asarray(y)
                if len(y) != len(X):
                    raise ValueError(f"fit: X has {len(X)} rows but y has {len(y)} labels")
                parts = self._wmp_parts(X)
                weight, self.guess_weight_scores_ = fit_guess_weight(*parts[:4], y, self.classes_)
            self.guess_weight_ = weight
            self.strategy_ = "wmp"
        else:
            self._validate(self.strategy)
            self.strategy_ = self.strategy
        if calibrate:
            fit = self._calibration_fit(X, y, self.strategy_)
            self.calibrator_ = fit.calibrator
            self.calibration_scores_ = fit.log_losses
        return self

    def _calibration_fit(self, X, y, strategy: str):
        """``strategy``'s calibration on the validation rows ``X``, ``y``.

        Shared through the memo of :func:`~fedforest.federation.evaluation.evaluate_strategies`
        (the same rows, settings and seed give the same fit), so ``auto`` reuses
        what each strategy's own row fitted.
        """
        memo = getattr(self, "_memo", None)
        key = ("calibration", id(X), id(y), strategy, self.calibration)
        if memo is not None and key in memo:
            return memo[key]
        fit = fit_calibration(
            self._predict_proba(X, strategy)[0],
            y,
            self.classes_,
            self.calibration,
            self._training_prior(strategy),
            self._seed(),
        )
        if memo is not None:
            memo[key] = fit
        return fit

    def _seed(self) -> int:
        """The seed of the calibration folds (``random_state`` when an integer)."""
        seed = self.random_state
        return int(seed) if isinstance(seed, (int, np.integer)) else 0

    def _training_prior(self, strategy: str) -> np.ndarray:
        """The class distribution the trees of ``strategy`` were trained on (weighted)."""
        if strategy == "intersection":
            forest, weights = self.intersection, None
        else:
            forest, weights = self.forest, tree_weights(self.forest, self.owner_weights)
        trees = np.arange(forest.n_trees)
        if strategy in TREE_SELECTION:
            trees = np.flatnonzero(forest.owner_mask(self.site))
        prior = training_prior(
            forest.value, forest.tree_start[trees], None if weights is None else weights[trees]
        )
        return on_classes(prior[None, :], forest.classes, self.classes_)[0]

    def _strategy_in_use(self) -> str:
        if self.strategy == "auto":
            if not hasattr(self, "strategy_"):
                raise ValueError(
                    'strategy="auto" chooses a strategy in fit(X_val, y_val); call fit first'
                )
            return self.strategy_
        return self.strategy

    def _guess_weight_in_use(self) -> float:
        weight = check_guess_weight(self.guess_weight)
        if weight != "auto":
            return weight
        if not hasattr(self, "guess_weight_"):
            raise ValueError(
                'strategy="wmp" with guess_weight="auto" fits the weight in fit(X_val, y_val); '
                "call fit first, or give a number as guess_weight"
            )
        return self.guess_weight_

    def _wmp_parts(self, X):
        """``fpv`` (soft) and ``mp`` predictions of ``X``: what ``wmp`` combines."""
        p_certain, certain = self._predict_proba(X, "fpv", voting="soft")
        p_mp, marginal = self._predict_proba(X, "mp")
        weights = tree_weights(self.forest, self.owner_weights)
        if weights is not None:  # the counts of weighted_marginal become summed weights
            return p_certain, certain.weight_kept, p_mp, weights.sum(), certain, marginal
        return p_certain, certain.trees_kept, p_mp, self.forest.n_trees, certain, marginal

    # --------------------------------------------------------- prediction
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, columns in :attr:`classes_` order.

        Parameters
        ----------
        X : DataFrame or ndarray of shape (n_rows, n_columns)
            Rows to predict. DataFrame columns are matched by name and may be
            any subset of the forest's features; an ndarray must have every
            feature in ``forest.feature_names`` order.

        Returns
        -------
        ndarray of shape (n_rows, n_classes)
        """
        proba, self.diagnostics_ = self._predict_proba(X, self._strategy_in_use())
        if check_calibration(self.calibration) != "none":
            if not hasattr(self, "calibrator_"):
                raise ValueError(
                    f"calibration={self.calibration!r} is fitted in fit(X_val, y_val); call fit "
                    "first"
                )
            proba = self.calibrator_.transform(proba)
        return proba

    def predict(self, X) -> np.ndarray:
        """Most probable class of every row (ties: the first in :attr:`classes_`)."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def _predict_proba(
        self, X, strategy: str, voting: str | None = None
    ) -> tuple[np.ndarray, PredictionDiagnostics]:
        # a memo shared by classifiers of the same forest and settings (evaluate_strategies):
        # auto's candidates and wmp's parts are then predicted once per table
        memo = getattr(self, "_memo", None)
        key = (id(X), strategy, voting or self.voting)
        if memo is not None and key in memo:
            return memo[key]
        if strategy == "wmp":
            result = self._predict_wmp(X)
        elif strategy == "intersection":
            result = self._predict_intersection(X)
        else:
            result = self._predict_strategy(X, strategy, voting or self.voting)
        if memo is not None:
            memo[key] = result
        return result

    def _predict_intersection(self, X) -> tuple[np.ndarray, PredictionDiagnostics]:
        """``fpv`` with the intersection forest on its own columns of ``X``."""
        self._validate("intersection")
        if not isinstance(X, pd.DataFrame):
            raise ValueError('strategy="intersection" needs X as a DataFrame (columns by name)')
        inter = PooledForestClassifier(
            self.intersection, strategy="fpv", voting=self.voting, random_state=self.random_state
        )
        cols = [c for c in X.columns if c in self.intersection.feature_names]
        proba = inter.predict_proba(X[cols])
        diagnostics = inter.diagnostics_
        diagnostics.strategy = "intersection"
        return on_classes(proba, inter.classes_, self.classes_), diagnostics

    def _forest_columns(self, X):
        """``X`` without the columns only the intersection forest knows."""
        if self.intersection is None or not isinstance(X, pd.DataFrame):
            return X
        extra = set(self.intersection.feature_names) - set(self.forest.feature_names)
        return X[[c for c in X.columns if c not in extra]] if extra & set(X.columns) else X

    def _predict_strategy(
        self, X, strategy: str, voting: str
    ) -> tuple[np.ndarray, PredictionDiagnostics]:
        self._validate(strategy)
        X = self._forest_columns(X)
        forest = self.forest
        Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
        cf = self._compiled()
        rng = np.random.default_rng(self.random_state)
        trees = np.arange(forest.n_trees)
        if strategy == "local":
            trees = np.flatnonzero(forest.owner_mask(self.site))
        elif strategy == "park":
            usable = forest.trees_within(
                [n for n, p in zip(forest.feature_names, present, strict=True) if p]
            )
            trees = np.flatnonzero(forest.owner_mask(self.site) | usable)
        absent = ~present
        dirty = np.isnan(Xg[:, present]).any(axis=1)
        imputed, level_cdf = self._imputations(Xg, absent, dirty, strategy)
        rules = Strategy(
            strategy,
            forest,
            cf,
            Xg,
            imputed,
            level_cdf,
            self._sigma(),
            int(self.depth_threshold),
            rng,
        )
        n_rows = Xg.shape[0]
        # Rows the compiled engine can take: no NaN in the columns the site has
        # (tree selection strategies route NaN as scikit-learn does, so all rows).
        fast = np.ones(n_rows, bool) if strategy in TREE_SELECTION else ~dirty
        if not fastpath.available() or (strategy not in STATIC + TREE_SELECTION and absent.any()):
            fast[:] = False
        if strategy == "mi":  # a row without an imputed value follows the pr rule (numpy engine)
            with_imputer = ~np.all(np.isnan(imputed), axis=0)
            fast &= ~np.isnan(imputed[:, with_imputer]).any(axis=1)
        rest = ~fast
        sklearn_missing = strategy in TREE_SELECTION
        leaves = np.empty((len(trees), n_rows), dtype=np.int64)
        if fast.any():
            leaves[:, fast] = self._route_static(
                rules, absent, trees, Xg[fast], imputed[fast], rng, sklearn_missing
            )
        # the engine of the dynamic traversals; numba is imported only when one runs
        n_rest = int(rest.sum())
        kernels = self._kernels(n_rest * len(trees)) if n_rest else None
        all_weights = tree_weights(forest, self.owner_weights)
        weights = None if all_weights is None else all_weights[trees]
        if strategy == "mp":
            proba = np.empty((n_rows, forest.n_classes))
            if fast.any():
                proba[fast] = average_leaves(cf, leaves[:, fast], "soft", weights)[0]
            if rest.any():
                rows = _rows(rules, rest)
                proba[rest] = marginal(kernels, cf, Xg[rest], trees, rows, absent, weights)
            kept = np.full(n_rows, len(trees))
        else:
            if rest.any():
                sub = None if sklearn_missing else _rows(rules, rest)
                leaves[:, rest] = resolved_leaves(kernels, cf, Xg[rest], trees, sub)
            proba, kept = average_leaves(cf, leaves, voting, weights)
        engine = "compiled" if fast.all() else ("numpy" if not fast.any() else "mixed")
        kept_weight = None
        if weights is not None:
            kept_weight = ((leaves >= 0) * weights[:, None]).sum(axis=0)
            if strategy == "mp":
                kept_weight = np.full(n_rows, weights.sum())
        # a row whose kept trees all weigh 0 has no vote either
        fallback = (kept == 0) if kept_weight is None else (kept_weight == 0)
        fallback_kernels = None
        if fallback.any():
            fallback_kernels = self._kernels(int(fallback.sum()) * forest.n_trees)
            sub = _rows(rules, fallback, name="mp")
            all_trees = np.arange(forest.n_trees)
            proba[fallback] = marginal(
                fallback_kernels, cf, Xg[fallback], all_trees, sub, absent, all_weights
            )
            logger.info(
                "%d of %d rows had every tree discarded; they use mp", int(fallback.sum()), n_rows
            )
        diagnostics = PredictionDiagnostics(
            strategy=strategy,
            trees_available=len(trees),
            trees_kept=kept,
            weight_kept=kept_weight,
            fallback_rows=fallback,
            n_fallback=int(fallback.sum()),
            engine=engine,
            dynamic_engine=(
                None
                if not (rest.any() or fallback.any())
                else ("numpy" if kernels is None and fallback_kernels is None else "numba")
            ),
        )
        return proba, diagnostics

    def _predict_wmp(self, X) -> tuple[np.ndarray, PredictionDiagnostics]:
        self._validate("wmp")
        weight = self._guess_weight_in_use()
        p_certain, n_certain, p_mp, n_trees, certain, marginal = self._wmp_parts(X)
        proba = weighted_marginal(p_certain, n_certain, p_mp, n_trees, weight)
        # with weight 0 a row without a certain tree takes its mp prediction, as fpv's rows do
        fallback = certain.fallback_rows if weight == 0 else np.zeros(len(proba), dtype=bool)
        engines = {certain.engine, marginal.engine}
        dynamic = {certain.dynamic_engine, marginal.dynamic_engine} - {None}
        n_all = self.forest.n_trees
        diagnostics = PredictionDiagnostics(
            strategy="wmp",
            trees_available=n_all,
            trees_kept=certain.trees_kept if weight == 0 else np.full(len(proba), n_all),
            fallback_rows=fallback,
            n_fallback=int(fallback.sum()),
            engine=engines.pop() if len(engines) == 1 else "mixed",
            dynamic_engine=("numba" if "numba" in dynamic else "numpy") if dynamic else None,
        )
        return proba, diagnostics

    # ------------------------------------------------------------ helpers
    def _kernels(self, n_pairs: int | None = None):
        """The numba kernels for ``n_pairs`` (row, tree) pairs, or ``None`` for numpy."""
        if self.engine == "numpy":
            return None
        if self.engine == "auto" and n_pairs is not None and n_pairs < AUTO_NUMBA_PAIRS:
            return None
        kernels, error = load_kernels()
        if kernels is None and self.engine == "numba":
            raise ImportError(
                f"engine='numba' needs numba, which cannot be imported ({error}); install it "
                "with `pip install 'fedforest[fast]'` (or numba>=0.59), or use engine='auto' "
                "or 'numpy'"
            ) from error
        return kernels

    def _compiled(self) -> CompiledForest:
        # cached on the forest (treated as immutable), shared by every classifier using it
        cache = self.forest._cache
        if "compiled" not in cache:
            cache["compiled"] = CompiledForest.build(self.forest)
        return cache["compiled"]

    def _sigma(self) -> np.ndarray:
        sigma = np.full(self.forest.n_features, np.nan)
        for i, name in enumerate(self.forest.feature_names):
            if self.feature_std is not None and name in self.feature_std:
                sigma[i] = float(self.feature_std[name])
        return sigma

    def _imputations(self, Xg, absent, dirty, strategy):
        """Imputed values and level CDFs for the features missing anywhere in ``Xg``."""
        forest = self.forest
        n_rows, n_feat = Xg.shape
        imputed = np.full((n_rows, n_feat), np.nan, dtype=np.float32)
        level_cdf: dict[int, np.ndarray] = {}
        # fpv and node never look at an imputed value; park and local route as scikit-learn
        if self.imputers is None or strategy in (*TREE_SELECTION, "fpv", "node"):
            return imputed, level_cdf
        if not (absent.any() or dirty.any()):
            return imputed, level_cdf
        index = {n: i for i, n in enumerate(forest.feature_names)}
        missing_any = absent | np.isnan(Xg).any(axis=0)
        sigma = self._sigma()
        for j in np.flatnonzero(missing_any):
            name = forest.feature_names[j]
            if name not in self.imputers:
                continue
            imp = self.imputers[name]
            if any(p not in index for p in imp.predictors):
                logger.warning(
                    "imputer for %r needs predictors %s that the forest does not have; unused",
                    name,
                    [p for p in imp.predictors if p not in index],
                )
                continue
            levels = forest.categories.get(name)
            if imp.kind != ("numeric" if levels is None else "categorical") or (
                levels is not None and imp.n_levels != len(levels)
            ):
                logger.warning(
                    "imputer for %r is %s with %d levels, which does not match the forest's "
                    "feature; unused",
                    name,
                    imp.kind,
                    imp.n_levels,
                )
                continue
            if levels is not None:
                proba = imp.predict_proba(Xg, index)
                level_cdf[j] = np.cumsum(proba, axis=1)
                imputed[:, j] = np.argmax(proba, axis=1)
            else:
                if strategy in ("ipr", "mp") and not np.isfinite(sigma[j]):
                    raise ValueError(
                        f"strategy={strategy!r} needs feature_std[{name!r}] (the pooled "
                        "standard deviation) because an imputer exists for it"
                    )
                # beyond float32 the direction of every comparison is already decided;
                # NaN (an undefined prediction) means no imputed value for that row
                imputed[:, j] = np.clip(imp.predict(Xg, index), -_F32_MAX, _F32_MAX)
        return imputed, level_cdf

    def _route_static(self, rules: Strategy, absent, trees, Xc, imputed_c, rng, sklearn_missing):
        """Leaves of the clean rows through scikit-learn's compiled engine."""
        forest = self.forest
        n_feat = forest.n_features
        cache = forest._cache.setdefault("static", {})
        with_imputer = (
            tuple(np.flatnonzero(~np.all(np.isnan(rules.imputed), axis=0)))
            if rules.name == "mi"
            else ()
        )
        key = (
            "sklearn" if sklearn_missing else rules.name,
            absent.tobytes(),
            int(self.depth_threshold),
            trees.tobytes(),
            with_imputer,
        )
        if key not in cache:
            if len(cache) >= 64:
                cache.clear()
            if sklearn_missing:
                arrays = {
                    "left": forest.children_left,
                    "right": forest.children_right,
                    "feature": forest.feature.astype(np.int64),
                    "threshold": forest.threshold,
                    "missing_left": forest.missing_left,
                }
                discard = np.zeros(forest.n_nodes, dtype=bool)
                random_trees = np.zeros(forest.n_trees, dtype=bool)
                n_columns = 2 * n_feat
            else:
                arrays, discard, random_trees, n_columns = rules.static_trees(absent)
            treeset = fastpath.TreeSet(
                forest.tree_start,
                trees,
                n_node_samples=forest.n_node_samples,
                value=forest.value,
                n_columns=n_columns,
                random_columns=random_trees,
                **arrays,
            )
            cache[key] = (treeset, discard)
        treeset, discard = cache[key]
        X_aug = np.zeros((Xc.shape[0], treeset.n_columns), dtype=np.float32)
        X_aug[:, :n_feat] = Xc
        X_aug[:, n_feat : 2 * n_feat] = imputed_c
        leaves = treeset.apply(X_aug, n_feat, rng)
        leaves[discard[leaves]] = -1
        return leaves


def _rows(rules: Strategy, mask: np.ndarray, name: str | None = None) -> Strategy:
    """The same rules restricted to the rows in ``mask`` (row indices restart at 0)."""
    return Strategy(
        name or rules.name,
        rules.forest,
        rules.cf,
        rules.X[mask],
        rules.imputed[mask],
        {k: v[mask] for k, v in rules.level_cdf.items()},
        rules.sigma,
        rules.depth_threshold,
        rules.rng,
    )


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
        :data:`fedforest.vocabulary.STRATEGY_PREFERENCE`).
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
