"""The typed sections of a job's configuration: ``forest``, ``surrogates``, ``election``
and ``job.timeouts``.

:class:`~fedforest.federation.config.JobConfig` holds each section of
``job.yaml`` that is a group of settings as one frozen dataclass, built by
its validation (:meth:`JobConfig.from_dict
<fedforest.federation.config.JobConfig.from_dict>`, every error naming the
file, the key, the bad value and what is allowed). The defaults of each
section are its fields' defaults; :data:`~fedforest.federation.config.JOB_DEFAULTS`
(the schema the files are read against and the configuration reference is
written from) takes them from here. ``to_dict`` gives a section as the file
spells it: the ``train`` task sends ``forest`` and ``surrogates`` to the sites
as these dicts.

Examples
--------
>>> ForestParams(n_estimators=50).to_dict()
{'n_estimators': 50, 'max_depth': None, 'min_samples_leaf': 1, 'max_features': 'sqrt'}
>>> Timeouts(train=0).of("train"), ElectionSettings().always_keep
(0, ())
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..vocabulary import PHASES


def _plain(section) -> dict[str, Any]:
    """A section's fields as the YAML file spells them (tuples as lists)."""
    return {
        f.name: list(v) if isinstance(v := getattr(section, f.name), tuple) else v
        for f in dataclasses.fields(section)
    }


@dataclasses.dataclass(frozen=True)
class Timeouts:
    """``job.timeouts``: how long each phase may take, in seconds (0: no limit).

    One field per phase of :data:`~fedforest.vocabulary.PHASES`, in its order.
    """

    schema: float = 120
    election: float = 300
    train: float = 900
    evaluate: float = 600

    def of(self, phase: str) -> float:
        """The timeout of ``phase`` (one of :data:`~fedforest.vocabulary.PHASES`)."""
        if phase not in PHASES:
            raise KeyError(f"phase {phase!r} is not one of {list(PHASES)}")
        return getattr(self, phase)

    def to_dict(self) -> dict[str, float]:
        """``{phase: seconds}`` in phase order."""
        return _plain(self)


@dataclasses.dataclass(frozen=True)
class ForestParams:
    """``forest``: the parameters of every site's scikit-learn random forest.

    Parameters
    ----------
    n_estimators : int
        Trees per site, in [1, 10000].
    max_depth : int or None
        The trees' depth limit (``None``: grown until the leaves are pure or
        too small).
    min_samples_leaf : int
        The fewest training rows of a leaf (a site's privacy policy may raise it).
    max_features : {"sqrt", "log2"}, int, float or None
        Features considered at each split, as scikit-learn reads it.
    """

    n_estimators: int = 100
    max_depth: int | None = None
    min_samples_leaf: int = 1
    max_features: str | int | float | None = "sqrt"

    def to_dict(self) -> dict[str, Any]:
        """The section as a dict: what the ``train`` task sends (scikit-learn's keywords)."""
        return _plain(self)


@dataclasses.dataclass(frozen=True)
class SurrogateParams:
    """``surrogates``: which surrogate splits a site keeps
    (:func:`~fedforest.model.surrogates.fit_surrogates`).

    Parameters
    ----------
    min_agreement : float
        The smallest adjusted agreement, in [-1, 1].
    min_rows : int
        The fewest rows of the node a surrogate is scored on (>= 1).
    """

    min_agreement: float = 0.25
    min_rows: int = 6

    def to_dict(self) -> dict[str, Any]:
        """The section as a dict: what the ``train`` task sends."""
        return _plain(self)


@dataclasses.dataclass(frozen=True)
class ElectionSettings:
    """``election``: the feature election and the tuning of its freedom degree.

    Parameters
    ----------
    enabled : bool
        Whether the sites vote (``false``: every feature is kept).
    freedom_degree : float
        In [0, 1]: 0 keeps the features every site selects, 1 those any selects.
    auto_tune : bool
        Tune the freedom degree by hill-climbing on the sites' mask scores.
    tuning_rounds : int
        The most mask scores tuning asks for, in [1, 100].
    tune_every_feature : bool
        Tuning also scores the mask of every feature, which no freedom degree
        reaches unless some site's selector kept every feature.
    tolerance : float
        A smaller mask within this much of the best score wins (>= 0).
    aggregation : str
        How the sites' scores are pooled (:data:`~fedforest.vocabulary.AGGREGATIONS`).
    normalization : str
        How each site's scores are scaled
        (:data:`~fedforest.election.ballot.NORMALIZATIONS`).
    always_keep : tuple of str
        Features kept whatever the vote.
    metric : str
        What a site scores a proposed mask by.
    """

    enabled: bool = True
    freedom_degree: float = 0.5
    auto_tune: bool = False
    tuning_rounds: int = 5
    tune_every_feature: bool = True
    tolerance: float = 0.0
    aggregation: str = "weighted"
    normalization: str = "all"
    always_keep: tuple[str, ...] = ()
    metric: str = "auprc"

    def to_dict(self) -> dict[str, Any]:
        """The section as the file spells it (``always_keep`` a list)."""
        return _plain(self)
