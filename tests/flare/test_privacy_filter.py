"""The FLARE adapter of the privacy filter on real ``Shareable`` objects (no simulator).

What the filter decides is the core's (``tests/federation/test_message_filter.py``,
``tests/privacy/test_outgoing.py``); here: the payload is taken out of the
reply and put back, an error reply or an acknowledgement keeps nothing but
what it may carry, a refusal keeps the headers only, the site is FLARE's
identity (or the peer's), and what changed is logged.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from nvflare.apis.filter import FilterChainType, FilterContextKey
from nvflare.apis.fl_constant import FilterKey, FLContextKey, ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import ReservedHeaderKey, Shareable, make_reply

from federation.test_messages import metrics_payload
from fedforest import protocol
from fedforest.federation.message_filter import filter_payload
from fedforest.federation.messages import MaskScore
from fedforest.federation.training import fit_site_models
from fedforest.flare.privacy_filter import (
    REFUSED,
    PrivacyPolicyFilter,
    policy_filters,
    refusal,
)
from fedforest.privacy.outgoing import Refusal


def ctx(task="train", site="site-2", direction=FilterKey.OUT, peer=None) -> FLContext:
    fl_ctx = FLContext()
    fl_ctx.set_prop(ReservedKey.IDENTITY_NAME, site, private=False, sticky=False)
    fl_ctx.set_prop(FLContextKey.TASK_NAME, task, private=True, sticky=False)
    fl_ctx.set_prop(FLContextKey.FILTER_DIRECTION, direction, private=True, sticky=False)
    if peer is not None:
        other = FLContext()
        other.set_prop(ReservedKey.IDENTITY_NAME, peer, private=False, sticky=False)
        fl_ctx.set_peer_context(other)
    return fl_ctx


def reply(payload, **fields) -> Shareable:
    out = make_reply(ReturnCode.OK)
    out.set_header(ReservedHeaderKey.TASK_NAME, "train")
    out[protocol.PAYLOAD] = payload
    for key, value in fields.items():
        out[key] = value
    return out


@pytest.fixture(scope="module")
def train_payload():
    """What SiteRunner.train sends: real scikit-learn trees, surrogates, imputers, std."""
    rng = np.random.default_rng(2)
    n = 240
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n)})
    y = (X["a"] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    models = fit_site_models(
        "site-2", X, y, ["a", "b"], ["a"], {}, {"n_estimators": 4}, random_state=0
    )
    return {
        "format": protocol.SITE_MODELS,
        "version": protocol.FORMATS[protocol.SITE_MODELS],
        "forest": models.forest.to_payload(),
        "imputers": models.imputers.to_payload(),
        "feature_std": models.feature_std,
        "n_rows": n,
    }


def test_the_payload_leaves_as_the_core_returns_it(train_payload):
    flt = PrivacyPolicyFilter(min_leaf_rows=15, share={"surrogates": False})
    out = flt.process(reply(dict(train_payload)), ctx())
    assert out.get_return_code() == ReturnCode.OK
    assert out.get_header(ReservedHeaderKey.TASK_NAME) == "train"  # the headers stay
    expected, _ = filter_payload(flt.policy, dict(train_payload), "site-2", "train")
    sent = out[protocol.PAYLOAD]
    assert sent.keys() == expected.keys() and sent["n_rows"] == expected["n_rows"]
    for key, value in expected["forest"].items():
        assert np.array_equal(np.asarray(sent["forest"][key]), np.asarray(value)), key
    assert set(out) == {protocol.PAYLOAD, ReservedHeaderKey.HEADERS}


def test_what_changed_is_logged_with_the_site_and_the_format(train_payload, caplog):
    flt = PrivacyPolicyFilter(min_leaf_rows=15, share={"surrogates": False})
    with caplog.at_level(logging.INFO, logger="fedforest.flare.privacy_filter"):
        flt.process(reply(dict(train_payload)), ctx())
    (line,) = [r.getMessage() for r in caplog.records if "reply:" in r.getMessage()]
    assert line.startswith("privacy filter at site-2, fedforest/site-models reply: ")
    assert "nodes under min_leaf_rows=15 pruned" in line


def test_a_refusal_keeps_the_headers_and_names_the_site_the_task_and_the_reason():
    shareable = reply(MaskScore(0.7, 4).to_payload())
    out = PrivacyPolicyFilter(min_leaf_rows=15).process(shareable, ctx(protocol.SCORE_MASK))
    assert out.get_return_code() == REFUSED and protocol.PAYLOAD not in out
    assert out.get_header(ReservedHeaderKey.TASK_NAME) == "train"
    assert out[protocol.ERROR] == (
        "privacy filter at site-2 refused the 'score_mask' reply: the mask score describes 4 "
        "rows, fewer than min_leaf_rows=15"
    )
    bare = refusal(None, "why")  # no reply to take headers from
    assert bare.get_return_code() == REFUSED and bare[protocol.ERROR] == "why"
    assert set(bare) - {ReservedHeaderKey.HEADERS} == {protocol.ERROR}


def test_only_the_payload_may_ride_on_a_reply():
    out = PrivacyPolicyFilter().process(
        reply(MaskScore(0.7, 40).to_payload(), weights=[1.0]), ctx(protocol.SCORE_MASK)
    )
    assert out.get_return_code() == REFUSED
    assert "the reply carries ['weights'] besides 'fedforest_payload'" in out[protocol.ERROR]


def test_an_error_reply_keeps_its_code_and_a_text_message_only():
    failed = make_reply(ReturnCode.EXECUTION_EXCEPTION)
    failed[protocol.ERROR] = {"rows": [1, 2]}  # not a text: dropped
    failed["debug"] = [1, 2]
    out = PrivacyPolicyFilter().process(failed, ctx())
    assert out.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    assert protocol.ERROR not in out and "debug" not in out


def test_on_received_results_the_sender_is_the_peer():
    metrics = metrics_payload(site="site-3")
    out = PrivacyPolicyFilter(min_leaf_rows=5).process(
        reply(metrics), ctx(protocol.EVALUATE, site="server", direction=FilterKey.IN, peer="site-3")
    )
    assert out.get_return_code() == ReturnCode.OK
    assert out[protocol.PAYLOAD]["privacy"]["min_leaf_rows"] == 5
    wrong = PrivacyPolicyFilter().process(
        reply(metrics), ctx(protocol.EVALUATE, site="server", direction=FilterKey.IN, peer="site-1")
    )
    assert wrong.get_return_code() == REFUSED
    assert "privacy filter at site-1 refused the 'evaluate' reply" in wrong[protocol.ERROR]


class BrokenPayload(dict):
    """A payload that breaks whoever reads it (a hostile object, not a dict's behaviour)."""

    def get(self, *args):
        raise RuntimeError("unreadable")


def test_nothing_leaves_when_the_filter_itself_fails():
    out = PrivacyPolicyFilter().process(reply(BrokenPayload(format="x")), ctx())
    assert out.get_return_code() == REFUSED and protocol.PAYLOAD not in out
    assert out[protocol.ERROR] == (
        "privacy filter at site-2 refused the 'train' reply: the filter failed (RuntimeError), "
        "so nothing was sent"
    )


def test_the_filter_refuses_to_filter_task_data():
    flt = PrivacyPolicyFilter()
    flt.set_prop(FilterContextKey.CHAIN_TYPE, FilterChainType.TASK_DATA_CHAIN)
    with pytest.raises(ValueError, match="list it under task_result_filters"):
        flt.process(reply({}), ctx())


def test_filter_payload_is_the_core_for_a_swarm_site():
    flt = PrivacyPolicyFilter(min_leaf_rows=15)
    score = MaskScore(0.7, 40).to_payload()
    assert flt.filter_payload(score, "site-2", protocol.SCORE_MASK) is score
    with pytest.raises(Refusal, match="describes 4 rows"):
        flt.filter_payload(MaskScore(0.7, 4).to_payload(), "site-2", protocol.SCORE_MASK)


def test_the_policy_filters_are_picked_out_of_a_chain():
    ours, other = PrivacyPolicyFilter(min_leaf_rows=3), object()
    assert policy_filters([other, ours, other]) == [ours]
    assert policy_filters([]) == []
