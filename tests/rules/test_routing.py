"""Steps and the routing made of them: at most a partial step, then a total one."""

from __future__ import annotations

import pytest

from fedforest.rules import routing
from fedforest.rules.routing import (
    DISCARD,
    IMPUTED_DRAW,
    IMPUTED_VALUE,
    PR_RULE,
    STOP,
    SURROGATE,
    Routing,
)


def test_steps_are_numbered_for_the_kernels():
    assert [s.code for s in routing.STEPS] == [1, 2, 3, 4, 5, 6]
    assert routing.CODES == {s.name: s.code for s in routing.STEPS}
    assert routing.NO_STEP == 0 and routing.NO_STEP not in routing.CODES.values()
    assert {s for s in routing.STEPS if s.total} == {DISCARD, STOP, PR_RULE}


def test_a_routing_derives_its_facts_from_its_steps():
    route = Routing(otherwise=PR_RULE, first=IMPUTED_VALUE)
    assert route.steps == (IMPUTED_VALUE, PR_RULE)
    assert route.codes == (1, 6)
    assert route.draws and route.reads_imputed and route.static and not route.probability
    plain = Routing(otherwise=DISCARD)
    assert plain.steps == (DISCARD,) and plain.codes == (0, 4)
    assert not plain.draws and not plain.reads_imputed and plain.static
    drawn = Routing(otherwise=STOP, first=IMPUTED_DRAW)
    assert drawn.probability and drawn.draws and not drawn.static


@pytest.mark.parametrize("otherwise", [SURROGATE, IMPUTED_VALUE, "discard"])
def test_otherwise_must_decide_every_pair(otherwise):
    with pytest.raises(ValueError, match="decides only some pairs"):
        Routing(otherwise=otherwise)


@pytest.mark.parametrize("first", [DISCARD, STOP, "surrogate"])
def test_first_must_be_a_partial_step(first):
    with pytest.raises(ValueError, match="is not a partial step"):
        Routing(otherwise=PR_RULE, first=first)
