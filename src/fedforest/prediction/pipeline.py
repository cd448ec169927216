"""One prediction call as a pipeline: tree selection, imputation, routing, aggregation.

:func:`predict_rule` runs a rule of :mod:`fedforest.rules` (one that predicts
with the pooled forest itself: a routing rule, ``mp`` or a tree selection) over
a table, stage after stage, each reading and extending one :class:`Call`, the
call's explicit context:

1. **tree selection** (:func:`select_trees`): every tree, or the site's own
   (``local``), or those and the trees whose split features the site has
   (``park``);
2. **imputation** (:func:`~.imputation.impute`), for a rule that declares
   ``imputers``;
3. **routing**: the rule's :class:`~fedforest.rules.routing.Routing` applied
   per call (:class:`~.strategies.Strategy`), on the compiled fast path
   (:func:`fast_rows`, :func:`route_static`) for the rows it can take and by
   the numba or numpy engine for the others;
4. **aggregation** (:func:`aggregate`): the kept trees' leaves averaged with
   ``voting``, or (``mp``) the marginal distributions summed; the rows whose
   every tree was discarded get their ``mp`` prediction (:func:`fall_back`).

Calibration, the last stage, is the classifier's
(:meth:`fedforest.PooledForestClassifier.predict_proba`). What lasts between
calls is in explicit caches (:mod:`.cache`), never on the forest or the
estimator. The combinations (``wmp``, ``auto``) and the intersection forest
are run by the estimators from these predictions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..model.forest import PooledForest
from ..model.inputs import to_global_matrix
from ..model.traversal import CompiledForest
from ..rules import MARGINAL, OWN_OR_ROUTABLE, OWN_TREES, Rule
from . import fastpath
from .cache import ForestCache, forest_cache
from .diagnostics import PredictionDiagnostics
from .draws import Draws
from .engines import kernels_for, marginal, marginal_out_of_bag, resolved_leaves
from .imputation import impute
from .out_of_bag import unscored
from .routing import average_leaves
from .steps import static_key, static_rows
from .strategies import Strategy
from .weighting import tree_weights

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """The estimator's parameters a prediction call reads.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from fedforest import PooledForest, rules
    >>> rf = RandomForestClassifier(n_estimators=3, random_state=0).fit([[0], [1]], [0, 1])
    >>> forest = PooledForest.from_sklearn(rf, ["a"], owner="s1")
    >>> settings = Settings(forest, None, np.full(1, np.nan), 2, None, 0, "numpy", None)
    >>> proba, diagnostics = predict_rule(settings, np.array([[1.0]]), rules.get("fpv"))
    >>> proba.tolist(), diagnostics.engine
    ([[0.0, 1.0]], 'compiled')
    """

    forest: PooledForest
    imputers: object
    sigma: np.ndarray
    depth_threshold: int
    site: str | None
    random_state: object
    engine: str
    owner_weights: object
    #: ``(start, stop)``: predict the forest's value columns ``start:stop`` only
    #: (:meth:`~.cache.ForestCache.compiled`); ``None``: every column.
    outputs: tuple[int, int] | None = None

    def kernels(self, n_pairs: int | None = None):
        """The numba kernels for ``n_pairs`` (row, tree) pairs, or ``None`` for numpy."""
        return kernels_for(self.engine, n_pairs)


@dataclass
class Call:
    """One prediction call: what the stages read and what they add."""

    settings: Settings
    rule: Rule
    cache: ForestCache
    cf: CompiledForest
    X: np.ndarray  # the global matrix, float32, NaN = unavailable
    present: np.ndarray  # per feature: a column of the table
    draws: Draws
    trees: np.ndarray = field(default=None)
    strategy: Strategy = field(default=None)

    @property
    def absent(self) -> np.ndarray:
        return ~self.present

    @property
    def n_rows(self) -> int:
        return self.X.shape[0]


@dataclass
class Routed:
    """The routing and aggregation stages' results."""

    values: np.ndarray
    kept: np.ndarray
    leaves: np.ndarray
    used: set  # the dynamic engines that ran


def prepare(settings: Settings, X, rule: Rule) -> Call:
    """The call's context through the imputation stage: matrix, draws, trees, imputed values."""
    forest = settings.forest
    cache = forest_cache(forest)
    Xg, present = to_global_matrix(X, forest.feature_names, forest.categories)
    cf = cache.compiled(forest, settings.outputs)
    draws = Draws(settings.random_state, Xg, forest.tree_of_node, cf.depth)
    call = Call(settings, rule, cache, cf, Xg, present, draws)
    call.trees = select_trees(rule, forest, settings.site, present)
    dirty = np.isnan(Xg[:, present]).any(axis=1)
    imputed, level_cdf = impute(
        forest, settings.imputers, settings.sigma, Xg, call.absent, dirty, rule
    )
    call.strategy = Strategy(
        rule.routing,
        forest,
        cf,
        Xg,
        imputed,
        level_cdf,
        settings.sigma,
        int(settings.depth_threshold),
        draws,
        cache,
    )
    return call


def select_trees(rule: Rule, forest: PooledForest, site, present) -> np.ndarray:
    """The tree selection stage: the trees ``rule`` predicts with."""
    kept = rule.kept_trees
    if kept == OWN_TREES:
        return np.flatnonzero(forest.owner_mask(site))
    if kept == OWN_OR_ROUTABLE:
        usable = forest.trees_within(
            [n for n, p in zip(forest.feature_names, present, strict=True) if p]
        )
        return np.flatnonzero(forest.owner_mask(site) | usable)
    return np.arange(forest.n_trees)


def fast_rows(call: Call) -> np.ndarray:
    """The rows scikit-learn's compiled engine takes.

    Rows with no NaN in the columns the site has (a rule routing as
    scikit-learn does: every row); none with absent columns for a rule that
    cannot be written into the trees; none when the rewritten trees would
    split on columns of draws and the numba kernels run the call (they draw
    per pair, the compiled trees per tree, depth and row).
    """
    rule, s = call.rule, call.strategy
    dirty = np.isnan(call.X[:, call.present]).any(axis=1)
    fast = np.ones(call.n_rows, bool) if rule.learned else ~dirty
    if not fastpath.available() or (not rule.static and call.absent.any()):
        fast[:] = False
    takes = None if rule.routing is None else static_rows(s)
    if takes is not None:
        fast &= takes
    pairs = call.n_rows * len(call.trees)
    if fast.any() and s.guesses(call.absent) and call.settings.kernels(pairs):
        fast[:] = False
    return fast


def route_static(call: Call, fast: np.ndarray) -> np.ndarray:
    """Leaves of the ``fast`` rows through scikit-learn's compiled engine."""
    forest, s = call.settings.forest, call.strategy
    n_feat = forest.n_features
    absent = call.absent
    plain = call.rule.learned or not absent.any()  # then the trees are the trained ones
    key = (
        None if plain else s.routing,
        absent.tobytes(),
        int(s.depth_threshold),
        call.trees.tobytes(),
        () if plain else static_key(s),
    )
    treeset, discard = call.cache.static.get_or_build(
        key, lambda: _tree_set(forest, s, absent, call.trees, plain)
    )
    Xc = call.X[fast]
    X_aug = np.zeros((Xc.shape[0], treeset.n_columns), dtype=np.float32)
    X_aug[:, :n_feat] = Xc
    X_aug[:, n_feat : 2 * n_feat] = s.imputed[fast]
    leaves = treeset.apply(X_aug, n_feat, call.draws.subset(fast))
    leaves[discard[leaves]] = -1
    return leaves


def _tree_set(forest, s: Strategy, absent, trees, plain: bool):
    if plain:
        arrays = {
            "left": forest.children_left,
            "right": forest.children_right,
            "feature": forest.feature.astype(np.int64),
            "threshold": forest.threshold,
            "missing_left": forest.missing_left,
        }
        discard = np.zeros(forest.n_nodes, dtype=bool)
        random_depths = [np.zeros(0, dtype=np.int64)] * forest.n_trees
        n_columns = 2 * forest.n_features
    else:
        arrays, discard, random_depths, n_columns = s.static_trees(absent)
    treeset = fastpath.TreeSet(
        forest.tree_start,
        trees,
        n_node_samples=forest.n_node_samples,
        n_columns=n_columns,
        random_depths=random_depths,
        **arrays,
    )
    return treeset, discard


def aggregate(call: Call, fast: np.ndarray, voting: str, weights, in_bag=None) -> Routed:
    """Routing and aggregation: the kept trees' leaves averaged, or ``mp``'s distributions.

    ``in_bag`` (bool, ``(len(call.trees), n_rows)``, optional): a tree that
    trained on a row is left out of the row's prediction, as a discarded tree
    is (:mod:`.out_of_bag`).
    """
    rest = ~fast
    n_rest = int(rest.sum())
    leaves = np.empty((len(call.trees), call.n_rows), dtype=np.int64)
    if fast.any():
        static = route_static(call, fast)
        leaves = static if fast.all() else _place(leaves, fast, static)
    # the engine of the dynamic traversals; numba is imported only when one runs
    kernels = call.settings.kernels(n_rest * len(call.trees)) if n_rest else None
    used = {"numpy" if kernels is None else "numba"} if n_rest else set()
    cf, X = call.cf, call.X
    if call.rule.family == MARGINAL:  # both children of an unresolvable node
        if in_bag is not None:
            return _marginal_out_of_bag(call, fast, leaves, weights, in_bag, kernels, used)
        values = np.empty((call.n_rows, call.cf.value.shape[1]))
        if fast.any():
            values[fast] = average_leaves(cf, leaves[:, fast], "soft", weights)[0]
        if n_rest:
            sub = call.strategy.restricted(rest)
            values[rest] = marginal(kernels, cf, X[rest], call.trees, sub, call.absent, weights)
        return Routed(values, np.full(call.n_rows, len(call.trees)), leaves, used)
    if n_rest:
        sub = None if call.rule.learned else call.strategy.restricted(rest)
        dynamic = resolved_leaves(kernels, cf, X[rest], call.trees, sub)
        leaves = dynamic if rest.all() else _place(leaves, rest, dynamic)
    if in_bag is not None:  # a tree that trained on the row is left out, as a discarded one
        leaves = np.where(in_bag, -1, leaves)
    values, kept = average_leaves(cf, leaves, voting, weights)
    return Routed(values, kept, leaves, used)


def _marginal_out_of_bag(call: Call, fast, leaves, weights, in_bag, kernels, used) -> Routed:
    """``mp`` of every row over its out-of-bag trees (:func:`aggregate` with ``in_bag``)."""
    rest = ~fast
    values = np.empty((call.n_rows, call.cf.value.shape[1]))
    if fast.any():
        masked = np.where(in_bag[:, fast], -1, leaves[:, fast])
        values[fast] = average_leaves(call.cf, masked, "soft", weights)[0]
    if rest.any():
        sub = call.strategy.restricted(rest)
        values[rest] = marginal_out_of_bag(
            kernels, call.cf, call.X[rest], call.trees, sub, call.absent, weights, ~in_bag[:, rest]
        )
    leaves = np.where(in_bag, -1, 0)  # every out-of-bag tree is kept
    return Routed(values, (~in_bag).sum(axis=0), leaves, used)


def fall_back(call: Call, routed: Routed, fallback: np.ndarray, known_mp, in_bag=None) -> None:
    """The rows whose every tree was discarded get their ``mp`` prediction over all trees.

    ``known_mp``, when given, is ``mp``'s prediction of every row and its
    diagnostics: those rows take it instead of being marginalised again.
    With ``in_bag`` (bool, ``(forest.n_trees, n_rows)``) over the row's
    out-of-bag trees only.
    """
    if not fallback.any():
        return
    if known_mp is not None:
        routed.values[fallback] = known_mp[0][fallback]
        routed.used |= {known_mp[1].dynamic_engine} - {None}
        return
    forest = call.settings.forest
    kernels = call.settings.kernels(int(fallback.sum()) * forest.n_trees)
    routed.used.add("numpy" if kernels is None else "numba")
    sub = call.strategy.restricted(fallback)
    all_trees = np.arange(forest.n_trees)
    all_weights = tree_weights(forest, call.settings.owner_weights)
    if in_bag is None:
        routed.values[fallback] = marginal(
            kernels, call.cf, call.X[fallback], all_trees, sub, call.absent, all_weights
        )
    else:
        routed.values[fallback] = marginal_out_of_bag(
            kernels,
            call.cf,
            call.X[fallback],
            all_trees,
            sub,
            call.absent,
            all_weights,
            ~in_bag[:, fallback],
        )
    logger.info(
        "%d of %d rows had every tree discarded; they use mp", int(fallback.sum()), call.n_rows
    )


def predict_rule(
    settings: Settings, X, rule: Rule, voting: str = "soft", known_mp=None, in_bag=None
) -> tuple[np.ndarray, PredictionDiagnostics]:
    """Per-row values of ``X`` (class distributions or means) by ``rule``, and diagnostics.

    ``X`` is what the estimator's column rule left of the table (a DataFrame
    or an ndarray in the forest's column order). ``in_bag`` (bool, shape
    ``(forest.n_trees, n_rows)``, optional) marks the trees that trained on
    each row: they are left out of its prediction as discarded trees are
    (:mod:`.out_of_bag`); a row with no other tree (of positive weight) gets
    NaN, named by the diagnostics' ``unscored_rows``.
    """
    call = prepare(settings, X, rule)
    fast = fast_rows(call)
    all_weights = tree_weights(settings.forest, settings.owner_weights)
    weights = None if all_weights is None else all_weights[call.trees]
    used_bag = None if in_bag is None else in_bag[call.trees]
    routed = aggregate(call, fast, voting, weights, used_bag)
    kept_weight = None
    if weights is not None:
        kept_weight = ((routed.leaves >= 0) * weights[:, None]).sum(axis=0)
        if rule.family == MARGINAL and in_bag is None:  # every tree is kept
            kept_weight = np.full(call.n_rows, weights.sum())
    # a row whose kept trees all weigh 0 has no vote either
    fallback = (routed.kept == 0) if kept_weight is None else (kept_weight == 0)
    no_tree = None
    if in_bag is not None:
        no_tree = unscored(in_bag, all_weights)  # no out-of-bag tree in the whole forest
        fallback &= ~no_tree
    fall_back(call, routed, fallback, known_mp, in_bag)
    if no_tree is not None and no_tree.any():
        routed.values[no_tree] = np.nan
        logger.info(
            "%d of %d rows have no out-of-bag tree; their prediction is NaN",
            int(no_tree.sum()),
            call.n_rows,
        )
    diagnostics = PredictionDiagnostics(
        strategy=rule.name,
        trees_available=len(call.trees),
        trees_kept=routed.kept,
        weight_kept=kept_weight,
        fallback_rows=fallback,
        n_fallback=int(fallback.sum()),
        engine="compiled" if fast.all() else ("numpy" if not fast.any() else "mixed"),
        dynamic_engine=("numba" if "numba" in routed.used else "numpy") if routed.used else None,
        unscored_rows=no_tree,
    )
    return routed.values, diagnostics


def _place(leaves: np.ndarray, rows: np.ndarray, part: np.ndarray) -> np.ndarray:
    """``leaves`` with ``part`` in the columns of ``rows`` (a whole table needs no copy)."""
    leaves[:, rows] = part
    return leaves
