"""What every pooled-forest estimator shares: the strategies, the engines, the inputs.

:class:`PooledForestBase` holds the traversal of a pooled forest at a site
that may lack some of its features: one strategy's per-row predictions
(``value`` columns averaged over the trees: class distributions for
:class:`~fedforest.PooledForestClassifier`, means for
:class:`~fedforest.PooledForestRegressor`), the ``wmp`` and ``intersection``
combinations, the imputations and the choice of engine (scikit-learn's
compiled trees for the static rows, numba or numpy for the dynamic ones).
The estimators add what their task needs: classes, calibration and
``predict_proba``; or ``predict`` of a number.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from ..model.forest import PooledForest
from ..model.imputers import ImputerSet
from ..model.inputs import model_columns, names_text, to_global_matrix
from ..model.traversal import CompiledForest
from ..vocabulary import ENGINES, TREE_SELECTION, VOTING
from . import fastpath
from .diagnostics import PredictionDiagnostics
from .draws import Draws
from .engines import AUTO_NUMBA_PAIRS, load_kernels, marginal, resolved_leaves
from .routing import average_leaves
from .selection import CANDIDATES
from .strategies import STATIC, Strategy
from .weighting import check_guess_weight, tree_weights, weighted_marginal

logger = logging.getLogger(__name__)

_F32_MAX = float(np.finfo(np.float32).max)


class PooledForestBase(BaseEstimator):
    """The strategies and engines of the pooled-forest estimators (not used alone).

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
            self._validate("mp")  # names the wrong type
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
        if not isinstance(self.forest, PooledForest):
            raise TypeError(
                f"forest must be a fedforest.PooledForest, got {type(self.forest).__name__}"
            )
        if self.forest.task != self.task:
            raise ValueError(
                f"{type(self).__name__} predicts with {self.task} trees, but the forest holds "
                f"{self.forest.task} trees; use "
                + (
                    "PooledForestRegressor"
                    if self.forest.is_regression
                    else "PooledForestClassifier"
                )
            )
        if strategy not in CANDIDATES:
            raise ValueError(f"strategy={strategy!r} is not one of {list(CANDIDATES) + ['auto']}")
        self._validate_task()
        if strategy == "intersection":
            if not isinstance(self.intersection, PooledForest):
                raise ValueError(
                    'strategy="intersection" needs intersection=<the intersection PooledForest>'
                )
            if self.intersection.task != self.task:
                raise ValueError(
                    f"the intersection forest holds {self.intersection.task} trees; "
                    f"{type(self).__name__} needs {self.task} trees"
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

    def _validate_task(self) -> None:
        """The parameters only this estimator has (calibration, voting, ...)."""

    def _intersection_estimator(self, forest: PooledForest) -> PooledForestBase:
        """An estimator of the same kind for the intersection forest (``fpv``)."""
        return type(self)(forest, strategy="fpv", random_state=self.random_state)

    def _on_outputs(self, values: np.ndarray, other: PooledForestBase) -> np.ndarray:
        """``other``'s per-row values in this estimator's columns (the same by default)."""
        return values

    def _seed(self) -> int:
        """The seed of the calibration folds (``random_state`` when an integer)."""
        seed = self.random_state
        return int(seed) if isinstance(seed, (int, np.integer)) else 0

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
        if self._nothing_missing(X):
            # every row takes every tree's own path: mp's prediction is fpv's, bit for bit
            p_certain, certain = self._predict_values(X, "fpv", voting="soft")
            p_mp, marginal = p_certain, certain
        else:
            p_mp, marginal = self._predict_values(X, "mp")
            # fpv's rows whose every tree was discarded take mp: the rows just predicted
            p_certain, certain = self._predict_values(
                X, "fpv", voting="soft", known_mp=(p_mp, marginal)
            )
        weights = tree_weights(self.forest, self.owner_weights)
        if weights is not None:  # the counts of weighted_marginal become summed weights
            return p_certain, certain.weight_kept, p_mp, weights.sum(), certain, marginal
        return p_certain, certain.trees_kept, p_mp, self.forest.n_trees, certain, marginal

    def _nothing_missing(self, X) -> bool:
        """Whether ``X`` has every feature of the forest and no missing value."""
        forest = self.forest
        Xg, present = to_global_matrix(
            self._forest_columns(X), forest.feature_names, forest.categories
        )
        return bool(present.all()) and not np.isnan(Xg).any()

    def _predict_values(
        self, X, strategy: str, voting: str | None = None, known_mp=None
    ) -> tuple[np.ndarray, PredictionDiagnostics]:
        """Predictions and diagnostics of ``X`` with one strategy (memoised when shared).

        ``known_mp``, when given, is ``mp``'s prediction of every row of ``X``
        and its diagnostics: the rows whose every tree is discarded take it
        instead of being marginalised again (the same numbers: a row's ``mp``
        prediction does not depend on the other rows).
        """
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
            result = self._predict_strategy(X, strategy, voting or self.voting, known_mp)
        if memo is not None:
            memo[key] = result
        return result

    def _predict_intersection(self, X) -> tuple[np.ndarray, PredictionDiagnostics]:
        """``fpv`` with the intersection forest on its own columns of ``X``."""
        self._validate("intersection")
        if not isinstance(X, pd.DataFrame):
            raise ValueError('strategy="intersection" needs X as a DataFrame (columns by name)')
        inter = self._intersection_estimator(self.intersection)
        cols = [c for c in X.columns if c in self.intersection.feature_names]
        values, diagnostics = inter._predict_values(X[cols], "fpv")
        diagnostics.strategy = "intersection"
        return self._on_outputs(values, inter), diagnostics

    def _forest_columns(self, X):
        """``X`` without the columns only the intersection forest knows."""
        if self.intersection is None or not isinstance(X, pd.DataFrame):
            return X
        extra = set(self.intersection.feature_names) - set(self.forest.feature_names)
        return X[[c for c in X.columns if c not in extra]] if extra & set(X.columns) else X

    def _predict_strategy(
        self, X, strategy: str, voting: str, known_mp=None
    ) -> tuple[np.ndarray, PredictionDiagnostics]:
        self._validate(strategy)
        X = self._forest_columns(X)
        forest = self.forest
        Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
        cf = self._compiled()
        draws = Draws(self.random_state, Xg, forest.tree_of_node, cf.depth)
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
            draws,
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
        if fast.any() and rules.guesses(absent) and self._kernels(n_rows * len(trees)):
            fast[:] = False  # the kernels draw per pair, the compiled trees per (tree, depth, row)
        rest = ~fast
        sklearn_missing = strategy in TREE_SELECTION
        leaves = np.empty((len(trees), n_rows), dtype=np.int64)
        if fast.any():
            static = self._route_static(
                rules, absent, trees, Xg[fast], imputed[fast], draws.subset(fast), sklearn_missing
            )
            leaves = static if fast.all() else _place(leaves, fast, static)
        # the engine of the dynamic traversals; numba is imported only when one runs
        n_rest = int(rest.sum())
        kernels = self._kernels(n_rest * len(trees)) if n_rest else None
        all_weights = tree_weights(forest, self.owner_weights)
        weights = None if all_weights is None else all_weights[trees]
        if strategy == "mp":
            proba = np.empty((n_rows, forest.n_outputs))
            if fast.any():
                proba[fast] = average_leaves(cf, leaves[:, fast], "soft", weights)[0]
            if rest.any():
                rows = rules.restricted(rest)
                proba[rest] = marginal(kernels, cf, Xg[rest], trees, rows, absent, weights)
            kept = np.full(n_rows, len(trees))
        else:
            if rest.any():
                sub = None if sklearn_missing else rules.restricted(rest)
                dynamic = resolved_leaves(kernels, cf, Xg[rest], trees, sub)
                leaves = dynamic if rest.all() else _place(leaves, rest, dynamic)
            proba, kept = average_leaves(cf, leaves, voting, weights)
        engine = "compiled" if fast.all() else ("numpy" if not fast.any() else "mixed")
        kept_weight = None
        if weights is not None:
            kept_weight = ((leaves >= 0) * weights[:, None]).sum(axis=0)
            if strategy == "mp":
                kept_weight = np.full(n_rows, weights.sum())
        # a row whose kept trees all weigh 0 has no vote either
        fallback = (kept == 0) if kept_weight is None else (kept_weight == 0)
        used = {"numpy" if kernels is None else "numba"} if rest.any() else set()
        if fallback.any() and known_mp is not None:
            proba[fallback] = known_mp[0][fallback]
            used |= {known_mp[1].dynamic_engine} - {None}
        elif fallback.any():
            fallback_kernels = self._kernels(int(fallback.sum()) * forest.n_trees)
            used.add("numpy" if fallback_kernels is None else "numba")
            sub = rules.restricted(fallback, name="mp")
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
            dynamic_engine=("numba" if "numba" in used else "numpy") if used else None,
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

    def _route_static(self, rules: Strategy, absent, trees, Xc, imputed_c, draws, sklearn_missing):
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
                random_depths = [np.zeros(0, dtype=np.int64)] * forest.n_trees
                n_columns = 2 * n_feat
            else:
                arrays, discard, random_depths, n_columns = rules.static_trees(absent)
            treeset = fastpath.TreeSet(
                forest.tree_start,
                trees,
                n_node_samples=forest.n_node_samples,
                value=forest.value,
                n_columns=n_columns,
                random_depths=random_depths,
                **arrays,
            )
            cache[key] = (treeset, discard)
        treeset, discard = cache[key]
        X_aug = np.zeros((Xc.shape[0], treeset.n_columns), dtype=np.float32)
        X_aug[:, :n_feat] = Xc
        X_aug[:, n_feat : 2 * n_feat] = imputed_c
        leaves = treeset.apply(X_aug, n_feat, draws)
        leaves[discard[leaves]] = -1
        return leaves


def _place(leaves: np.ndarray, rows: np.ndarray, part: np.ndarray) -> np.ndarray:
    """``leaves`` with ``part`` in the columns of ``rows`` (a whole table needs no copy)."""
    leaves[:, rows] = part
    return leaves
