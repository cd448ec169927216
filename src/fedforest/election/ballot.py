"""Feature election across sites that do not have the same columns.

Every site runs a local selector on its own columns and sends a mask and
scores keyed by feature name. Per feature *f*, let S_f be the sites that have
it; a site without *f* abstains (it does not vote against). Then

* intersection: features selected by every site in S_f;
* union: features selected by at least one site;
* disputed: union minus intersection;
* vote(f) = sum_{s in S_f} w_s norm_s(f) / sum_{s in S_f} w_s, with w_s
  proportional to the site's rows (``"weighted"``) or equal (``"uniform"``);
* the intersection is kept, plus the top ceil(freedom_degree * |disputed|)
  disputed features by vote, plus ``always_keep``.

``normalization`` (``election.normalization`` in the job) chooses norm_s and
the edge cases:

``"all"`` (default): the reference rule of the Feature Election paper
(FLASH). norm_s is |score| min-max scaled over *all* the site's columns (0
when they are constant); every site votes, including one that selected
nothing; freedom_degree 0 gives the intersection and 1 the union; ties go to
the name first in alphabetical order. With the same columns everywhere this
equals the paper's reference code (tested).

``"selected"``: NVIDIA FLARE 2.9's ``feature_election`` rule
(``FeatureElectionController``). norm_s is |score| min-max scaled over the
features the site *selected* (0.5 for all of them when their scores are
equal), 0 for the features it did not select; a site that selected nothing
is left out of the election entirely (FLARE drops its reply); w_s is rows /
total rows of the remaining sites, or 1 / their number; freedom_degree
<= 0.01 gives the intersection and >= 0.99 the union; ties go to the name
last in alphabetical order (FLARE: the later column). With the same columns
everywhere, listed in name order, this gives the same mask as FLARE's own
``FeatureElectionController`` on the same votes (tested against the
installed nvflare on random ballots in ``tests/election/test_ballot.py``).

Over different columns both rules generalise the same way: a site that lacks
*f* abstains from vote(f), the intersection and the union.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import protocol
from ..model.payload_checks import MAX_FEATURES, MAX_ROWS
from ..validation import PayloadReader
from ..vocabulary import AGGREGATIONS

FORMAT_VOTE = protocol.SITE_VOTE
VERSION = protocol.FORMATS[FORMAT_VOTE]

#: How a site's scores are scaled before they are averaged (``election.normalization``):
#: ``"all"``, over all its columns (the Feature Election paper's reference rule), or
#: ``"selected"``, over the features it selected (NVIDIA FLARE 2.9's ``feature_election``).
NORMALIZATIONS = ("all", "selected")
#: With ``"selected"``, freedom degrees at most this keep the intersection (as FLARE does).
SELECTED_INTERSECTION_AT = 0.01
#: With ``"selected"``, freedom degrees at least this keep the union (as FLARE does).
SELECTED_UNION_AT = 0.99


@dataclass
class SiteVote:
    """One site's local selection.

    Parameters
    ----------
    site : str
    features : list of str
        The site's own columns (global names).
    mask : ndarray of bool
        Which of them the local selector kept.
    scores : ndarray of float
        Usefulness score of each (only |score| matters).
    n_rows : int
        Training rows at the site (the weight in ``"weighted"`` aggregation).
    """

    site: str
    features: list[str]
    mask: np.ndarray
    scores: np.ndarray
    n_rows: int

    def __post_init__(self):
        self.features = [str(f) for f in self.features]
        self.mask = np.asarray(self.mask, dtype=bool)
        self.scores = np.asarray(self.scores, dtype=np.float64)

    def to_payload(self, feature_index: Mapping[str, int] | None = None) -> dict:
        """Mask and scores as arrays; features as global indices when given an index."""
        payload = {
            "format": FORMAT_VOTE,
            "version": VERSION,
            "site": self.site,
            "mask": self.mask.astype(bool),
            "scores": self.scores.astype(np.float64),
            "n_rows": int(self.n_rows),
        }
        if feature_index is None:
            payload["features"] = list(self.features)
        else:
            payload["feature_index"] = np.array(
                [feature_index[f] for f in self.features], dtype=np.int32
            )
        return payload

    @classmethod
    def from_payload(
        cls, payload: Mapping, sender: str | None = None, features: Sequence[str] | None = None
    ) -> SiteVote:
        """Read a vote; ``features`` is the global feature list when indices are used.

        The vote names its features either by ``feature_index`` (indices into
        ``features``) or by ``features`` (names), never both. Only
        :class:`~fedforest.errors.PayloadError` is raised.
        """
        r = PayloadReader(payload, FORMAT_VOTE, sender)
        r.check_keys({"site", "mask", "scores", "n_rows", "features", "feature_index"})
        site = r.read_string("site")
        if r.has("feature_index"):
            if r.has("features"):
                r.fail("fields 'features' and 'feature_index' are both present; expected one")
            if features is None:
                r.fail("field 'feature_index' needs the global feature list to be read")
            n_global = len(features)
            idx = r.read_array("feature_index", "i", max_len=n_global)
            if idx.size and (idx.min() < 0 or idx.max() >= n_global):
                r.fail(f"field 'feature_index' has indices outside [0, {n_global})")
            if np.unique(idx).size != idx.size:
                r.fail("field 'feature_index' has duplicates")
            names = [str(features[i]) for i in idx.tolist()]
        else:
            names = r.read_str_list("features", MAX_FEATURES)
        n = len(names)
        mask = r.read_array("mask", "b", length=n)
        scores = r.read_array("scores", "f", length=n)
        n_rows = r.read_integer("n_rows", 1, MAX_ROWS)
        return cls(site, names, mask, scores, n_rows)


@dataclass
class ElectionResult:
    """The outcome of an election.

    Attributes
    ----------
    features : list of str
        Every feature some site has, sorted by name.
    selected : list of str
        The elected features, sorted by name.
    intersection, union, disputed : list of str
    votes : dict of str to float
        vote(f) for every feature.
    sites_with : dict of str to list of str
        S_f: the sites that have each feature.
    selected_by : dict of str to list of str
        The sites whose selector kept each feature.
    freedom_degree : float or None
        The freedom degree counted; ``None`` when every feature was kept
        whatever the vote (:meth:`Ballot.every_feature`).
    aggregation : str
    always_keep : list of str
    normalization : str
        ``"all"`` or ``"selected"`` (see the module docstring).
    """

    features: list[str]
    selected: list[str]
    intersection: list[str]
    union: list[str]
    disputed: list[str]
    votes: dict[str, float]
    sites_with: dict[str, list[str]]
    selected_by: dict[str, list[str]]
    freedom_degree: float | None
    aggregation: str
    always_keep: list[str] = field(default_factory=list)
    normalization: str = "all"

    @property
    def mask(self) -> np.ndarray:
        """Boolean mask over :attr:`features`."""
        chosen = set(self.selected)
        return np.array([f in chosen for f in self.features], dtype=bool)

    @property
    def stats(self) -> dict[str, int]:
        return {
            "intersection": len(self.intersection),
            "union": len(self.union),
            "disputed": len(self.disputed),
            "kept": len(self.selected),
        }

    def to_dict(self) -> dict:
        """Plain dict for reports."""
        return {
            "selected": list(self.selected),
            "stats": self.stats,
            "freedom_degree": self.freedom_degree,
            "aggregation": self.aggregation,
            "normalization": self.normalization,
            "always_keep": list(self.always_keep),
            "votes": {f: float(v) for f, v in self.votes.items()},
            "intersection": list(self.intersection),
            "disputed": list(self.disputed),
            "sites_with": {f: list(v) for f, v in self.sites_with.items()},
            "selected_by": {f: list(v) for f, v in self.selected_by.items()},
        }


def check_freedom_degree(value, name: str = "freedom_degree") -> float:
    """Validate a freedom degree: a number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name}={value!r} must be a number in [0, 1]")
    if not (0.0 <= float(value) <= 1.0):
        raise ValueError(f"{name}={value!r} must be in [0, 1]")
    return float(value)


class Ballot:
    """The votes of all sites, ready to be counted at any freedom degree.

    Counting is cheap once the ballot is built, which is what the tuner needs.

    Parameters
    ----------
    votes : sequence of SiteVote
    aggregation : {"weighted", "uniform"}, default="weighted"
    always_keep : sequence of str, optional
        Features kept whatever the vote.
    normalization : {"all", "selected"}, default="all"
        ``"all"``: the Feature Election paper's reference rule; ``"selected"``:
        NVIDIA FLARE 2.9's ``feature_election`` rule (see the module docstring).
    """

    def __init__(
        self,
        votes: Sequence[SiteVote],
        aggregation: str = "weighted",
        always_keep: Sequence[str] = (),
        normalization: str = "all",
    ):
        votes = list(votes)
        if not votes:
            raise ValueError("an election needs at least one site's vote")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation={aggregation!r} must be one of {list(AGGREGATIONS)}")
        if not isinstance(normalization, str) or normalization not in NORMALIZATIONS:
            raise ValueError(
                f"normalization={normalization!r} must be one of {list(NORMALIZATIONS)}"
            )
        sites = [v.site for v in votes]
        if len(set(sites)) != len(sites):
            raise ValueError(f"more than one vote from the same site: {sites}")
        for v in votes:
            if v.mask.shape != (len(v.features),) or v.scores.shape != (len(v.features),):
                raise ValueError(
                    f"site {v.site!r}: mask and scores must have one entry per feature "
                    f"({len(v.features)})"
                )
            if len(set(v.features)) != len(v.features):
                raise ValueError(f"site {v.site!r}: duplicate features")
            if not np.all(np.isfinite(v.scores)):
                raise ValueError(f"site {v.site!r}: scores must be finite")
            if v.n_rows < 1:
                raise ValueError(f"site {v.site!r}: n_rows must be at least 1")
        shared = set(votes[0].features).intersection(*(v.features for v in votes[1:]))
        if not shared and len(votes) > 1:
            raise ValueError(
                "the sites share no column (features): at least one feature every site has "
                "is needed to pool their forests; check the column names and renames"
            )
        features = sorted({f for v in votes for f in v.features})
        unknown = [f for f in always_keep if f not in features]
        if unknown:
            raise ValueError(f"always_keep names features no site has: {unknown}")
        index = {f: i for i, f in enumerate(features)}
        n_sites, n_feat = len(votes), len(features)
        has = np.zeros((n_sites, n_feat), dtype=bool)
        chose = np.zeros((n_sites, n_feat), dtype=bool)
        for s, v in enumerate(votes):
            cols = np.array([index[f] for f in v.features], dtype=int)
            has[s, cols] = True
            chose[s, cols] = v.mask
        self.features = features
        self.sites = sites
        self.aggregation = aggregation
        self.normalization = normalization
        self.always_keep = sorted(set(always_keep))
        self.has, self.chose = has, chose
        if normalization == "all":
            self.votes = self._votes_all(votes, index)
            counted = np.ones(n_sites, dtype=bool)
        else:
            # FLARE drops the reply of a client that selected nothing
            counted = chose.any(axis=1)
            self.votes = self._votes_selected(
                [v for v, c in zip(votes, counted, strict=True) if c], index
            )
        has_c, chose_c = has[counted], chose[counted]
        union = chose_c.any(axis=0)
        inter = union & np.all(chose_c | ~has_c, axis=0)
        self.union_mask, self.intersection_mask = union, inter
        disputed = np.flatnonzero(union & ~inter)
        # disputed features by vote, highest first. Ties: "all" puts the first name first;
        # "selected" the last, as FLARE's stable argsort takes the later column
        tie = disputed if normalization == "all" else -disputed
        self.disputed_order = disputed[np.lexsort((tie, -self.votes[disputed]))]

    def _votes_all(self, votes: list[SiteVote], index: Mapping[str, int]) -> np.ndarray:
        """The paper's rule: |scores| min-max scaled over each site's columns."""
        n_feat = len(self.features)
        norm = np.zeros((len(votes), n_feat))
        for s, v in enumerate(votes):
            cols = np.array([index[f] for f in v.features], dtype=int)
            a = np.abs(v.scores)
            lo, span = (a.min(), a.max() - a.min()) if a.size else (0.0, 0.0)
            norm[s, cols] = (a - lo) / span if span > 0 else 0.0
        w = np.array(
            [v.n_rows if self.aggregation == "weighted" else 1.0 for v in votes], dtype=np.float64
        )
        has = self.has
        weight_f = (w[:, None] * has).sum(axis=0)
        return (w[:, None] * norm * has).sum(axis=0) / np.where(weight_f > 0, weight_f, 1)

    def _votes_selected(self, votes: list[SiteVote], index: Mapping[str, int]) -> np.ndarray:
        """NVIDIA FLARE 2.9's rule (``FeatureElectionController._weighted_election``).

        The arithmetic follows FLARE's operation by operation (weights
        ``n / total`` or ``1 / n_sites``, scaling over the selected features, the
        sum in the order of the votes), so that on identical columns the votes
        are the same floating-point numbers and ties break the same way.
        """
        n_feat = len(self.features)
        agg = np.zeros(n_feat)
        weight_f = np.zeros(n_feat)
        held = np.zeros((len(votes), n_feat), dtype=bool)
        if not votes:
            return agg
        if self.aggregation == "weighted":
            rows = [v.n_rows for v in votes]
            w = np.array(rows, dtype=np.float64) / sum(rows)
        else:
            w = np.ones(len(votes)) / len(votes)
        for s, v in enumerate(votes):
            cols = np.array([index[f] for f in v.features], dtype=int)
            a = np.abs(v.scores)
            chosen = a[v.mask]
            lo, hi = np.min(chosen), np.max(chosen)
            if hi > lo:
                norm = np.where(v.mask, (a - lo) / (hi - lo), 0.0)
            else:
                norm = np.where(v.mask, 0.5, 0.0)
            full = np.zeros(n_feat)
            full[cols] = norm
            agg += full * w[s]
            weight_f[cols] += w[s]
            held[s, cols] = True
        # a site without f abstains: divide by the weight of the sites that have it. A feature
        # every counted site has is left undivided (its weight is 1, up to rounding), as in FLARE
        partial = ~held.all(axis=0) & (weight_f > 0)
        agg[partial] = agg[partial] / weight_f[partial]
        return agg

    def count(self, freedom_degree: float) -> ElectionResult:
        """The election's result at ``freedom_degree``."""
        fd = check_freedom_degree(freedom_degree)
        if self.normalization == "selected" and fd <= SELECTED_INTERSECTION_AT:
            keep = self.intersection_mask.copy()
        elif self.normalization == "selected" and fd >= SELECTED_UNION_AT:
            keep = self.union_mask.copy()
        else:
            k = math.ceil(fd * len(self.disputed_order))
            keep = self.intersection_mask.copy()
            keep[self.disputed_order[:k]] = True
        for f in self.always_keep:
            keep[self.features.index(f)] = True
        return self._result(keep, fd)

    def every_feature(self) -> ElectionResult:
        """The result that keeps every feature some site has, whatever the vote.

        The votes, the intersection and the union are reported as counted, but
        none of them removes a column. This is what the tuner proposes beside
        the freedom degrees (``election.tune_every_feature``): the vote can only
        reach the union, the features some site's selector kept, and a
        selector may keep fewer columns than a forest uses well. Its
        ``freedom_degree`` is ``None``: no freedom degree gives this mask
        unless the union holds every feature.

        Examples
        --------
        >>> a = SiteVote("a", ["age", "bmi"], [True, False], [0.9, 0.1], 50)
        >>> b = SiteVote("b", ["age", "bmi"], [True, False], [0.8, 0.2], 50)
        >>> ballot = Ballot([a, b])
        >>> ballot.count(1.0).selected, ballot.every_feature().selected
        (['age'], ['age', 'bmi'])
        """
        return self._result(np.ones(len(self.features), dtype=bool), None)

    def _result(self, keep: np.ndarray, fd: float | None) -> ElectionResult:
        names = self.features
        return ElectionResult(
            features=list(names),
            selected=[names[i] for i in np.flatnonzero(keep)],
            intersection=[names[i] for i in np.flatnonzero(self.intersection_mask)],
            union=[names[i] for i in np.flatnonzero(self.union_mask)],
            disputed=sorted(names[i] for i in self.disputed_order),
            votes={names[i]: float(self.votes[i]) for i in range(len(names))},
            sites_with={
                f: [self.sites[s] for s in np.flatnonzero(self.has[:, i])]
                for i, f in enumerate(names)
            },
            selected_by={
                f: [self.sites[s] for s in np.flatnonzero(self.chose[:, i])]
                for i, f in enumerate(names)
            },
            freedom_degree=fd,
            aggregation=self.aggregation,
            always_keep=list(self.always_keep),
            normalization=self.normalization,
        )


def elect(
    votes: Sequence[SiteVote],
    freedom_degree: float = 0.5,
    aggregation: str = "weighted",
    always_keep: Sequence[str] = (),
    normalization: str = "all",
) -> ElectionResult:
    """Run a feature election over sites with different columns.

    Parameters
    ----------
    votes : sequence of SiteVote
        One per site.
    freedom_degree : float in [0, 1], default=0.5
        0 keeps the intersection, 1 the union (with ``"selected"``: at most
        0.01 the intersection, at least 0.99 the union, as in NVIDIA FLARE).
    aggregation : {"weighted", "uniform"}, default="weighted"
        Site weights proportional to rows, or equal.
    always_keep : sequence of str
        Features kept regardless of the vote.
    normalization : {"all", "selected"}, default="all"
        ``"all"``: the Feature Election paper's reference rule, each site's
        |scores| min-max scaled over all its columns; every site votes; ties by
        first name. ``"selected"``: NVIDIA FLARE 2.9's ``feature_election``
        rule, scores scaled over the features the site selected (0.5 each when
        equal, 0 for the others), a site that selected nothing left out, FLARE's
        freedom-degree edges, ties by last name. On identical columns (in name
        order) ``"selected"`` gives the same mask as FLARE's
        ``FeatureElectionController`` (tested against nvflare 2.9), and ``"all"``
        the same as the paper's reference code (tested). Over different columns
        a site lacking a feature abstains under both.

    Returns
    -------
    ElectionResult

    Examples
    --------
    >>> import numpy as np
    >>> from fedforest.election.ballot import SiteVote, elect
    >>> a = SiteVote("a", ["age", "bmi", "hba1c"], [True, True, False], [0.9, 0.5, 0.1], 100)
    >>> b = SiteVote("b", ["age", "bmi", "insulin"], [True, False, True], [0.8, 0.2, 0.7], 100)
    >>> elect([a, b], freedom_degree=0.0).selected     # age: both; insulin: its only site
    ['age', 'insulin']
    >>> elect([a, b], freedom_degree=1.0).selected
    ['age', 'bmi', 'insulin']
    >>> elect([a, b], freedom_degree=0.005).selected   # ceil(0.005 * 1 disputed) = 1
    ['age', 'bmi', 'insulin']
    >>> elect([a, b], freedom_degree=0.005, normalization="selected").selected  # <= 0.01
    ['age', 'insulin']
    """
    return Ballot(votes, aggregation, always_keep, normalization).count(freedom_degree)
