"""Feature election over sites with different columns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedforest.federation.election import Ballot, SiteVote, elect


def reference_feature_election(masks, scores, n_samples, freedom_degree):
    """The reference rule of the Feature Election article (seed 002), verbatim."""
    masks = np.asarray(masks, dtype=bool)
    scores = np.abs(np.asarray(scores, dtype=float))
    n = np.asarray(n_samples, dtype=float)
    intersection = masks.all(axis=0)
    union = masks.any(axis=0)
    disputed = np.flatnonzero(union & ~intersection)
    lo = scores.min(axis=1, keepdims=True)
    span = scores.max(axis=1, keepdims=True) - lo
    norm = np.divide(scores - lo, span, out=np.zeros_like(scores), where=span > 0)
    weights = n / n.sum()
    votes = weights @ norm
    k = math.ceil(freedom_degree * len(disputed))
    winners = disputed[np.argsort(-votes[disputed], kind="stable")[:k]]
    global_mask = intersection.copy()
    global_mask[winners] = True
    stats = {
        "intersection": int(intersection.sum()),
        "union": int(union.sum()),
        "disputed": len(disputed),
        "kept": int(global_mask.sum()),
    }
    return global_mask, stats


NAMES = [f"f{i:02d}" for i in range(30)]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("fd", [0.0, 0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("aggregation", ["weighted", "uniform"])
def test_identical_columns_equal_the_reference_rule(seed, fd, aggregation):
    rng = np.random.default_rng(seed)
    masks = rng.random((3, 30)) < 0.5
    scores = rng.normal(size=(3, 30)) * (1 + masks)
    n = rng.integers(50, 500, size=3)
    weights = n if aggregation == "weighted" else np.ones(3)
    expected, stats = reference_feature_election(masks, scores, weights, fd)
    votes = [SiteVote(f"s{i}", NAMES, masks[i], scores[i], int(n[i])) for i in range(3)]
    result = elect(votes, freedom_degree=fd, aggregation=aggregation)
    assert result.mask.tolist() == expected.tolist()
    assert result.stats == stats


def test_absent_sites_abstain():
    # 'rare' exists only at site c, which selects it: it is in the intersection
    a = SiteVote("a", ["age", "bmi"], [True, False], [1.0, 0.2], 100)
    b = SiteVote("b", ["age", "bmi"], [True, True], [0.2, 1.0], 100)
    c = SiteVote("c", ["age", "bmi", "rare"], [True, False, True], [0.5, 0.1, 1.0], 10)
    for fd in (0.0, 0.5, 1.0):
        result = elect([a, b, c], freedom_degree=fd)
        assert "rare" in result.selected
    result = elect([a, b, c], freedom_degree=0.0)
    assert result.intersection == ["age", "rare"]
    assert result.sites_with["rare"] == ["c"]
    # its vote is c's normalised score alone, not diluted by a and b
    assert result.votes["rare"] == pytest.approx(1.0)
    assert result.votes["bmi"] == pytest.approx((100 * 0.0 + 100 * 1.0 + 10 * 0.0) / 210)


def test_a_private_feature_the_site_did_not_select_is_dropped():
    a = SiteVote("a", ["age", "x"], [True, False], [1.0, 0.0], 100)
    b = SiteVote("b", ["age", "y"], [True, True], [1.0, 0.5], 100)
    result = elect([a, b], freedom_degree=1.0)
    assert result.selected == ["age", "y"]


def test_freedom_degree_picks_top_disputed_by_vote_with_ties_by_name():
    feats = ["d", "c", "b", "a", "keep"]
    a = SiteVote("a", feats, [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], 10)
    b = SiteVote("b", feats, [0, 0, 0, 0, 1], [0, 0, 0, 0, 1], 10)
    ballot = Ballot([a, b])
    assert ballot.count(0.0).selected == ["keep"]
    # every disputed vote ties at 0.5 (a: 1, b: 0): names decide
    assert ballot.count(0.25).selected == ["a", "keep"]
    assert ballot.count(0.5).selected == ["a", "b", "keep"]
    assert ballot.count(1.0).selected == ["a", "b", "c", "d", "keep"]


def test_weighted_and_uniform_differ_as_expected():
    a = SiteVote("a", ["x", "y", "z"], [1, 1, 1], [1.0, 0.0, 0.5], 1000)
    b = SiteVote("b", ["x", "y", "z"], [1, 0, 0], [1.0, 1.0, 0.0], 10)
    # y: big site a scores it lowest; z: a scores it in the middle
    assert elect([a, b], 0.5, "weighted").selected == ["x", "z"]
    assert elect([a, b], 0.5, "uniform").selected == ["x", "y"]


def test_always_keep():
    a = SiteVote("a", ["x", "y"], [True, False], [1.0, 0.0], 10)
    b = SiteVote("b", ["x", "y"], [True, False], [1.0, 0.0], 10)
    assert elect([a, b], 0.0, always_keep=["y"]).selected == ["x", "y"]
    with pytest.raises(ValueError, match="always_keep"):
        elect([a, b], 0.0, always_keep=["nope"])


@pytest.mark.parametrize("fd", [-0.1, 1.5, "half", None, True])
def test_bad_freedom_degree_is_refused(fd):
    a = SiteVote("a", ["x"], [True], [1.0], 10)
    with pytest.raises(ValueError, match="freedom_degree"):
        elect([a], freedom_degree=fd)


def test_sites_sharing_no_column_are_refused():
    a = SiteVote("a", ["x"], [True], [1.0], 10)
    b = SiteVote("b", ["y"], [True], [1.0], 10)
    with pytest.raises(ValueError, match="share no column"):
        elect([a, b])


def test_other_bad_ballots():
    a = SiteVote("a", ["x", "y"], [True, False], [1.0, 0.0], 10)
    with pytest.raises(ValueError, match="aggregation"):
        elect([a], aggregation="median")
    with pytest.raises(ValueError, match="same site"):
        elect([a, a])
    with pytest.raises(ValueError, match="one entry per feature"):
        elect([SiteVote("b", ["x", "y"], [True], [1.0, 0.0], 10)])
    with pytest.raises(ValueError, match="finite"):
        elect([SiteVote("b", ["x", "y"], [True, True], [1.0, np.nan], 10)])
    with pytest.raises(ValueError, match="at least one"):
        elect([])


def test_vote_payload_round_trip_by_index_and_refusals():
    from fedforest import PayloadError

    vote = SiteVote("a", ["bmi", "age"], [True, False], [0.4, 0.1], 42)
    features = ["age", "bmi", "hba1c"]
    payload = vote.to_payload({f: i for i, f in enumerate(features)})
    assert payload["feature_index"].tolist() == [1, 0]
    back = SiteVote.from_payload(payload, sender="a", features=features)
    assert back.features == vote.features and back.mask.tolist() == [True, False]
    assert back.n_rows == 42
    bad = dict(payload, feature_index=np.array([1, 9], dtype=np.int32))
    with pytest.raises(PayloadError, match="feature_index"):
        SiteVote.from_payload(bad, sender="a", features=features)
    bad = dict(payload, scores=np.array([np.inf, 0.0]))
    with pytest.raises(PayloadError, match="scores"):
        SiteVote.from_payload(bad, sender="a", features=features)
    by_name = SiteVote.from_payload(vote.to_payload())
    assert by_name.features == ["bmi", "age"]


# ------------------------------------------------------------------ hostile vote payloads
def _vote_payload(by_index=True):
    vote = SiteVote("a", ["bmi", "age"], [True, False], [0.4, 0.1], 42)
    return vote.to_payload({"age": 0, "bmi": 1, "hba1c": 2} if by_index else None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("format", np.array("fedforest/site-vote")),
        ("format", np.array(["fedforest/site-vote"])),
        ("version", np.array([1])),
        ("version", True),
        ("site", None),
        ("site", np.array("a")),
        ("site", ""),
        ("feature_index", None),
        ("feature_index", np.array([1, 0], dtype=np.uint64) + np.uint64(2**63)),
        ("feature_index", np.array([[1, 0]])),
        ("feature_index", np.array([1.0, 0.0])),
        ("feature_index", np.array([True, False])),
        ("feature_index", np.array([1, 1])),
        ("feature_index", np.array([1, -1])),
        ("feature_index", [1, 0]),
        ("feature_index", np.arange(10**3)),
        ("mask", None),
        ("mask", np.array([1, 0])),
        ("mask", True),
        ("scores", None),
        ("scores", np.array([0.4, np.nan])),
        ("scores", np.array(["0.4", "0.1"])),
        ("scores", 0.5),
        ("n_rows", None),
        ("n_rows", 0),
        ("n_rows", True),
        ("n_rows", 42.0),
        ("n_rows", 10**400),
        ("n_rows", np.array(42)),
        ("n_rows", "42"),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_malformed_vote_fields_are_refused_naming_the_sender_and_field(field, value):
    from fedforest import PayloadError

    payload = dict(_vote_payload(), **{field: value})
    with pytest.raises(PayloadError) as info:
        SiteVote.from_payload(payload, sender="site-3", features=["age", "bmi", "hba1c"])
    message = str(info.value)
    assert message.startswith("payload from 'site-3' refused: ") and f"'{field}'" in message
    assert "truth value" not in message


@pytest.mark.parametrize(
    "features",
    [None, ["bmi", 3], ["bmi", None], [["bmi"], "age"], ["bmi", "bmi"], ["bmi", ""], "bmi"],
    ids=repr,
)
def test_vote_features_must_be_distinct_names(features):
    from fedforest import PayloadError

    payload = dict(_vote_payload(by_index=False), features=features)
    with pytest.raises(PayloadError, match="'features'"):
        SiteVote.from_payload(payload, sender="site-3")


def test_a_vote_with_both_names_and_indices_is_refused():
    from fedforest import PayloadError

    payload = dict(_vote_payload(), features=["bmi", "age"])
    with pytest.raises(PayloadError, match="both present"):
        SiteVote.from_payload(payload, sender="site-3", features=["age", "bmi", "hba1c"])


@pytest.mark.parametrize("key", [1, None, ("site",)], ids=repr)
def test_a_vote_with_a_key_that_is_not_a_string_is_refused(key):
    from fedforest import PayloadError

    payload = _vote_payload()
    payload[key] = "a"
    with pytest.raises(PayloadError, match="field names must be strings"):
        SiteVote.from_payload(payload, sender="site-3", features=["age", "bmi", "hba1c"])
