"""The registry of strategies: every :class:`~.base.Rule`, in registration order.

Everything that lists strategies reads it: the estimators' validation, ``auto``'s
candidates and preference order, the job configuration, model files, the
command line (choices, help, ``fedforest strategies``), the evaluation, the
experiment runner, figures and reports. The lists are computed when asked, so a
rule registered later (:func:`register`) is in every one of them.

Examples
--------
>>> from fedforest import rules
>>> rules.strategies()
('fpv', 'pr', 'mi', 'ipr', 'mp', 'ss', 'node', 'wmp', 'park', 'local')
>>> rules.get("park").needs_site
True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .base import Rule

_RULES: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    """Add ``rule`` to the registry (after the rules already there); returns it.

    Raises
    ------
    ValueError
        A rule of that name is registered already, or ``rule`` is not a Rule.
    """
    if not isinstance(rule, Rule) or not rule.family:
        raise ValueError(f"{rule!r} is not a rule of one of the families of fedforest.rules")
    if rule.name in _RULES:
        raise ValueError(f"a strategy named {rule.name!r} is registered already")
    _RULES[rule.name] = rule
    return rule


def unregister(name: str) -> None:
    """Remove the rule ``name`` (a rule registered for a while, such as a test's)."""
    _RULES.pop(name, None)


@contextmanager
def registered(rule: Rule) -> Iterator[Rule]:
    """``rule`` registered for the duration of a ``with`` block."""
    register(rule)
    try:
        yield rule
    finally:
        unregister(rule.name)


def get(name) -> Rule:
    """The rule named ``name``.

    Raises
    ------
    ValueError
        No strategy has that name (the message lists those that do).
    """
    rule = _RULES.get(name) if isinstance(name, str) else None
    if rule is None:
        raise ValueError(f"strategy={name!r} is not one of {list(_RULES)}")
    return rule


def find(name) -> Rule | None:
    """The rule named ``name``, or ``None``."""
    return _RULES.get(name) if isinstance(name, str) else None


def all_rules() -> tuple[Rule, ...]:
    """Every registered rule, in registration order."""
    return tuple(_RULES.values())


def names() -> tuple[str, ...]:
    """Every strategy, in registration order: what a job can evaluate."""
    return tuple(_RULES)


def deployable() -> tuple[str, ...]:
    """What a site can deploy and ``fedforest predict --strategy`` takes (not ``auto``);
    also what ``auto`` can choose from."""
    return tuple(r.name for r in _RULES.values() if r.deployable)


def strategies() -> tuple[str, ...]:
    """The deployable strategies of the pooled forest (not the intersection forest)."""
    return tuple(r.name for r in _RULES.values() if r.deployable and not r.needs_intersection)


def tree_selections() -> tuple[str, ...]:
    """The strategies that keep one site's trees (``site=`` needed)."""
    return tuple(r.name for r in _RULES.values() if r.needs_site)


def fitted() -> tuple[str, ...]:
    """The strategies that fit a parameter of their own on the validation rows."""
    return tuple(r.name for r in _RULES.values() if r.fitted)


def validation_methods() -> tuple[str, ...]:
    """The strategies that need validation rows: the fitted ones and ``auto``."""
    return tuple(r.name for r in _RULES.values() if r.needs_validation)


def candidates(own_trees: bool, intersection: bool) -> list[str]:
    """``auto``'s default candidates, in registration order.

    Parameters
    ----------
    own_trees : bool
        Whether the site trained trees of the forest (the tree selections keep them).
    intersection : bool
        Whether an intersection forest is there to predict with.
    """
    return [
        r.name
        for r in _RULES.values()
        if r.candidate
        and (own_trees or not r.needs_site)
        and (intersection or not r.needs_intersection)
    ]


def preference() -> tuple[str, ...]:
    """The order in which equally scoring candidates are preferred (first wins)."""
    ranked = [r for r in _RULES.values() if r.preference is not None]
    return tuple(r.name for r in sorted(ranked, key=lambda r: r.preference))


def paper_methods() -> tuple[str, ...]:
    """The methods compared in the missing-split paper, in the paper's order."""
    ranked = [r for r in _RULES.values() if r.paper is not None]
    return tuple(r.name for r in sorted(ranked, key=lambda r: r.paper))


def experiment_methods() -> tuple[str, ...]:
    """What the experiment runner scores: the paper's methods, then the others."""
    paper = paper_methods()
    return (*paper, *(n for n in _RULES if n not in paper))


def display_names() -> dict[str, str]:
    """How figures and reports name each strategy."""
    return {n: r.display_name for n, r in _RULES.items()}


def display_name(name: str) -> str:
    """``name``'s display name (``name`` itself when no strategy has it)."""
    rule = find(name)
    return name if rule is None else rule.display_name


def colours() -> dict[str, str]:
    """Each strategy's colour in figures."""
    return {n: r.colour for n, r in _RULES.items()}


def help_lines() -> dict[str, str]:
    """Each strategy's help line (``fedforest strategies``)."""
    return {n: r.help for n, r in _RULES.items()}
