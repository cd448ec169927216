"""What a site's privacy filter lets leave, message by message, without FLARE."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedforest import protocol
from fedforest.election.ballot import SiteVote
from fedforest.federation.message_filter import MAX_QUOTED, acknowledgement, filter_payload
from fedforest.federation.messages import MAX_REASON, MaskScore, SiteModelsReply, read_message
from fedforest.federation.schema import SiteSchema
from fedforest.privacy.outgoing import DP_MASK_SCORE, Refusal
from fedforest.privacy.policy import PrivacyPolicy

from .test_messages import metrics_payload, status_payload, trained  # noqa: F401 - fixture

K20 = PrivacyPolicy(min_leaf_rows=20)
DP = PrivacyPolicy.from_dict({"dp_epsilon": 1.0, "feature_ranges": {"a": [0, 1]}})


def schema_payload(site="site-2") -> dict:
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "g": ["x", "y", "x", "y"], "t": [0, 1, 0, 1]})
    return SiteSchema.from_frame(site, frame, "t", ["g"]).to_payload()


def vote_payload(n_rows=300, mask=(True, False), scores=(0.9, 0.1)) -> dict:
    vote = SiteVote("site-2", ["a", "b"], np.array(mask), np.array(scores), n_rows)
    return vote.to_payload({"a": 0, "b": 1})


def test_a_message_that_complies_leaves_as_the_very_object_the_site_wrote():
    for payload, task in (
        (schema_payload(), protocol.SCHEMA),
        (vote_payload(), protocol.VOTE),
        (MaskScore(0.7, 40).to_payload(), protocol.SCORE_MASK),
        (status_payload(), protocol.SWARM_REPORT),
        ({}, protocol.VOTE),  # the election is off
    ):
        out, notes = filter_payload(K20, payload, "site-2", task)
        assert out is payload and notes == []


def test_a_training_reply_leaves_rewritten_from_its_tightened_parts(trained):  # noqa: F811
    policy = PrivacyPolicy(
        min_leaf_rows=20, share={**PrivacyPolicy().share, "surrogates": False, "imputers": False}
    )
    out, notes = filter_payload(policy, trained.to_payload(), "site-2", protocol.TRAIN)
    read = read_message(out, "site-2", protocol.SITE_MODELS)
    assert read.forest.n_node_samples.min() >= 20 and len(read.imputers) == 0
    assert not np.any(read.forest.surrogate_feature >= 0)
    assert out.keys() == trained.to_payload().keys() and read.n_rows == trained.n_rows
    assert any("imputers withheld (share.imputers false)" in n for n in notes)
    # the default policy sends the reply as its reader reads it
    same, notes = filter_payload(PrivacyPolicy(), trained.to_payload(), "site-2", protocol.TRAIN)
    expected = SiteModelsReply.from_payload(trained.to_payload(), "site-2").to_payload()
    assert notes == [] and same.keys() == expected.keys()
    np.testing.assert_array_equal(same["forest"]["threshold"], expected["forest"]["threshold"])


def test_a_metrics_reply_reports_the_policy_that_applied_on_the_way_out():
    payload = metrics_payload()
    out, notes = filter_payload(K20, payload, "site-2", protocol.EVALUATE)
    assert out["strategies"] is payload["strategies"]  # the rows as the site wrote them
    assert out["privacy"]["min_leaf_rows"] == 20
    assert notes == ["reported privacy policy tightened with the filter's"]
    with pytest.raises(Refusal, match=r"the evaluation \(test rows\) describes 9 rows"):
        filter_payload(K20, metrics_payload(rows=9), "site-2", protocol.EVALUATE)


def test_a_status_keeps_going_with_its_metrics_withheld_under_k():
    payload = status_payload(metrics=metrics_payload(rows=12))
    out, notes = filter_payload(K20, payload, "site-2", protocol.SWARM_REPORT)
    assert out["metrics"] is None and out["metrics_withheld"] is True
    assert out["state"] == "finished" and notes[0].startswith("test metrics withheld")
    kept, _ = filter_payload(PrivacyPolicy(min_leaf_rows=5), payload, "site-2", None)
    assert kept["metrics"]["privacy"]["min_leaf_rows"] == 5
    assert kept["metrics"]["strategies"] is payload["metrics"]["strategies"]


def test_dp_mode_refuses_aggregates_computed_on_the_rows():
    with pytest.raises(Refusal, match="'none' selector"):
        filter_payload(DP, vote_payload(), "site-2", protocol.VOTE)
    none_vote = vote_payload(mask=(True, True), scores=(1.0, 1.0))
    assert filter_payload(DP, none_vote, "site-2", protocol.VOTE)[0] is none_vote
    with pytest.raises(Refusal, match="in DP mode a site scores every mask"):
        filter_payload(DP, MaskScore(0.7, 40).to_payload(), "site-2", protocol.SCORE_MASK)
    constant = MaskScore(DP_MASK_SCORE, 40).to_payload()
    assert filter_payload(DP, constant, "site-2", protocol.SCORE_MASK)[0] is constant


@pytest.mark.parametrize(
    ("payload", "task", "reason"),
    [
        ([1, 2], protocol.TRAIN, "the payload is a list, not a fedforest payload"),
        ({"weights": 1}, protocol.TRAIN, "not a fedforest reply (format NoneType)"),
        ({"format": "x" * 100}, protocol.TRAIN, "not a fedforest reply (format str)"),
        ({"format": "nvflare/dxo"}, None, "not a fedforest reply (format 'nvflare/dxo')"),
        ({}, protocol.TRAIN, "not a fedforest reply"),
        ({"format": protocol.MODEL}, None, "the filter lets through fedforest/mask-score"),
        (
            {"format": protocol.SITE_SCHEMA},
            protocol.TRAIN,
            "the 'train' task replies 'fedforest/site-models', but the payload is",
        ),
        (
            {"format": protocol.MASK_SCORE, "version": 1},
            protocol.SCORE_MASK,
            "the payload is not a valid 'fedforest/mask-score' payload (payload from 'site-2' "
            "refused: field 'score' is missing)",
        ),
    ],
)
def test_anything_else_is_refused_with_the_reason(payload, task, reason):
    with pytest.raises(Refusal) as err:
        filter_payload(K20, payload, "site-2", task)
    assert reason in str(err.value)


def test_a_payload_from_another_site_is_refused():
    with pytest.raises(Refusal, match="from site 'site-2', but this is 'site-1'"):
        filter_payload(K20, schema_payload(), "site-1", protocol.SCHEMA)
    with pytest.raises(Refusal, match="it says it is site 'site-2'"):
        filter_payload(K20, status_payload(), "site-1", protocol.SWARM_REPORT)


def test_a_long_reason_of_the_reader_is_cut():
    payload = {**MaskScore(0.7, 40).to_payload(), "x" * 2000: 1}
    with pytest.raises(Refusal) as err:
        filter_payload(K20, payload, "site-2", protocol.SCORE_MASK)
    quoted = str(err.value).split("payload (", 1)[1]
    assert len(quoted) <= MAX_QUOTED + 1 and quoted.endswith("...)")


def test_an_acknowledgement_carries_a_refusal_text_at_most():
    assert acknowledgement(protocol.SWARM_SHARE, [], None) is None
    assert acknowledgement(protocol.SWARM_SHARE, [], "x" * 5000) == "x" * MAX_REASON
    with pytest.raises(Refusal, match=r"carries \['rows'\]; a swarm site answers it with nothing"):
        acknowledgement(protocol.SWARM_CONFIG, ["rows"], None)
    with pytest.raises(Refusal, match="'fedforest_error' is a dict, not a text"):
        acknowledgement(protocol.SWARM_SHARE, [], {"rows": [1]})


def test_a_survival_schema_leaves_with_its_event_times_on_the_policys_resolution():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "died": [0, 1, 1], "months": [3.0, 9.0, 14.0]})
    times = [12.0, 190.0, 200.0, 1500.0]
    schema = SiteSchema.from_frame(
        "site-2", frame, "died", task="survival", time="months", event_times=times
    )
    payload = schema.to_payload()
    policy = PrivacyPolicy.from_dict({"time_resolution": 30}, "local/fedforest.yaml")
    out, notes = filter_payload(policy, payload, "site-2", protocol.SCHEMA)
    assert out["event_times"] == [0.0, 180.0, 210.0, 1500.0]
    assert notes == [
        "4 event-time quantile(s) rounded to multiples of privacy.time_resolution 30 (4 distinct)"
    ]
    assert payload["event_times"] == times  # the site's own payload is not changed
    again, notes = filter_payload(policy, out, "site-2", protocol.SCHEMA)
    assert again is out and notes == []  # already on the resolution: leaves as it is
    coarse = PrivacyPolicy.from_dict({"time_resolution": 1000})
    # 12, 190 and 200 all round to 0 and 1500 to 2000 (half to even): two distinct times
    assert filter_payload(coarse, payload, "site-2", protocol.SCHEMA)[0]["event_times"] == [
        0.0,
        2000.0,
    ]
    # without a resolution, or without event times, the schema leaves untouched
    assert filter_payload(PrivacyPolicy(), payload, "site-2", protocol.SCHEMA)[0] is payload
    plain = schema_payload()
    assert filter_payload(policy, plain, "site-2", protocol.SCHEMA)[0] is plain
