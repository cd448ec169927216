"""The pooled model a job gives every site, and the deployment a site keeps with it.

A job's model (the payload ``fedforest/model``, version 3, and the file
``pooled_model.npz`` every site saves) is one :class:`PooledModel`: the
pooled forest, the selected imputers, the pooled standard deviations, the
intersection forest (when trained) and the :class:`PredictionSettings`. The
model a site saves also holds its :class:`Deployment`: what the job chose for
the site (strategy, calibrator, fitted guess weight) and its input mapping
(:class:`~fedforest.model.site_inputs.SiteInputs`).

Each is a frozen dataclass with ``from_payload`` (every part validated as if
received from a peer; only :class:`~fedforest.errors.PayloadError` is raised,
naming the sender or file and the field) and ``to_payload`` (plain values and
numpy arrays, the payload layout unchanged). :func:`load_model` reads a saved
file; :func:`check_strategy` is the one check of what a strategy needs from a
model (the intersection forest, a site among the forest's owners).

Examples
--------
>>> import numpy as np
>>> from sklearn.ensemble import RandomForestClassifier
>>> from fedforest import PooledForest
>>> X = np.random.RandomState(0).normal(size=(60, 3)); y = (X[:, 0] > 0).astype(int)
>>> rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
>>> forest = PooledForest.from_sklearn(rf, ["a", "b", "c"], owner="site-1")
>>> model = PooledModel(forest, settings=PredictionSettings(depth_threshold=2, seed=0))
>>> again = PooledModel.from_payload(model.to_payload(), sender="site-1")
>>> again.settings, again.forest.n_trees, again.deployment is None
(PredictionSettings(depth_threshold=2, voting=None, seed=0, owner_weights=None), 5, True)
>>> try:
...     model.check_strategy("local", site="site-2")
... except StrategyUnavailable as err:
...     print(err.missing, err.owners)
site ['site-1']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .. import protocol, rules
from ..errors import StrategyUnavailable
from ..validation import PayloadReader
from ..vocabulary import VOTING
from .calibrator import Calibrator
from .forest import PooledForest
from .imputers import ImputerSet
from .inputs import names_text
from .model_files import MAX_MODEL_BYTES, check_model_dtypes, load_payload, read_feature_std
from .payload_checks import MAX_NODES, MAX_SEED
from .site_inputs import SiteInputs

MODEL_FORMAT = protocol.MODEL
MODEL_VERSION = protocol.FORMATS[MODEL_FORMAT]
#: Fields of a model payload besides ``format`` and ``version``, in the order they are written.
MODEL_FIELDS = (
    "forest",
    "imputers",
    "feature_std",
    "intersection",
    "settings",
    "deployment",
    "inputs",
)
#: Prediction settings of a model and their checks.
SETTINGS_FIELDS = ("depth_threshold", "voting", "seed", "owner_weights")
#: Fields of a model's ``deployment``: what the job chose for the site that saved it.
DEPLOYMENT_FIELDS = ("site", "strategy", "calibrator", "guess_weight")


def check_strategy(
    strategy: str,
    forest: PooledForest,
    intersection: PooledForest | None,
    site: str | None,
) -> None:
    """Refuse a strategy the model cannot run for ``site``: the one check of its needs.

    A strategy that predicts with the intersection forest
    (``rules.get(strategy).needs_intersection``) needs ``intersection``; one
    that keeps a site's own trees (``needs_site``) needs ``site`` among
    ``forest.owners``.

    Raises
    ------
    fedforest.errors.StrategyUnavailable
        Saying what is missing (its attributes let a caller word it in its own
        terms: a file's field, a command-line option).
    ValueError
        If ``strategy`` is no strategy.
    """
    rule = rules.get(strategy)
    if rule.needs_intersection and intersection is None:
        raise StrategyUnavailable(strategy, "intersection_forest", site, forest.owners)
    if rule.needs_site and site not in forest.owners:
        raise StrategyUnavailable(strategy, "site", site, forest.owners)


@dataclasses.dataclass(frozen=True)
class PredictionSettings:
    """The prediction settings a job gives its model (``settings`` of the payload).

    Each is ``None`` when the model does not record it; an estimator built
    from the model (``PooledForestClassifier.from_model``) then keeps its own
    default.

    Parameters
    ----------
    depth_threshold : int, optional
        The job's ``evaluation.depth_threshold`` (integer in [0, ``MAX_NODES``]).
    voting : str, optional
        The job's ``evaluation.voting`` (one of :data:`~fedforest.vocabulary.VOTING`).
    seed : int, optional
        The job's seed (in [0, 2**32 - 1]): the draws of ``pr`` and ``ipr``.
    owner_weights : dict of str to float, optional
        The pooling weight of each site's trees (``pooling.weights: rows``),
        naming exactly the forest's sites; ``None``: every tree one vote.

    Examples
    --------
    >>> PredictionSettings(depth_threshold=2, voting="soft").to_payload()
    {'depth_threshold': 2, 'voting': 'soft'}
    """

    depth_threshold: int | None = None
    voting: str | None = None
    seed: int | None = None
    owner_weights: Mapping[str, float] | None = None

    def to_payload(self) -> dict:
        """The ``settings`` field: the settings the model records, in their order."""
        out: dict[str, Any] = {}
        for name in SETTINGS_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = dict(value) if name == "owner_weights" else value
        return out

    @classmethod
    def read(cls, r: PayloadReader, key: str = "settings") -> PredictionSettings:
        """Validate field ``key`` of a model payload (each setting optional): ``depth_threshold``
        (integer >= 0), ``voting`` (one of :data:`~fedforest.vocabulary.VOTING`), ``seed``
        (an integer in [0, 2**32 - 1] or null) and ``owner_weights`` (site name -> number
        >= 0, or null)."""
        settings = r.read_mapping(key)
        unknown = sorted(set(settings) - set(SETTINGS_FIELDS))
        if unknown:
            r.fail(
                f"field {key!r} has unknown settings {unknown}; expected only "
                f"{list(SETTINGS_FIELDS)}"
            )
        out: dict[str, Any] = {}
        if "depth_threshold" in settings:
            out["depth_threshold"] = r.integer(
                f"{key}.depth_threshold", settings["depth_threshold"], 0, MAX_NODES
            )
        if "voting" in settings:
            out["voting"] = r.choice(f"{key}.voting", settings["voting"], VOTING)
        seed = settings.get("seed")
        if seed is not None:
            out["seed"] = r.integer(f"{key}.seed", seed, 0, MAX_SEED)
        weights = settings.get("owner_weights")
        if weights is not None:
            if not isinstance(weights, Mapping) or not weights:
                r.refuse(
                    f"{key}.owner_weights", weights, "a mapping of site name to weight, or null"
                )
            out["owner_weights"] = {
                r.site_name(f"{key}.owner_weights", site): r.number(
                    f"{key}.owner_weights.{site}", value, 0
                )
                for site, value in weights.items()
            }
        return cls(**out)


@dataclasses.dataclass(frozen=True, eq=False)
class Deployment:
    """What a site keeps with the model: the job's choice for it and its input mapping.

    A model file stores it in two fields: ``deployment`` (``site``,
    ``strategy``, ``calibrator``, ``guess_weight``; null when the job chose
    nothing, that is without ``auto`` among its strategies) and ``inputs``
    (:meth:`SiteInputs.to_payload`). Whether the model can run the strategy
    for the site is checked by :func:`check_strategy`: when the deployment is
    read, and by the :class:`PooledModel` that holds it. Compare two
    deployments by their payloads.

    Parameters
    ----------
    site : str
        The site that saved the model.
    strategy : str, optional
        The strategy the job chose for the site (one of
        :func:`fedforest.rules.deployable`); ``None``: the job chose none.
    calibrator : Calibrator, optional
        The calibration fitted with it on the site's validation rows (``None``
        for regression trees: a number is not calibrated).
    guess_weight : float, optional
        The strategy's fitted guess weight in [0, 1] (required for a fitted
        strategy such as ``wmp``).
    inputs : SiteInputs, optional
        How the site's own data file becomes the model's input (``None`` in a
        file saved before version 3).

    Examples
    --------
    >>> inputs = SiteInputs("site-1", "outcome", positive_class=1)
    >>> Deployment("site-1", inputs=inputs).to_payload()["deployment"] is None
    True
    """

    site: str
    strategy: str | None = None
    calibrator: Calibrator | None = None
    guess_weight: float | None = None
    inputs: SiteInputs | None = None

    def to_payload(self) -> dict:
        """The fields ``deployment`` and ``inputs`` of a saved model."""
        choice = None
        if self.strategy is not None:
            choice = {
                "site": self.site,
                "strategy": self.strategy,
                "calibrator": None if self.calibrator is None else self.calibrator.to_payload(),
                "guess_weight": self.guess_weight,
            }
        inputs = None if self.inputs is None else self.inputs.to_payload()
        return {"deployment": choice, "inputs": inputs}

    @classmethod
    def from_payload(
        cls,
        payload: Mapping,
        sender: str | None = None,
        *,
        forest: PooledForest,
        intersection: PooledForest | None = None,
    ) -> Deployment | None:
        """Validate the fields ``deployment`` and ``inputs`` of ``payload`` against the model's
        ``forest`` and ``intersection`` forest; ``None`` when both are null (a model that no
        site saved)."""
        return cls.read(PayloadReader(payload, None, sender), forest, intersection)

    @classmethod
    def read(
        cls, r: PayloadReader, forest: PooledForest, intersection: PooledForest | None = None
    ) -> Deployment | None:
        """:meth:`from_payload` of the payload ``r`` reads.

        ``deployment`` holds exactly :data:`DEPLOYMENT_FIELDS`: a site name,
        a strategy of :func:`fedforest.rules.deployable` that the model can run
        for the site (:func:`check_strategy`), a calibrator of the forest's
        classes (:meth:`Calibrator.from_payload`; null for regression trees)
        and a guess weight in [0, 1] (required for a fitted strategy).
        ``inputs`` is read by :meth:`SiteInputs.read` and names the
        deployment's site.
        """
        choice = cls._read_choice(r, forest, intersection)
        value = r.get("inputs")
        inputs = None if value is None else SiteInputs.read(r.entry(value, "inputs"), forest)
        if choice is None and inputs is None:
            return None
        if choice is not None and inputs is not None and choice["site"] != inputs.site:
            r.fail(
                f"field 'inputs.site' is {inputs.site!r} but the deployment is site "
                f"{choice['site']!r}'s; expected the same site"
            )
        if choice is None:
            return cls(inputs.site, inputs=inputs)
        return cls(**choice, inputs=inputs)

    @staticmethod
    def _read_choice(r: PayloadReader, forest: PooledForest, intersection) -> dict | None:
        """The field ``deployment``: what the job chose for the site that saved the model."""
        value = r.get("deployment")
        if value is None:
            return None
        d = r.entry(value, "deployment")
        d.check_keys(set(DEPLOYMENT_FIELDS))
        site = d.site_name("site", d.get("site"))
        strategy = d.read_choice("strategy", rules.deployable())
        try:
            check_strategy(strategy, forest, intersection, site)
        except StrategyUnavailable as err:
            if err.missing == "intersection_forest":
                d.fail(
                    f"field 'strategy' is {strategy!r} but the model has no intersection "
                    "forest; expected a strategy the model can run"
                )
            d.fail(
                f"field 'strategy' is {strategy!r} but site {site!r} trained no tree of the "
                f"forest; expected a site among the forest's sites {forest.owners}"
            )
        if forest.is_regression or forest.is_survival:  # a number or a curve: no calibration
            if d.get("calibrator") is not None:
                d.fail(f"field 'calibrator' must be null for {forest.task} trees")
            calibrator = None
        else:
            try:
                calibrator = Calibrator.from_payload(
                    d.get("calibrator"), forest.classes, "calibrator"
                )
            except ValueError as err:
                d.fail(f"field {err}")
        weight = d.get("guess_weight")
        if weight is not None:
            weight = d.number("guess_weight", weight, 0.0, 1.0)
        elif rules.get(strategy).fitted:
            d.fail(
                f"field 'guess_weight' is null; the {strategy!r} strategy needs its fitted "
                "weight: expected a number in [0, 1]"
            )
        return {
            "site": site,
            "strategy": strategy,
            "calibrator": calibrator,
            "guess_weight": weight,
        }


@dataclasses.dataclass(frozen=True, eq=False)
class PooledModel:
    """A job's pooled model: everything prediction needs, and what a site keeps with it.

    Parameters
    ----------
    forest : PooledForest
        The pooled trees.
    imputers : ImputerSet, optional
        The selected imputers (each for a feature of the forest, of its kind).
    feature_std : dict of str to float, optional
        Pooled standard deviation of the numeric features (``ipr``, ``mp``).
    intersection : PooledForest, optional
        The intersection forest (trained on the columns every site has).
    settings : PredictionSettings, optional
        The job's prediction settings (none recorded by default).
    deployment : Deployment, optional
        The saving site's deployment (``None`` in the model the server sends).

    A deployment's strategy must be one the model can run for its site
    (:meth:`check_strategy`); :class:`~fedforest.errors.StrategyUnavailable`
    is raised otherwise. The model holds arrays: compare two models by their
    payloads (:meth:`to_payload`).

    Examples
    --------
    See the module docstring.
    """

    forest: PooledForest
    imputers: ImputerSet | None = None
    feature_std: Mapping[str, float] = dataclasses.field(default_factory=dict)
    intersection: PooledForest | None = None
    settings: PredictionSettings = dataclasses.field(default_factory=PredictionSettings)
    deployment: Deployment | None = None

    def __post_init__(self) -> None:
        if self.deployment is not None and self.deployment.strategy is not None:
            self.check_strategy(self.deployment.strategy, self.deployment.site)

    def check_strategy(self, strategy: str, site: str | None) -> None:
        """Refuse ``strategy`` when this model cannot run it for ``site``
        (:func:`check_strategy`: the intersection forest, a site among the forest's
        owners); raises :class:`~fedforest.errors.StrategyUnavailable`."""
        check_strategy(strategy, self.forest, self.intersection, site)

    @property
    def input_features(self) -> list[str]:
        """The features an input may hold: the forest's, then those only the intersection
        forest has."""
        names = list(self.forest.feature_names)
        if self.intersection is not None:
            names += [f for f in self.intersection.feature_names if f not in set(names)]
        return names

    @property
    def input_categories(self) -> dict[str, list[str]]:
        """The levels of every categorical feature of either forest (the forest's where both
        have the feature)."""
        if self.intersection is None:
            return dict(self.forest.categories)
        return {**self.intersection.categories, **self.forest.categories}

    def to_payload(self) -> dict:
        """The model as a ``fedforest/model`` payload (plain values and numpy arrays)."""
        deployment = self.deployment.to_payload() if self.deployment is not None else {}
        return {
            "format": MODEL_FORMAT,
            "version": MODEL_VERSION,
            "forest": self.forest.to_payload(),
            "imputers": None if self.imputers is None else self.imputers.to_payload(),
            "feature_std": {str(k): float(v) for k, v in self.feature_std.items()},
            "intersection": None if self.intersection is None else self.intersection.to_payload(),
            "settings": self.settings.to_payload(),
            "deployment": deployment.get("deployment"),
            "inputs": deployment.get("inputs"),
        }

    @classmethod
    def from_payload(cls, payload: Mapping, sender: str | None = None) -> PooledModel:
        """Validate a ``fedforest/model`` payload (every version) and build the model.

        Every part is read as if received from a peer (its place, ``forest``,
        ``imputers``, ``intersection``, in the message), and the parts must
        agree: every site name follows the job configs' grammar; an imputer is
        for a feature of the forest and predicts it from features of the
        forest, has the feature's kind and, when categorical, its number of
        levels, and a numeric one has the feature's standard deviation;
        ``owner_weights`` name exactly the forest's sites; the deployment's
        strategy is one the model can run for its site (:func:`check_strategy`).
        Only :class:`~fedforest.errors.PayloadError` is raised, naming
        ``sender`` and the field.
        """
        r = PayloadReader(payload, MODEL_FORMAT, sender)
        r.check_keys(set(MODEL_FIELDS))
        check_model_dtypes(r)
        forest = PooledForest.from_payload(r.get("forest"), sender, where="forest")
        imps = r.get("imputers")
        imputers = None
        if imps is not None:
            imputers = ImputerSet.from_payload(imps, sender, where="imputers")
        inter = r.get("intersection")
        intersection = None
        if inter is not None:
            intersection = PooledForest.from_payload(inter, sender, where="intersection")
        std = read_feature_std(r)
        settings = PredictionSettings.read(r)
        for where, part in (("forest", forest), ("intersection", intersection)):
            for i, owner in enumerate([] if part is None else part.owners):
                r.site_name(f"{where}.owners[{i}]", owner)
        if imputers is not None:
            _check_imputers_fit(r, forest, imputers, std)
        weights = settings.owner_weights
        if weights is not None and sorted(weights) != sorted(forest.owners):
            r.fail(
                f"field 'settings.owner_weights' names sites {sorted(weights)}; expected the "
                f"forest's sites {sorted(forest.owners)}, each once"
            )
        deployment = Deployment.read(r, forest, intersection)
        return cls(forest, imputers, std, intersection, settings, deployment)


def _check_imputers_fit(r: PayloadReader, forest, imputers, std: Mapping[str, float]) -> None:
    """An imputer for a forest feature has the feature's kind and levels; a numeric one
    has the feature's pooled standard deviation (``ipr`` and ``mp`` need it)."""
    names = set(forest.feature_names)
    for feature, imp in imputers.items():
        unknown = [p for p in (feature, *imp.predictors) if p not in names]
        if unknown:
            r.fail(
                f"field 'imputers': the imputer for {feature!r} (predictors "
                f"{names_text(list(map(repr, imp.predictors)))}) names "
                f"{names_text(list(map(repr, unknown)))}, which "
                f"{'is' if len(unknown) == 1 else 'are'} not a feature of the forest; expected "
                "features of the forest (a job's imputers predict features of the forest from "
                "features of the forest)"
            )
        r.site_name(f"imputers.{feature}.owner", imp.owner)
        levels = forest.categories.get(feature)
        kind = "numeric" if levels is None else "categorical"
        if imp.kind != kind or (levels is not None and imp.n_levels != len(levels)):
            expected = kind if levels is None else f"{kind} with {len(levels)} levels"
            r.fail(
                f"field 'imputers': the imputer for {feature!r} is {imp.kind} with "
                f"{imp.n_levels} levels, but the forest's feature is {expected}; expected an "
                "imputer of the feature's kind"
            )
        if kind == "numeric" and feature not in std:
            r.fail(
                f"field 'feature_std' has no entry for {feature!r}, which has a numeric imputer; "
                "expected the feature's pooled standard deviation"
            )


def load_model(path, max_bytes: int = MAX_MODEL_BYTES) -> PooledModel:
    """Load and validate a saved model (:meth:`PooledModel.from_payload`).

    The file is read by :func:`~fedforest.model.model_files.load_payload`
    (size limit ``max_bytes``) and validated as a ``fedforest/model`` payload
    whose sender is the file path.
    """
    return PooledModel.from_payload(load_payload(path, max_bytes), sender=str(path))
