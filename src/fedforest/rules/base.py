"""What a strategy is: one :class:`Rule` object per strategy, of one of five families.

A rule declares, once, everything the rest of fedforest asks about it: its help
line, display name and figure colour; whether it needs imputers, fits a
parameter on validation rows, is an ``auto`` candidate (and its place in
``auto``'s preference order), is one of the paper's methods; and, through its
family and fields, how it predicts:

========================= ==============================================================
:class:`RoutingRule`      every tree of the pooled forest; an unresolvable node decided
                          by its :class:`~.routing.Routing`; the kept trees' leaves
                          averaged (``fpv``, ``pr``, ``mi``, ``ipr``, ``ss``, ``node``)
:class:`MarginalRule`     both children followed, weighted by p_R; the leaves summed
                          (an aggregation: ``mp``)
:class:`TreeSelection`    a subset of the trees, or another forest (``park``, ``local``,
                          ``intersection``)
:class:`WeightedRule`     a combination of two other rules' predictions, weighted by a
                          parameter fitted on validation rows (``wmp``)
:class:`ChoiceRule`       a combination that chooses the best candidate on validation
                          rows (``auto``)
========================= ==============================================================

This package imports nothing else from fedforest (``docs/architecture.md``, §1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .routing import Routing

#: Families (:attr:`Rule.family`), the stage of the prediction pipeline each one fills.
ROUTING, MARGINAL, SELECTION, WEIGHTED, CHOICE = (
    "routing",
    "marginal",
    "selection",
    "weighted",
    "choice",
)

#: Which trees a rule predicts with (:attr:`Rule.kept_trees`): every tree of the pooled forest,
#: or those a :class:`TreeSelection` keeps.
ALL_TREES = "all"
OWN_TREES = "own"  # the site's own trees
OWN_OR_ROUTABLE = "own_or_routable"  # those, and every tree whose split features the site has
INTERSECTION_FOREST = "intersection"  # every tree of the intersection forest


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One strategy: what it is, declared once.

    Parameters
    ----------
    name : str
        The strategy's name (``strategy=``, ``--strategy``, ``evaluation.strategies``).
    help : str
        One line for ``fedforest strategies``.
    display_name : str
        How figures and reports name it.
    colour : str
        Its colour in figures (a matplotlib colour).
    imputers : bool, default=False
        Whether a prediction computes the imputed values for it (its routing,
        or the ``mp`` fallback of its rows whose every tree is discarded,
        reads them).
    candidate : bool, default=False
        Whether ``auto`` tries it when given no candidates.
    preference : int or None, default=None
        Its place in the order in which equally scoring candidates are
        preferred (lower first; ``None``: never chosen).
    paper : int or None, default=None
        Its place among the methods compared in the missing-split paper
        (``None``: not one of them).
    fitted : bool, default=False
        Whether it fits a parameter of its own on the validation rows (then it
        is never an ``auto`` candidate).

    Examples
    --------
    >>> from fedforest.rules import get
    >>> rule = get("mi")
    >>> rule.family, rule.draws, rule.imputers, rule.candidate
    ('routing', True, True, True)
    """

    name: str
    help: str
    display_name: str
    colour: str
    imputers: bool = False
    candidate: bool = False
    preference: int | None = None
    paper: int | None = None
    fitted: bool = False

    #: The family: which stage of the prediction pipeline the rule fills.
    family: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if self.candidate and (self.fitted or self.preference is None):
            raise ValueError(
                f"rule {self.name!r}: an auto candidate fits nothing of its own and has a "
                "preference"
            )

    # ---------------------------------------------------------- derived facts
    @property
    def routing(self) -> Routing | None:
        """How it decides an unresolvable node (``None``: it does not route itself)."""
        return None

    @property
    def kept_trees(self) -> str:
        """Which trees it predicts with (:data:`ALL_TREES`, or a tree selection's)."""
        return ALL_TREES

    @property
    def draws(self) -> bool:
        """Whether its prediction of a row may depend on a draw."""
        return self.routing is not None and self.routing.draws

    @property
    def needs_std(self) -> bool:
        """Whether it reads p_R from a numeric imputer (the pooled standard deviation)."""
        return self.routing is not None and self.routing.probability

    @property
    def needs_site(self) -> bool:
        """Whether it keeps the trees of one site (``site=`` one of the forest's owners)."""
        return False

    @property
    def needs_intersection(self) -> bool:
        """Whether it predicts with the intersection forest."""
        return False

    @property
    def needs_validation(self) -> bool:
        """Whether it needs validation rows (``fit(X_val, y_val)``)."""
        return self.fitted

    @property
    def deployable(self) -> bool:
        """Whether a site can deploy it as it is (``auto`` deploys what it chose)."""
        return True

    @property
    def static(self) -> bool:
        """Whether rows with absent columns can take the compiled fast path."""
        return self.routing is not None and self.routing.static

    @property
    def learned(self) -> bool:
        """Whether every missing value follows the learned direction, as scikit-learn routes."""
        return False


@dataclass(frozen=True, kw_only=True)
class RoutingRule(Rule):
    """Every tree of the pooled forest, an unresolvable node decided by ``route``.

    Examples
    --------
    >>> from fedforest.rules.routing import DISCARD
    >>> rule = RoutingRule(name="x", help="h", display_name="X", colour="k",
    ...                    route=Routing(otherwise=DISCARD))
    >>> rule.family, rule.draws, rule.static
    ('routing', False, True)
    """

    route: Routing
    family: ClassVar[str] = ROUTING

    @property
    def routing(self) -> Routing:
        return self.route


@dataclass(frozen=True, kw_only=True)
class MarginalRule(Rule):
    """Marginal prediction: both children of an unresolvable node, weighted 1 - p_R and p_R.

    It never discards, ignores the depth threshold and sums the leaf values;
    the rows of other rules whose every tree is discarded get it too.

    Examples
    --------
    >>> from fedforest.rules import get
    >>> get("mp").family, get("mp").static
    ('marginal', False)
    """

    family: ClassVar[str] = MARGINAL

    @property
    def needs_std(self) -> bool:
        return True


@dataclass(frozen=True, kw_only=True)
class TreeSelection(Rule):
    """A subset of the pooled forest's trees, or the intersection forest.

    Parameters
    ----------
    trees : str
        :data:`OWN_TREES`, :data:`OWN_OR_ROUTABLE` or :data:`INTERSECTION_FOREST`.
    through : str or None, default=None
        The rule the kept trees predict with; ``None``: missing values
        follow the learned direction at every node, as scikit-learn routes
        them.

    Examples
    --------
    >>> from fedforest.rules import get
    >>> get("local").needs_site, get("intersection").needs_intersection
    (True, True)
    """

    trees: str
    through: str | None = None
    family: ClassVar[str] = SELECTION

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.trees not in (OWN_TREES, OWN_OR_ROUTABLE, INTERSECTION_FOREST):
            raise ValueError(f"rule {self.name!r}: trees={self.trees!r} is not a tree selection")

    @property
    def kept_trees(self) -> str:
        return self.trees

    @property
    def needs_site(self) -> bool:
        return self.trees != INTERSECTION_FOREST

    @property
    def needs_intersection(self) -> bool:
        return self.trees == INTERSECTION_FOREST

    @property
    def static(self) -> bool:
        return self.through is None

    @property
    def learned(self) -> bool:
        return self.through is None


@dataclass(frozen=True, kw_only=True)
class WeightedRule(Rule):
    """``certain``'s trees weighted 1 against ``marginal``'s guessing trees weighted w.

    ``w`` (``guess_weight``) is fitted on the validation rows by default.

    Examples
    --------
    >>> from fedforest.rules import get
    >>> get("wmp").certain, get("wmp").marginal, get("wmp").fitted
    ('fpv', 'mp', True)
    """

    certain: str
    marginal: str
    family: ClassVar[str] = WEIGHTED


@dataclass(frozen=True, kw_only=True)
class ChoiceRule(Rule):
    """The best of the candidates on the site's validation rows.

    Examples
    --------
    >>> from fedforest.rules import get
    >>> get("auto").needs_validation, get("auto").deployable
    (True, False)
    """

    family: ClassVar[str] = CHOICE

    @property
    def needs_validation(self) -> bool:
        return True

    @property
    def deployable(self) -> bool:
        return False
