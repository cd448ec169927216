"""The exceptions of fedforest: ValueErrors whose message names what was refused."""

from __future__ import annotations

import pytest

from fedforest.errors import ConfigError, PayloadError, SchemaError, StrategyUnavailable


def test_a_payload_error_names_its_sender():
    err = PayloadError("field 'x' is missing", sender="site-2")
    assert str(err) == "payload from 'site-2' refused: field 'x' is missing"
    assert err.sender == "site-2"
    anonymous = PayloadError("bad")
    assert str(anonymous) == "payload refused: bad" and anonymous.sender is None


@pytest.mark.parametrize("error", [PayloadError, ConfigError, SchemaError])
def test_every_error_is_a_value_error(error):
    with pytest.raises(ValueError, match="why"):
        raise error("why")


@pytest.mark.parametrize(
    ("missing", "site", "text"),
    [
        (
            "intersection_forest",
            "a",
            'strategy="intersection" needs intersection=<the intersection',
        ),
        ("site", None, "strategy='intersection' needs site=<this site's name>"),
        ("site", "c", "site='c' trained no tree of this forest; owners are ['a', 'b']"),
    ],
)
def test_a_strategy_the_model_cannot_run_says_what_it_lacks(missing, site, text):
    err = StrategyUnavailable("intersection", missing, site, ("a", "b"))
    assert isinstance(err, ValueError) and str(err).startswith(text)
    assert (err.strategy, err.missing, err.site, err.owners) == (
        "intersection",
        missing,
        site,
        ["a", "b"],
    )
