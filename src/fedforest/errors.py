"""Exceptions raised by fedforest."""

from __future__ import annotations


class PayloadError(ValueError):
    """A payload received from another site is malformed and was refused.

    The message names the sender (when known), the offending field and what
    was expected. Nothing from a refused payload is ever used.
    """

    def __init__(self, message: str, sender: str | None = None):
        self.sender = sender
        prefix = f"payload from {sender!r} refused: " if sender else "payload refused: "
        super().__init__(prefix + message)


class ConfigError(ValueError):
    """A configuration file or value is invalid.

    The message names the file, the key, the bad value and what is allowed.
    """


class SchemaError(ValueError):
    """Sites describe their tables in contradicting ways."""


class StrategyUnavailable(ValueError):
    """A strategy cannot run on this model for this site.

    Raised by :func:`fedforest.model.pooled_model.check_strategy`, the one
    check of a strategy's preconditions; each place that takes a strategy from
    a user (a model file's ``deployment``, ``fedforest predict``'s options, an
    estimator's parameters) words it in its own terms from the attributes.

    Attributes
    ----------
    strategy : str
        The strategy asked for.
    missing : {"intersection_forest", "site"}
        What it needs and the model lacks: the intersection forest, or a site
        among the forest's owners (``site`` is then ``None`` or not one).
    site : str or None
        The site it was asked for.
    owners : list of str
        The sites that trained the forest's trees.
    """

    def __init__(self, strategy: str, missing: str, site: str | None, owners) -> None:
        self.strategy = strategy
        self.missing = missing
        self.site = site
        self.owners = list(owners)
        if missing == "intersection_forest":
            text = f'strategy="{strategy}" needs intersection=<the intersection PooledForest>'
        elif site is None:
            text = f"strategy={strategy!r} needs site=<this site's name>"
        else:
            text = f"site={site!r} trained no tree of this forest; owners are {self.owners}"
        super().__init__(text)
