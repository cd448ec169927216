"""What every pooled-forest estimator shares: the rules, the engines, the inputs.

:class:`PooledForestBase` holds what both estimators do with a pooled forest at
a site that may lack some of its features: validation of the parameters against
the strategy's rule (:mod:`fedforest.rules`), one strategy's per-row
predictions (``value`` columns averaged over the trees: class distributions for
:class:`~fedforest.PooledForestClassifier`, means for
:class:`~fedforest.PooledForestRegressor`) by the prediction pipeline
(:mod:`.pipeline`), and the combinations that are not one pipeline run: ``wmp``
and the intersection forest. The estimators add what their task needs:
classes, calibration and ``predict_proba``; or ``predict`` of a number.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from .. import rules
from ..model.forest import PooledForest
from ..model.imputers import ImputerSet
from ..model.inputs import model_columns, names_text, to_global_matrix
from ..model.pooled_model import PooledModel, check_strategy
from ..vocabulary import ENGINES, VOTING
from .cache import PredictionMemo
from .calibration import choose_variant
from .diagnostics import PredictionDiagnostics
from .engines import kernels_for
from .out_of_bag import InBag, check_in_bag, memo_key
from .pipeline import Settings, predict_rule
from .selection import candidate_preference, check_candidates, default_candidates
from .weighting import check_guess_weight, tree_weights, weighted_marginal

logger = logging.getLogger(__name__)


class PooledForestBase(BaseEstimator):
    """The rules and engines of the pooled-forest estimators (not used alone).

    Subclasses define ``__init__`` (their parameters, stored as given), the
    task they serve (:attr:`task`) and what they fit and predict. The
    parameters read here are those of both estimators: ``forest``,
    ``strategy``, ``imputers``, ``feature_std``, ``depth_threshold``,
    ``site``, ``random_state``, ``engine``, ``guess_weight``,
    ``owner_weights``, ``intersection``, and ``voting`` (a class attribute
    ``"soft"`` where the estimator has no such parameter).
    """

    #: The forests this estimator predicts with (``PooledForest.task``).
    task = "classification"
    #: How kept trees are averaged, for an estimator without the parameter.
    voting = "soft"

    @classmethod
    def from_model(cls, model: PooledModel, **params):
        """An estimator of a job's model: its parts, its settings, and ``params``.

        The same as passing the model's parts: ``forest``, ``imputers``,
        ``feature_std``, ``intersection`` and ``owner_weights``
        (``model.settings``), and the settings the model records:
        ``depth_threshold``, ``voting`` (where the estimator has the
        parameter) and ``seed`` as ``random_state``. ``params`` give the other
        parameters (``strategy``, ``site``, ...) and win over the settings; a
        setting the model does not record keeps the estimator's default.

        Parameters
        ----------
        model : PooledModel
            The model (:func:`fedforest.model.pooled_model.load_model`).
        **params
            Parameters of the estimator.

        Returns
        -------
        estimator
            Not fitted.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from fedforest import PooledForest, PooledForestClassifier
        >>> from fedforest.model.pooled_model import PooledModel, PredictionSettings
        >>> X = np.random.RandomState(0).normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
        >>> rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
        >>> forest = PooledForest.from_sklearn(rf, ["a", "b"], owner="site-1")
        >>> model = PooledModel(forest, settings=PredictionSettings(depth_threshold=1, seed=3))
        >>> clf = PooledForestClassifier.from_model(model, strategy="pr")
        >>> clf.depth_threshold, clf.random_state, clf.strategy
        (1, 3, 'pr')
        """
        if not isinstance(model, PooledModel):
            raise TypeError(f"model must be a fedforest PooledModel, got {type(model).__name__}")
        settings = model.settings
        parts = dict(
            forest=model.forest,
            imputers=model.imputers,
            feature_std=model.feature_std,
            intersection=model.intersection,
            owner_weights=settings.owner_weights,
        )
        recorded = {
            "depth_threshold": settings.depth_threshold,
            "random_state": settings.seed,
            "voting": settings.voting,
        }
        for name, value in recorded.items():
            if value is not None and name in cls._get_param_names():
                parts[name] = value
        return cls(**{**parts, **params})

    # ------------------------------------------------------------ columns
    @property
    def feature_names_in_(self) -> np.ndarray:
        """The model's features (the forest's global names), as scikit-learn names them: an
        array of ``str`` objects, the column order an ndarray input must have."""
        return np.asarray(list(self.forest.feature_names), dtype=object)

    @property
    def n_features_in_(self) -> int:
        """The number of the model's features (an ndarray input's number of columns)."""
        return len(self.forest.feature_names)

    def _input(self, X):
        """``X`` under the column rule (:func:`~fedforest.model.inputs.model_columns`): its
        columns the model does not use are left out, with one warning naming them."""
        if X is None:
            return X
        if not isinstance(self.forest, PooledForest):
            self._validate_forest()  # names the wrong type
        known = list(self.forest.feature_names)
        if isinstance(self.intersection, PooledForest):
            known += [f for f in self.intersection.feature_names if f not in set(known)]
        X, ignored = model_columns(X, self.forest.feature_names, known)
        if ignored:
            warnings.warn(
                f"X has columns the model does not use, ignored: {names_text(ignored)}",
                UserWarning,
                stacklevel=3,
            )
        return X

    def _validate(self, strategy: str) -> None:
        self._validate_forest()
        rule = rules.find(strategy)
        if rule is None or not rule.deployable:
            raise ValueError(f"strategy={strategy!r} is not one of {list(rules.names())}")
        self._validate_task()
        inter = self.intersection if isinstance(self.intersection, PooledForest) else None
        check_strategy(strategy, self.forest, inter, self.site)  # raises StrategyUnavailable
        if rule.needs_intersection:
            self._validate_intersection()
        tree_weights(self.forest, self.owner_weights)
        if self.voting not in VOTING:
            raise ValueError(f"voting={self.voting!r} is not one of {list(VOTING)}")
        if not isinstance(self.engine, str) or self.engine not in ENGINES:
            raise ValueError(f"engine={self.engine!r} is not one of {list(ENGINES)}")
        if self.engine == "numba":
            kernels_for(self.engine)  # numba must be importable
        if rule.fitted:
            check_guess_weight(self.guess_weight)
        if (
            isinstance(self.depth_threshold, bool)
            or not isinstance(self.depth_threshold, (int, np.integer))
            or self.depth_threshold < 0
        ):
            raise ValueError(f"depth_threshold={self.depth_threshold!r} must be an integer >= 0")
        self._validate_inputs()

    def _validate_forest(self) -> None:
        if not isinstance(self.forest, PooledForest):
            raise TypeError(
                f"forest must be a fedforest.PooledForest, got {type(self.forest).__name__}"
            )
        if self.forest.task != self.task:
            raise ValueError(
                f"{type(self).__name__} predicts with {self.task} trees, but the forest holds "
                f"{self.forest.task} trees; use "
                + {
                    "regression": "PooledForestRegressor",
                    "survival": "PooledForestSurvival",
                }.get(self.forest.task, "PooledForestClassifier")
            )

    def _validate_intersection(self) -> None:
        if self.intersection.task != self.task:
            raise ValueError(
                f"the intersection forest holds {self.intersection.task} trees; "
                f"{type(self).__name__} needs {self.task} trees"
            )

    def _validate_inputs(self) -> None:
        if self.imputers is not None:
            if not isinstance(self.imputers, ImputerSet):
                raise TypeError(
                    f"imputers must be a fedforest.ImputerSet, got {type(self.imputers).__name__}"
                )
        if self.feature_std is not None:
            for name, value in dict(self.feature_std).items():
                if not np.isfinite(value) or value < 0:
                    raise ValueError(f"feature_std[{name!r}]={value!r} must be finite and >= 0")

    def _validate_task(self) -> None:
        """The parameters only this estimator has (calibration, voting, ...)."""

    def _intersection_estimator(self, forest: PooledForest, strategy: str) -> PooledForestBase:
        """An estimator of the same kind for the intersection forest, with ``strategy``."""
        return type(self)(forest, strategy=strategy, random_state=self.random_state)

    def _on_outputs(self, values: np.ndarray, other: PooledForestBase) -> np.ndarray:
        """``other``'s per-row values in this estimator's columns (the same by default)."""
        return values

    def _seed(self) -> int:
        """The seed of the calibration folds (``random_state`` when an integer)."""
        seed = self.random_state
        return int(seed) if isinstance(seed, (int, np.integer)) else 0

    def _strategy_in_use(self) -> str:
        rule = rules.find(self.strategy)
        if rule is not None and not rule.deployable:
            if not hasattr(self, "strategy_"):
                raise ValueError(
                    f'strategy="{self.strategy}" chooses a strategy in fit(X_val, y_val); call '
                    "fit first"
                )
            return self.strategy_
        return self.strategy

    def _guess_weight_in_use(self, strategy: str) -> float:
        weight = check_guess_weight(self.guess_weight)
        if not isinstance(weight, str):
            return weight
        if not hasattr(self, "guess_weight_"):
            raise ValueError(
                f'strategy="{strategy}" with guess_weight="{weight}" fits the weight in '
                "fit(X_val, y_val); call fit first, or give a number as guess_weight"
            )
        return self.guess_weight_

    def _out_of_bag_rows(self, X, y, memo, in_bag):
        """``fit``'s rows with ``in_bag``: those with an out-of-bag prediction.

        Returns ``X``, ``y``, ``memo`` and ``in_bag`` unchanged when every row
        has one; otherwise the rows that have one (the others' number logged;
        the memo, keyed by the table, is not used for the new table).

        Raises
        ------
        ValueError
            Without ``X`` and ``y``, when ``in_bag`` does not have their rows,
            or when no row has an out-of-bag tree.
        """
        in_bag = check_in_bag(in_bag)
        if in_bag is None:
            return X, y, memo, None
        if X is None or y is None:
            raise ValueError("fit(X, y, in_bag=...) needs the rows X and their targets y")
        if in_bag.n_rows != len(X) or len(y) != len(X):
            raise ValueError(
                f"fit: in_bag has {in_bag.n_rows} rows, X {len(X)} and y {len(y)}; in_bag must "
                "describe the rows of X"
            )
        in_bag.check(self.forest, len(X))
        inter = self.intersection if isinstance(self.intersection, PooledForest) else None
        if inter is not None and in_bag.intersection is not None:
            in_bag.check(inter, len(X), intersection=True)
        keep = in_bag.scored(tree_weights(self.forest, self.owner_weights))
        if keep.all():
            return X, y, memo, in_bag
        if not keep.any():
            raise ValueError(
                f"fit: none of the {len(X)} rows has an out-of-bag tree (every tree, or every "
                "tree of positive weight, trained on each of them): nothing to fit on"
            )
        logger.info(
            "fit: %d of %d rows have no out-of-bag tree and are left out of the fit",
            int((~keep).sum()),
            len(X),
        )
        X = X.iloc[np.flatnonzero(keep)] if isinstance(X, pd.DataFrame) else np.asarray(X)[keep]
        return X, np.asarray(y)[keep], None, in_bag.rows(keep)

    def _fit_choice(self, X, metric: str, score_candidates, memo=None, in_bag=None):
        """``auto``'s choice on rows ``X``: every candidate's values scored, the best kept.

        ``score_candidates(values)`` maps each candidate's predicted values to
        ``(scores, losses)``: its ``metric`` and, where the metric is a mean of
        per-row losses, those losses (:func:`~.calibration.choose_variant`'s
        ties within one standard error), else ``None``. Out of bag (``in_bag``
        given) the lowest score wins: the ties are for a few held-out rows.
        """
        candidates = self.auto_candidates
        if candidates is None:
            candidates = default_candidates(
                self.forest.owners, self.site, self.intersection is not None
            )
        values = {
            name: self._predict_values(X, name, memo=memo, in_bag=in_bag)[0]
            for name in check_candidates(candidates)
        }
        scores, losses = score_candidates(values)
        for name, value in scores.items():
            logger.info("candidate %s: validation %s = %.4f", name, metric, value)
        if in_bag is not None:
            losses = None
        best, runner_up = choose_variant(scores, metric, candidate_preference(), losses)
        self.strategy_, self.runner_up_, self.selection_scores_ = best, runner_up, scores
        return self

    def _wmp_parts(
        self, X, strategy: str, memo: PredictionMemo | None = None, in_bag=None, outputs=None
    ):
        """The predictions of ``X`` a weighted rule combines: its ``certain`` rule's (soft
        voting) and its ``marginal`` rule's.

        With ``in_bag`` (:class:`~.out_of_bag.InBag`) both over each row's
        out-of-bag trees, and the number of trees (or their summed weight) is
        each row's out-of-bag trees'. ``outputs``: as for :meth:`_predict_values`.
        """
        rule = rules.get(strategy)
        if self._nothing_missing(X):
            # every row takes every tree's own path: mp's prediction is fpv's, bit for bit
            p_certain, certain = self._predict_values(
                X, rule.certain, "soft", memo=memo, in_bag=in_bag, outputs=outputs
            )
            p_mp, marginal = p_certain, certain
        else:
            p_mp, marginal = self._predict_values(
                X, rule.marginal, memo=memo, in_bag=in_bag, outputs=outputs
            )
            # fpv's rows whose every tree was discarded take mp: the rows just predicted
            p_certain, certain = self._predict_values(
                X,
                rule.certain,
                "soft",
                known_mp=(p_mp, marginal),
                memo=memo,
                in_bag=in_bag,
                outputs=outputs,
            )
        weights = tree_weights(self.forest, self.owner_weights)
        if weights is not None:  # the counts of weighted_marginal become summed weights
            n_trees = weights.sum() if in_bag is None else marginal.weight_kept
            return p_certain, certain.weight_kept, p_mp, n_trees, certain, marginal
        n_trees = self.forest.n_trees if in_bag is None else marginal.trees_kept
        return p_certain, certain.trees_kept, p_mp, n_trees, certain, marginal

    def _nothing_missing(self, X) -> bool:
        """Whether ``X`` has every feature of the forest and no missing value."""
        forest = self.forest
        Xg, present = to_global_matrix(
            self._forest_columns(X), forest.feature_names, forest.categories
        )
        return bool(present.all()) and not np.isnan(Xg).any()

    def _predict_values(
        self,
        X,
        strategy: str,
        voting: str | None = None,
        known_mp=None,
        memo=None,
        in_bag=None,
        outputs: tuple[int, int] | None = None,
    ) -> tuple[np.ndarray, PredictionDiagnostics]:
        """Predictions and diagnostics of ``X`` with one strategy (memoised in ``memo``).

        ``known_mp``, when given, is ``mp``'s prediction of every row of ``X``
        and its diagnostics: the rows whose every tree is discarded take it
        instead of being marginalised again (the same numbers: a row's ``mp``
        prediction does not depend on the other rows). ``memo``
        (:class:`~.cache.PredictionMemo`) is shared by the estimators of the
        same forest and settings (:func:`~fedforest.federation.evaluation.evaluate_strategies`):
        ``auto``'s candidates and ``wmp``'s parts are then predicted once per table.
        ``in_bag`` (:class:`~.out_of_bag.InBag`), when given, predicts each row
        out of bag (:mod:`.out_of_bag`). ``outputs`` (``(start, stop)``,
        optional): only the value columns ``start:stop`` are predicted (a
        survival forest's cumulative hazards or its survival curves), the same
        numbers as those columns of the whole prediction.
        """
        rule = rules.get(strategy)
        voting = voting or self.voting
        in_bag = check_in_bag(in_bag)

        def compute():
            if rule.family == rules.WEIGHTED:
                return self._predict_weighted(X, rule, memo, in_bag, outputs)
            if rule.needs_intersection:
                return self._predict_intersection(X, rule, in_bag, outputs)
            return self._predict_strategy(X, strategy, voting, known_mp, in_bag, outputs)

        if memo is None:
            return compute()
        key = (id(X), strategy, voting) + memo_key(in_bag)
        if outputs is not None:
            key += ("outputs", *outputs)
        return memo.get_or_compute(key, compute)

    def _predict_intersection(
        self, X, rule, in_bag=None, outputs=None
    ) -> tuple[np.ndarray, PredictionDiagnostics]:
        """The intersection forest alone, by ``rule.through``, on its own columns of ``X``."""
        self._validate(rule.name)
        if not isinstance(X, pd.DataFrame):
            raise ValueError(f'strategy="{rule.name}" needs X as a DataFrame (columns by name)')
        inter = self._intersection_estimator(self.intersection, rule.through)
        cols = [c for c in X.columns if c in self.intersection.feature_names]
        inter_bag = None
        if in_bag is not None:
            inter_bag = InBag(in_bag.check(self.intersection, len(X), intersection=True))
        values, diagnostics = inter._predict_values(
            X[cols], rule.through, in_bag=inter_bag, outputs=outputs
        )
        diagnostics.strategy = rule.name
        values = self._on_outputs(values, inter)
        if diagnostics.unscored_rows is not None:
            values[diagnostics.unscored_rows] = np.nan
        return values, diagnostics

    def _forest_columns(self, X):
        """``X`` without the columns only the intersection forest knows."""
        if self.intersection is None or not isinstance(X, pd.DataFrame):
            return X
        extra = set(self.intersection.feature_names) - set(self.forest.feature_names)
        return X[[c for c in X.columns if c not in extra]] if extra & set(X.columns) else X

    def _predict_strategy(
        self, X, strategy: str, voting: str, known_mp=None, in_bag=None, outputs=None
    ) -> tuple[np.ndarray, PredictionDiagnostics]:
        """One run of the prediction pipeline (:func:`~.pipeline.predict_rule`)."""
        self._validate(strategy)
        matrix = None if in_bag is None else in_bag.check(self.forest, _n_rows(X))
        return predict_rule(
            self._settings(outputs),
            self._forest_columns(X),
            rules.get(strategy),
            voting,
            known_mp,
            matrix,
        )

    def _settings(self, outputs: tuple[int, int] | None = None) -> Settings:
        """The parameters a prediction call reads (validated), for the value columns
        ``outputs`` (``(start, stop)``; ``None``: all)."""
        return Settings(
            forest=self.forest,
            imputers=self.imputers,
            sigma=self._sigma(),
            depth_threshold=int(self.depth_threshold),
            site=self.site,
            random_state=self.random_state,
            engine=self.engine,
            owner_weights=self.owner_weights,
            outputs=outputs,
        )

    def _predict_weighted(
        self, X, rule, memo=None, in_bag=None, outputs=None
    ) -> tuple[np.ndarray, PredictionDiagnostics]:
        self._validate(rule.name)
        weight = self._guess_weight_in_use(rule.name)
        p_certain, n_certain, p_mp, n_trees, certain, marginal = self._wmp_parts(
            X, rule.name, memo, in_bag, outputs
        )
        proba = weighted_marginal(
            p_certain, n_certain, p_mp, n_trees, weight, self.forest.is_distribution
        )
        # with weight 0 a row without a certain tree takes its mp prediction, as fpv's rows do
        fallback = certain.fallback_rows if weight == 0 else np.zeros(len(proba), dtype=bool)
        engines = {certain.engine, marginal.engine}
        dynamic = {certain.dynamic_engine, marginal.dynamic_engine} - {None}
        n_all = self.forest.n_trees
        diagnostics = PredictionDiagnostics(
            strategy=rule.name,
            trees_available=n_all,
            trees_kept=certain.trees_kept
            if weight == 0
            else (np.full(len(proba), n_all) if in_bag is None else marginal.trees_kept),
            fallback_rows=fallback,
            n_fallback=int(fallback.sum()),
            engine=engines.pop() if len(engines) == 1 else "mixed",
            dynamic_engine=("numba" if "numba" in dynamic else "numpy") if dynamic else None,
            unscored_rows=marginal.unscored_rows,
        )
        return proba, diagnostics

    # ------------------------------------------------------------ helpers
    def _sigma(self) -> np.ndarray:
        sigma = np.full(self.forest.n_features, np.nan)
        for i, name in enumerate(self.forest.feature_names):
            if self.feature_std is not None and name in self.feature_std:
                sigma[i] = float(self.feature_std[name])
        return sigma


def _n_rows(X) -> int:
    """The number of rows of a table (DataFrame or array)."""
    return int(X.shape[0])
