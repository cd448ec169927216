"""How a rule routes a pair at an unresolvable node: steps, and the routing made of them.

A node is *unresolvable* for a row when its feature is unavailable there and the
node saw no missing value in training (``docs/architecture.md``, "Missing-split
semantics"). A :class:`Routing` decides such a pair in at most two steps: an
optional ``first`` step that decides where it can (an imputed value, a surrogate
split), then the ``otherwise`` step, which always decides (discard the tree, stop
at the node, or the ``pr`` rule). Every engine reads the same declaration: the
numpy resolver and the compiled fast path apply each step's own implementation
(:mod:`fedforest.prediction.steps`), and the numba kernels branch on the steps'
integer :attr:`Step.code` (:data:`CODES`).

Examples
--------
>>> route = Routing(otherwise=PR_RULE, first=IMPUTED_VALUE)
>>> route.draws, route.static, route.codes
(True, True, (1, 6))
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One way of deciding a pair at an unresolvable node.

    Attributes
    ----------
    name : str
    code : int
        The step's number in the numba kernels (0 is "no step").
    total : bool
        Whether the step decides every pair (an ``otherwise`` step) or only
        those it can (a ``first`` step; the others go to ``otherwise``).
    draws : bool
        Whether it draws a uniform for some pairs (:mod:`fedforest.prediction.draws`).
    reads_imputed : bool
        Whether it reads the row's imputed values.
    static : bool
        Whether it can be written into the trees for the compiled fast path.
    probability : bool
        Whether it reads p_R from the imputers (a numeric one needs the pooled
        standard deviation).
    text : str
        What it does, for the documentation.

    Examples
    --------
    >>> DISCARD.total, DISCARD.draws
    (True, False)
    """

    name: str
    code: int
    total: bool
    draws: bool
    reads_imputed: bool
    static: bool
    text: str
    probability: bool = False


#: The kernels' code of "no first step".
NO_STEP = 0

IMPUTED_VALUE = Step(
    "imputed_value",
    1,
    total=False,
    draws=False,
    reads_imputed=True,
    static=True,
    text="where an imputed value x^ exists: RIGHT when x^ > t, else LEFT",
)
IMPUTED_DRAW = Step(
    "imputed_draw",
    2,
    total=False,
    draws=True,
    reads_imputed=True,
    static=False,
    text="where an imputer exists: RIGHT with probability p_R (its own stream of draws)",
    probability=True,
)
SURROGATE = Step(
    "surrogate",
    3,
    total=False,
    draws=False,
    reads_imputed=False,
    static=True,
    text="where the node has a surrogate whose feature the row has: the surrogate split",
)
DISCARD = Step(
    "discard",
    4,
    total=True,
    draws=False,
    reads_imputed=False,
    static=True,
    text="DISCARD: the tree is dropped for the row",
)
STOP = Step(
    "stop",
    5,
    total=True,
    draws=False,
    reads_imputed=False,
    static=True,
    text="STOP: the node's own value is the tree's prediction",
)
PR_RULE = Step(
    "pr_rule",
    6,
    total=True,
    draws=True,
    reads_imputed=False,
    static=True,
    text="the pr rule: DISCARD above depth_threshold, else RIGHT with probability N_right / N_node",
)

#: Every step, in code order.
STEPS = (IMPUTED_VALUE, IMPUTED_DRAW, SURROGATE, DISCARD, STOP, PR_RULE)
#: The numba kernels' table: step name to code.
CODES = {step.name: step.code for step in STEPS}


@dataclass(frozen=True)
class Routing:
    """A rule's decision at an unresolvable node: ``first`` where it can, else ``otherwise``.

    Parameters
    ----------
    otherwise : Step
        A total step (:data:`DISCARD`, :data:`STOP` or :data:`PR_RULE`).
    first : Step, optional
        A partial step tried before it (:data:`IMPUTED_VALUE`,
        :data:`IMPUTED_DRAW` or :data:`SURROGATE`).

    Examples
    --------
    >>> Routing(otherwise=DISCARD).codes
    (0, 4)
    >>> Routing(otherwise=SURROGATE)
    Traceback (most recent call last):
    ...
    ValueError: otherwise=surrogate decides only some pairs; use one of discard, stop, pr_rule
    """

    otherwise: Step
    first: Step | None = None

    def __post_init__(self) -> None:
        if self.otherwise not in STEPS or not self.otherwise.total:
            totals = ", ".join(s.name for s in STEPS if s.total)
            raise ValueError(
                f"otherwise={getattr(self.otherwise, 'name', self.otherwise)} decides only some "
                f"pairs; use one of {totals}"
            )
        if self.first is not None and (self.first not in STEPS or self.first.total):
            partial = ", ".join(s.name for s in STEPS if not s.total)
            raise ValueError(
                f"first={getattr(self.first, 'name', self.first)} is not a partial step; use "
                f"one of {partial}"
            )

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps in the order they decide."""
        return (self.otherwise,) if self.first is None else (self.first, self.otherwise)

    @property
    def draws(self) -> bool:
        """Whether some pair may be decided by a draw."""
        return any(s.draws for s in self.steps)

    @property
    def reads_imputed(self) -> bool:
        """Whether a step reads the row's imputed values."""
        return any(s.reads_imputed for s in self.steps)

    @property
    def probability(self) -> bool:
        """Whether a step reads p_R from the imputers."""
        return any(s.probability for s in self.steps)

    @property
    def static(self) -> bool:
        """Whether every step can be written into the trees (the compiled fast path)."""
        return all(s.static for s in self.steps)

    @property
    def codes(self) -> tuple[int, int]:
        """``(first, otherwise)`` as the numba kernels read them (``NO_STEP`` for no first)."""
        return (NO_STEP if self.first is None else self.first.code, self.otherwise.code)
