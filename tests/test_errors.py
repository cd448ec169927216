"""The exceptions of fedforest: ValueErrors whose message names what was refused."""

from __future__ import annotations

import pytest

from fedforest.errors import ConfigError, PayloadError, SchemaError


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
